import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingFile;

/**
 * Boils a Java Flight Recorder file down to lines that profile_servers.py aggregates (run it as a
 * single-file program: {@code java JfrSplit.java x.jfr}):
 * <ul>
 * <li>{@code sample <n> <thread>|<frame;frame;...>}: execution samples, root frame first (the
 * "collapsed stacks" of flame graphs), thread names with digits replaced by {@code #};
 * <li>{@code socket <read|write> <port> <events> <bytes>}: socket I/O per remote port;
 * <li>{@code gc <collections> <pause ms>}.
 * </ul>
 */
public final class JfrSplit {
  private JfrSplit() {}

  public static void main(String[] args) throws Exception {
    Map<String,Integer> stacks = new HashMap<>();
    Map<String,long[]> sockets = new TreeMap<>();
    long gcs = 0;
    double gcMs = 0;
    try (RecordingFile file = new RecordingFile(Path.of(args[0]))) {
      while (file.hasMoreEvents()) {
        RecordedEvent e = file.readEvent();
        String type = e.getEventType().getName();
        switch (type) {
          case "jdk.ExecutionSample" -> {
            RecordedThread t = e.getThread("sampledThread");
            String thread = t == null || t.getJavaName() == null ? "?" : t.getJavaName().replaceAll("\\d+", "#");
            stacks.merge(thread + "|" + collapse(e.getStackTrace()), 1, Integer::sum);
          }
          case "jdk.SocketRead", "jdk.SocketWrite" -> {
            String dir = type.endsWith("Read") ? "read" : "write";
            long bytes = e.getLong(dir.equals("read") ? "bytesRead" : "bytesWritten");
            long[] acc = sockets.computeIfAbsent(dir + " " + e.getInt("port"), k -> new long[2]);
            acc[0]++;
            acc[1] += Math.max(0, bytes);
          }
          case "jdk.GarbageCollection" -> {
            gcs++;
            gcMs += e.getDuration().toNanos() / 1e6;
          }
          default -> { }
        }
      }
    }
    StringBuilder out = new StringBuilder();
    stacks.forEach((k, n) -> out.append("sample ").append(n).append(' ').append(k).append('\n'));
    sockets.forEach((k, v) -> out.append("socket ").append(k).append(' ').append(v[0]).append(' ')
        .append(v[1]).append('\n'));
    out.append("gc ").append(gcs).append(' ').append(String.format("%.1f", gcMs)).append('\n');
    System.out.print(out);
  }

  private static String collapse(RecordedStackTrace st) {
    if (st == null) {
      return "?";
    }
    List<RecordedFrame> frames = st.getFrames();
    StringBuilder sb = new StringBuilder();
    for (int i = frames.size() - 1; i >= 0; i--) {
      RecordedFrame f = frames.get(i);
      if (sb.length() > 0) {
        sb.append(';');
      }
      sb.append(f.getMethod().getType().getName()).append('.').append(f.getMethod().getName());
    }
    return (st.isTruncated() ? "...;" : "") + sb;
  }
}
