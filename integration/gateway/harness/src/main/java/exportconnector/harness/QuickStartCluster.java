package exportconnector.harness;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.accumulo.minicluster.ServerType;
import org.apache.accumulo.miniclusterImpl.MiniAccumuloClusterImpl;
import org.apache.accumulo.miniclusterImpl.MiniAccumuloConfigImpl;

/**
 * A MiniAccumuloCluster whose helper JVMs (ZooKeeper, manager, garbage collector and the one-shot
 * Initialize / SetGoalState tools) run with the C1 compiler only and the serial GC. On 2 cores
 * the C2 compiler threads of ~7 JVMs starting at once dominate start-up: two clusters start in
 * ~11 s instead of ~19 s. The tablet server keeps the JVM defaults, since it does the heavy work.
 *
 * <p>MAC 2.1 has no setting for JVM options, so this overrides its two exec entry points (public
 * methods of the 2.1.4 implementation class).
 */
final class QuickStartCluster extends MiniAccumuloClusterImpl {
  private static final List<String> QUICK_JVM =
      List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms32m");

  QuickStartCluster(MiniAccumuloConfigImpl config) throws IOException {
    super(config);
  }

  /** The one-shot tools (Initialize, SetGoalState, ...). */
  @Override
  public ProcessInfo exec(Class<?> clazz, List<String> jvmArgs, String... args)
      throws IOException {
    List<String> all = new ArrayList<>(QUICK_JVM);
    if (jvmArgs != null) {
      all.addAll(jvmArgs);
    }
    return super.exec(clazz, all, args);
  }

  /** The long-running servers. */
  @Override
  public ProcessInfo _exec(Class<?> clazz, ServerType type, Map<String,String> configOverrides,
      String... args) throws IOException {
    boolean plain = type == ServerType.TABLET_SERVER || getConfig().isJDWPEnabled()
        || (configOverrides != null && !configOverrides.isEmpty());
    if (plain) {
      return super._exec(clazz, type, configOverrides, args);
    }
    // what MAC itself passes for these servers, plus the quick flags (via exec above)
    List<String> jvm = new ArrayList<>();
    if (type == ServerType.ZOOKEEPER) {
      jvm.add("-Dzookeeper.jmx.log4j.disable=true");
    }
    jvm.add("-Xmx" + getConfig().getMemory(type)); // after exec's default -Xmx, so it wins
    return exec(clazz, jvm, args);
  }
}
