package exportconnector.gateway;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.proxy.thrift.AccumuloException;
import org.apache.accumulo.proxy.thrift.TableNotFoundException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The bulk imports of one gateway: staging directories under {@code gateway.bulk.dir} on the
 * cluster's file system, each for one destination table, holding the RFiles that
 * {@link BulkFileSession}s wrote, until {@link #load} hands them to Accumulo's bulk import.
 *
 * <p>A staging directory {@code <base>/<id>} holds completed files ({@code <name>.rf}) and one
 * folder, {@code _bulk}, with the destination table's name and the files still being written
 * (Accumulo's bulk import ignores folders, so it never sees a partial file). Everything about a bulk
 * import is in its directory: any gateway with the same {@code gateway.bulk.dir} on the same file
 * system serves its id. Only the file writers open on this gateway are tracked here.
 */
final class BulkImports {
  private static final Logger LOG = LoggerFactory.getLogger(BulkImports.class);
  /** Where staging directories go unless gateway.bulk.dir says otherwise (default file system). */
  static final String DEFAULT_DIR = "/tmp/accumulo-export-bulk";
  /** The file Accumulo's bulk import client creates, then deletes, to check a directory is writable. */
  static final String WRITABILITY_PROBE = "isWritable";
  private static final Pattern ID =
      Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  private static final Pattern FILE_NAME = Pattern.compile("[A-Za-z0-9_-]{1,128}");
  /** The folder of a staging directory that bulk imports skip: the table's name, partial files. */
  static final String WORK_DIR = "_bulk";
  private static final String TABLE_FILE = "table";
  static final String EXTENSION = ".rf";

  private final AccumuloClient client;
  private final String configured;
  private FileSystem fs; // opened on first use: a gateway that never bulk-loads never touches it
  private Path base;
  /** Per bulk id: the file writers open on this gateway, by file name. */
  private final Map<String,Map<String,BulkFileSession>> open = new ConcurrentHashMap<>();
  /** Per bulk id: one file writer change, load or delete at a time on this gateway. */
  private final Map<String,Object> locks = new ConcurrentHashMap<>();

  BulkImports(AccumuloClient client, String configuredDir) {
    this.client = client;
    this.configured = configuredDir == null || configuredDir.isBlank() ? DEFAULT_DIR : configuredDir;
  }

  /** A bulk import's directory, resolved. */
  record Staging(String id, Path dir, String table) {
    Path workDir() {
      return new Path(dir, WORK_DIR);
    }
  }

  /**
   * The file system and base directory, opened once. A path without a scheme is on the default file
   * system of the Hadoop configuration the gateway sees (core-site.xml on its classpath; without one,
   * the local file system). The instance is the gateway's own (not Hadoop's shared cache), and on a
   * checksummed file system (Hadoop's local one) it writes no .crc side files: Accumulo moves only
   * the RFiles into the table.
   */
  synchronized FileSystem fs() throws IOException {
    if (fs == null) {
      Configuration conf = new Configuration();
      Path p = new Path(configured);
      FileSystem f = p.toUri().getScheme() == null
          ? FileSystem.newInstance(FileSystem.getDefaultUri(conf), conf)
          : FileSystem.newInstance(p.toUri(), conf);
      if (f instanceof ChecksumFileSystem) {
        f.setWriteChecksum(false);
        f.setVerifyChecksum(false);
      }
      base = f.makeQualified(p);
      fs = f;
    }
    return fs;
  }

  synchronized Path base() throws IOException {
    fs();
    return base;
  }

  Object lock(String id) {
    return locks.computeIfAbsent(id, k -> new Object());
  }

  /** A new staging directory for {@code table}; its id. */
  String create(String table) throws Exception {
    if (!client.tableOperations().exists(table)) {
      throw new TableNotFoundException("table " + table + " does not exist (bulk import not created)");
    }
    FileSystem f = fs();
    String id = UUID.randomUUID().toString();
    Path dir = new Path(base(), id);
    Path work = new Path(dir, WORK_DIR);
    if (!f.mkdirs(work)) {
      throw new AccumuloException("cannot create the bulk staging directory " + dir);
    }
    try (OutputStream out = f.create(new Path(work, TABLE_FILE), false)) {
      out.write(table.getBytes(StandardCharsets.UTF_8));
    }
    LOG.info("bulk import {} for table {} in {}", id, table, dir);
    return id;
  }

  /**
   * The staging directory of {@code id}; an AccumuloException whose message starts with {@link
   * ErrorNames#BULK_IMPORT_NOT_FOUND} if there is none.
   */
  Staging resolve(String id) throws Exception {
    Path dir = dir(id);
    String table;
    try (InputStream in = fs().open(new Path(new Path(dir, WORK_DIR), TABLE_FILE))) {
      table = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (FileNotFoundException e) {
      // named, so that a client resuming an import can tell "not here" from any other failure
      throw new AccumuloException(ErrorNames.message(ErrorNames.BULK_IMPORT_NOT_FOUND, "no bulk import "
          + id + " in " + base() + " (deleted, or made by a gateway with another gateway.bulk.dir)"));
    }
    return new Staging(id, dir, table);
  }

  private Path dir(String id) throws Exception {
    if (id == null || !ID.matcher(id).matches()) {
      throw new AccumuloException("not a bulk import id: " + Conversions.printable(
          String.valueOf(id).getBytes(StandardCharsets.UTF_8)));
    }
    return new Path(base(), id);
  }

  static String checkFileName(String name) throws AccumuloException {
    if (name == null || !FILE_NAME.matcher(name).matches()) {
      throw new AccumuloException("a bulk file name is 1 to 128 letters, digits, '_' or '-' (the"
          + " gateway adds " + EXTENSION + "), got " + Conversions.printable(
              String.valueOf(name).getBytes(StandardCharsets.UTF_8)));
    }
    return name;
  }

  // ---- file writers open on this gateway ----

  /** Records {@code s} as the open writer of its file; returns the one it replaces, if any. */
  BulkFileSession opened(BulkFileSession s) {
    return open.computeIfAbsent(s.bulkId, k -> new ConcurrentHashMap<>()).put(s.name, s);
  }

  /** The open writer of that file on this gateway, or null. */
  BulkFileSession openFile(String id, String name) {
    Map<String,BulkFileSession> files = open.get(id);
    return files == null ? null : files.get(name);
  }

  /** Every writer of bulk import {@code id} open on this gateway. */
  List<BulkFileSession> openFiles(String id) {
    Map<String,BulkFileSession> files = open.get(id);
    return files == null ? List.of() : new ArrayList<>(files.values());
  }

  /** A writer finished (closed, failed or discarded): no longer open. */
  void forget(BulkFileSession s) {
    Map<String,BulkFileSession> files = open.get(s.bulkId);
    if (files != null) {
      files.remove(s.name, s);
    }
  }

  /** Moves a completed file into the staging directory, replacing an earlier file of that name. */
  void complete(Path partial, Path finished) throws IOException {
    FileSystem f = fs();
    if (f.exists(finished)) {
      f.delete(finished, false);
    }
    if (!f.rename(partial, finished)) {
      throw new IOException("cannot move " + partial + " to " + finished);
    }
  }

  // ---- load, count, delete ----

  /** The completed files waiting in the staging directory, by name (sizes in bytes). */
  Map<String,Long> files(Staging s) throws IOException {
    Map<String,Long> out = new TreeMap<>();
    for (FileStatus st : fs().listStatus(s.dir())) {
      String name = st.getPath().getName();
      if (st.isFile() && name.endsWith(EXTENSION)) {
        out.put(name, st.getLen());
      }
    }
    return out;
  }

  /**
   * {@code importDirectory(dir).to(table).tableTime(false).load()}: every cell keeps the timestamp
   * its file gives it. Accumulo moves the files into the table; with none left (an import that
   * succeeded before) nothing is done.
   */
  void load(String id) throws Exception {
    synchronized (lock(id)) {
      Staging s = resolve(id);
      List<String> writing = new ArrayList<>();
      for (BulkFileSession f : openFiles(id)) {
        writing.add(f.name);
      }
      if (!writing.isEmpty()) {
        throw new AccumuloException("bulk import " + id + ": file(s) " + writing + " still being"
            + " written: close them (closeWriter) before importBulk");
      }
      Map<String,Long> files = files(s);
      if (files.isEmpty()) {
        LOG.info("bulk import {} into {}: no files left to load (loaded before, or none written)", id,
            s.table());
        return;
      }
      // Accumulo's client probes the directory by creating WRITABILITY_PROBE and deleting it again,
      // and refuses one where it exists: a load killed between the two would block every resume.
      fs().delete(new Path(s.dir(), WRITABILITY_PROBE), false);
      long t0 = System.nanoTime();
      client.tableOperations().importDirectory(s.dir().toString()).to(s.table()).tableTime(false)
          .load();
      LOG.info("bulk import {} loaded {} file(s) into {} in {} ms", id, files.size(), s.table(),
          (System.nanoTime() - t0) / 1_000_000);
    }
  }

  /** Removes the staging directory (gone already: nothing to do). */
  void delete(String id) throws Exception {
    Path dir = dir(id);
    fs().delete(dir, true);
    locks.remove(id);
    open.remove(id);
  }
}
