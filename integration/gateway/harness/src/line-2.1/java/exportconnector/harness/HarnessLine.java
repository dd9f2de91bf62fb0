package exportconnector.harness;

import java.util.Map;

/** What differs between Accumulo lines for the embedded clusters; this build is for Accumulo 2.1. */
final class HarnessLine {
  static final String NAME = "2.1";

  private HarnessLine() {}

  /**
   * Call once, on one thread, before starting or stopping clusters side by side. Accumulo 2.1's
   * AccumuloVFSClassLoader spins forever when two threads race to create it (stopping two MACs
   * at once did exactly that), and creating it inside a shutdown hook fails because it registers
   * a hook of its own. So create it up front.
   */
  @SuppressWarnings("deprecation")
  static void prepareJvm() throws Exception {
    org.apache.accumulo.start.classloader.vfs.AccumuloVFSClassLoader.getClassLoader();
  }

  /** This line's site settings beside the common ones (none for 2.1). */
  static void adjustSite(Map<String,String> site) {}
}
