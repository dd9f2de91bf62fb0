import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * Loads every class of the given packages that a jar holds, from that jar alone, and resolves the
 * types of their fields, methods and constructors: a class whose dependencies the jar lacks fails
 * here (NoClassDefFoundError), as it would in a deployed gateway that touched it.
 *
 * <pre>java -cp JAR tests/java/JarClassesLoad.java JAR PACKAGE_PREFIX...</pre>
 *
 * Prints one JSON line: {"checked": N, "failed": ["class: error", ...]}; exit status 0 either way.
 * (Java's single-file source launcher compiles this in memory: no build step.)
 */
public class JarClassesLoad {
  public static void main(String[] args) throws Exception {
    String jar = args[0];
    List<String> prefixes = List.of(args).subList(1, args.length);
    ClassLoader loader = ClassLoader.getSystemClassLoader();
    int checked = 0;
    List<String> failed = new ArrayList<>();
    try (ZipFile zip = new ZipFile(jar)) {
      for (ZipEntry e : Collections.list(zip.entries())) {
        String name = e.getName();
        if (!name.endsWith(".class") || name.startsWith("META-INF/") || name.endsWith("module-info.class")) {
          continue;
        }
        String cls = name.substring(0, name.length() - ".class".length()).replace('/', '.');
        if (prefixes.stream().noneMatch(cls::startsWith)) {
          continue;
        }
        checked++;
        try {
          Class<?> c = Class.forName(cls, false, loader);
          c.getDeclaredFields();
          c.getDeclaredMethods();
          c.getDeclaredConstructors();
        } catch (Throwable t) {
          failed.add(cls + ": " + t);
        }
      }
    }
    StringBuilder out = new StringBuilder("{\"checked\": " + checked + ", \"failed\": [");
    for (int i = 0; i < failed.size(); i++) {
      out.append(i == 0 ? "" : ", ").append('"')
          .append(failed.get(i).replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
    }
    System.out.println(out.append("]}"));
  }
}
