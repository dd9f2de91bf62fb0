package exportconnector.gateway;

/**
 * What differs between Accumulo lines for the gateway; this build is for Accumulo 4.0. Each line's
 * copy of this class sits in src/line-X/java, chosen by the build's profile (-Daccumulo.line=X).
 */
final class AccumuloLine {
  /** The line this gateway serves. */
  static final String NAME = "4.0";

  private AccumuloLine() {}

  /**
   * Whether this build serves tablet servers of line {@code servers} (as {@link ServerLine} reads
   * it): 4.0 clients send a header whose major.minor must match the servers'.
   */
  static boolean serves(String servers) {
    // ServerLine cannot tell 4.0's lock data from 3.0's: only 2.1 is refused here, a 3.0 cluster by the
    // 4.0 client's own header check at the first call
    return !"2.1".equals(servers);
  }
}
