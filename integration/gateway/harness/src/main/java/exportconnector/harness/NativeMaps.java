package exportconnector.harness;

import java.io.File;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Accumulo's native in-memory map library (libaccumulo.so) for the embedded tablet servers, as
 * production tablet servers use it. The harness builds it (integration/harness/build.py); when it
 * is missing or does not load, the clusters run with Java's in-memory map and one log line says so.
 */
final class NativeMaps {
  private static final Logger LOG = LoggerFactory.getLogger(NativeMaps.class);
  static final String LIBRARY = System.mapLibraryName("accumulo");

  private NativeMaps() {}

  /**
   * The library in {@code dir}, or null (and one log line) when Java maps must do. It is loaded here
   * once first: a tablet server asked for native maps that cannot load them exits at start-up.
   */
  static File find(String dir) {
    if (dir == null) {
      LOG.warn("tablet servers use Java in-memory maps: no --native-maps folder given");
      return null;
    }
    File lib = new File(dir, LIBRARY).getAbsoluteFile();
    if (!lib.isFile()) {
      LOG.warn("tablet servers use Java in-memory maps: {} is missing (its build failed or did not "
          + "run: see {})", lib, new File(lib.getParentFile(), "build.log"));
      return null;
    }
    try {
      System.load(lib.getPath());
    } catch (UnsatisfiedLinkError | SecurityException e) {
      LOG.warn("tablet servers use Java in-memory maps: {} does not load ({})", lib, e.getMessage());
      return null;
    }
    LOG.info("tablet servers use native in-memory maps from {}", lib);
    return lib;
  }
}
