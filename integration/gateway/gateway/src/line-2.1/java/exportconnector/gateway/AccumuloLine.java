package exportconnector.gateway;

/**
 * What differs between Accumulo lines for the gateway; this build is for Accumulo 2.1. Each line's
 * copy of this class sits in src/line-X/java, chosen by the build's profile (-Daccumulo.line=X).
 */
final class AccumuloLine {
  /** The line this gateway serves. */
  static final String NAME = "2.1";

  private AccumuloLine() {}

  /**
   * Whether this build serves tablet servers of line {@code servers} (as {@link ServerLine} reads
   * it): 2.1 clients talk to 2.1 servers only (3.0 moved writes to another RPC service).
   */
  static boolean serves(String servers) {
    return "2.1".equals(servers);
  }
}
