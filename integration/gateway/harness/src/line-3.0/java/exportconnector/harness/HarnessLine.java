package exportconnector.harness;

import java.util.Map;

/** What differs between Accumulo lines for the embedded clusters; this build is for Accumulo 3.0. */
final class HarnessLine {
  static final String NAME = "3.0";

  private HarnessLine() {}

  /** Nothing to prepare: the VFS class loader that 2.1 had to create up front is gone since 3.0. */
  static void prepareJvm() {}

  /** This line's site settings beside the common ones (none). */
  static void adjustSite(Map<String,String> site) {}
}
