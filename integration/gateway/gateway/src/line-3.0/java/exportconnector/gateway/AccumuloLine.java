package exportconnector.gateway;

/**
 * What differs between Accumulo lines for the gateway; this build is for Accumulo 3.0. Each line's
 * copy of this class sits in src/line-X/java, chosen by the build's profile (-Daccumulo.line=X).
 */
final class AccumuloLine {
  /** The line this gateway serves. */
  static final String NAME = "3.0";

  private AccumuloLine() {}

  /**
   * Whether this build serves tablet servers of line {@code servers} (as {@link ServerLine} reads
   * it): 3.0 clients talk to 3.x servers only (its RPC services differ from 2.1's).
   */
  static boolean serves(String servers) {
    return "3.0".equals(servers);
  }
}
