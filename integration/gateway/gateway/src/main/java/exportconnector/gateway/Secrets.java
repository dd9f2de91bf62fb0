package exportconnector.gateway;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads passwords and the gateway secret from the environment or from a file, never from a flag
 * value (flags show up in `ps`). Values are never logged.
 */
public final class Secrets {
  private static final Logger LOG = LoggerFactory.getLogger(Secrets.class);

  private Secrets() {}

  /**
   * The file's content (one trailing newline stripped) when a path is given, else the environment
   * variable; fails with a message naming both sources when neither yields a non-empty value.
   */
  public static String read(String what, String envVar, String filePath, String fileFlag) {
    String value;
    if (filePath != null) {
      value = readFile(what, Path.of(filePath));
    } else {
      value = System.getenv(envVar);
    }
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException(what + " is missing: set the environment variable " + envVar
          + (fileFlag == null ? "" : " or pass --" + fileFlag + " PATH"));
    }
    return value;
  }

  private static String readFile(String what, Path path) {
    try {
      warnIfOthersCanRead(what, path);
      String s = Files.readString(path, StandardCharsets.UTF_8);
      if (s.endsWith("\n")) {
        s = s.substring(0, s.length() - 1);
      }
      if (s.endsWith("\r")) {
        s = s.substring(0, s.length() - 1);
      }
      return s;
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read the " + what + " file " + path + ": " + e);
    }
  }

  private static void warnIfOthersCanRead(String what, Path path) throws IOException {
    try {
      Set<PosixFilePermission> perms = Files.getPosixFilePermissions(path);
      Set<PosixFilePermission> open = EnumSet.of(PosixFilePermission.GROUP_READ,
          PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_WRITE,
          PosixFilePermission.OTHERS_WRITE);
      open.retainAll(perms);
      if (!open.isEmpty()) {
        LOG.warn("the {} file {} is readable or writable by others; chmod 600 it", what, path);
      }
    } catch (UnsupportedOperationException e) {
      // not a POSIX file system: nothing to check
    }
  }
}
