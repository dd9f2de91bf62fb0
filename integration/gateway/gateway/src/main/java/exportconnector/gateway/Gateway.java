package exportconnector.gateway;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.core.client.BatchScanner;
import org.apache.accumulo.core.client.BatchWriter;
import org.apache.accumulo.core.client.IteratorSetting;
import org.apache.accumulo.core.client.Scanner;
import org.apache.accumulo.core.client.admin.CompactionConfig;
import org.apache.accumulo.core.client.admin.DiskUsage;
import org.apache.accumulo.core.client.admin.NewTableConfiguration;
import org.apache.accumulo.core.client.summary.CountingSummarizer;
import org.apache.accumulo.core.client.summary.Summary;
import org.apache.accumulo.core.client.summary.summarizers.VisibilitySummarizer;
import org.apache.accumulo.core.data.ConditionalMutation;
import org.apache.accumulo.core.data.Mutation;
import org.apache.accumulo.core.security.Authorizations;
import org.apache.accumulo.core.security.ColumnVisibility;
import org.apache.accumulo.core.security.VisibilityEvaluator;
import org.apache.accumulo.proxy.thrift.AccumuloProxy;
import org.apache.accumulo.proxy.thrift.BatchScanOptions;
import org.apache.accumulo.proxy.thrift.ColumnUpdate;
import org.apache.accumulo.proxy.thrift.ConditionalStatus;
import org.apache.accumulo.proxy.thrift.ConditionalUpdates;
import org.apache.accumulo.proxy.thrift.ConditionalWriterOptions;
import org.apache.accumulo.proxy.thrift.IteratorScope;
import org.apache.accumulo.proxy.thrift.MutationsRejectedException;
import org.apache.accumulo.proxy.thrift.PluginConfig;
import org.apache.accumulo.proxy.thrift.ScanColumn;
import org.apache.accumulo.proxy.thrift.ScanOptions;
import org.apache.accumulo.proxy.thrift.ScanResult;
import org.apache.accumulo.proxy.thrift.TimeType;
import org.apache.accumulo.proxy.thrift.UnknownScanner;
import org.apache.accumulo.proxy.thrift.UnknownWriter;
import org.apache.accumulo.proxy.thrift.WriterOptions;
import org.apache.hadoop.io.Text;
import org.apache.thrift.TApplicationException;
import org.apache.thrift.TException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The proxy interface of the IDL, served over one AccumuloClient. Table-level calls check the
 * shared secret; calls on an open writer or scanner carry its id instead.
 *
 * <p>Errors: the methods throw Accumulo's own exceptions freely; {@link #call} maps them onto the
 * IDL's, and {@link DeclaredExceptionsGuard} catches whatever a method does not declare.
 */
final class Gateway implements AccumuloProxy.Iface, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Gateway.class);

  private final AccumuloClient client;
  private final SharedSecret secret;
  /** Table writers and bulk file writers: the writer calls (update, flush, closeWriter) serve both. */
  private final SessionRegistry<UpdateSession> writers = new SessionRegistry<>("writer");
  private final SessionRegistry<ScannerSession> scanners = new SessionRegistry<>("scanner");
  private final SessionRegistry<ConditionalWriterSession> conditionals =
      new SessionRegistry<>("conditional writer");
  private final ScheduledExecutorService sweeper;
  // look-ups that a scan's timeout bounds (see scanAuths)
  private final ExecutorService lookups = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "gateway-lookup");
    t.setDaemon(true);
    return t;
  });
  // one warning per unknown writer id, not one per update call
  private final Set<String> warnedUnknownWriters = ConcurrentHashMap.newKeySet();
  private final BulkImports bulk;

  /**
   * The extensions of the IDL this gateway serves (gatewayExtensions): ScanOptions' and
   * BatchScanOptions' timeoutMs, ScanOptions' isolated, and the bulk calls. Clients spell them too
   * ({@code connector/accumulo/extensions.py}).
   */
  static final Set<String> EXTENSIONS =
      Set.of("scan.timeoutMs", "scan.isolated", "bulk.rfile", "summary.visibility");

  Gateway(AccumuloClient client, SharedSecret secret, long idleTimeoutMs, String bulkDir) {
    this.client = client;
    this.secret = secret;
    this.bulk = new BulkImports(client, bulkDir);
    long idleNanos = TimeUnit.MILLISECONDS.toNanos(idleTimeoutMs);
    // sweep often enough that a session lives at most ~1.25x its idle time
    long period = Math.max(50, Math.min(idleTimeoutMs / 4, 30_000));
    this.sweeper = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "gateway-idle-sweeper");
      t.setDaemon(true);
      return t;
    });
    sweeper.scheduleWithFixedDelay(() -> {
      try {
        writers.sweep(idleNanos);
        scanners.sweep(idleNanos);
        conditionals.sweep(idleNanos);
      } catch (RuntimeException e) {
        LOG.warn("idle sweep failed: {}", Errors.describe(e));
      }
    }, period, period, TimeUnit.MILLISECONDS);
  }

  /** An action that may throw Accumulo's checked exceptions. */
  private interface Action<T> {
    T run() throws Exception;
  }

  /** Runs an action, turning Accumulo's exceptions into the IDL's. */
  private static <T> T call(Action<T> action) throws TException {
    try {
      return action.run();
    } catch (Exception e) {
      throw Errors.translate(e);
    }
  }

  // ---- table operations ----

  @Override
  public void addSplits(String sharedSecret, String tableName, Set<ByteBuffer> splits)
      throws TException {
    secret.check(sharedSecret);
    call(() -> {
      TreeSet<Text> s = new TreeSet<>();
      if (splits != null) {
        for (ByteBuffer b : splits) {
          s.add(Conversions.text(b));
        }
      }
      client.tableOperations().addSplits(tableName, s);
      return null;
    });
  }

  @Override
  public void attachIterator(String sharedSecret, String tableName,
      org.apache.accumulo.proxy.thrift.IteratorSetting setting, Set<IteratorScope> scopes)
      throws TException {
    secret.check(sharedSecret);
    call(() -> {
      client.tableOperations().attachIterator(tableName, Conversions.iterator(setting),
          Conversions.scopes(scopes));
      return null;
    });
  }

  @Override
  public void compactTable(String sharedSecret, String tableName, ByteBuffer startRow,
      ByteBuffer endRow, List<org.apache.accumulo.proxy.thrift.IteratorSetting> iterators,
      boolean flush, boolean wait, PluginConfig selectorConfig, PluginConfig configurerConfig)
      throws TException {
    secret.check(sharedSecret);
    call(() -> {
      CompactionConfig cc = new CompactionConfig().setFlush(flush).setWait(wait);
      Text start = Conversions.rowOrNull(startRow);
      Text end = Conversions.rowOrNull(endRow);
      if (start != null) {
        cc.setStartRow(start);
      }
      if (end != null) {
        cc.setEndRow(end);
      }
      List<IteratorSetting> its = Conversions.iterators(iterators);
      if (!its.isEmpty()) {
        cc.setIterators(its);
      }
      if (isSet(selectorConfig)) {
        cc.setSelector(plugin(selectorConfig));
      }
      if (isSet(configurerConfig)) {
        cc.setConfigurer(plugin(configurerConfig));
      }
      client.tableOperations().compact(tableName, cc);
      return null;
    });
  }

  private static boolean isSet(PluginConfig p) {
    return p != null && p.className != null && !p.className.isEmpty();
  }

  private static org.apache.accumulo.core.client.admin.PluginConfig plugin(PluginConfig p) {
    return new org.apache.accumulo.core.client.admin.PluginConfig(p.className,
        p.options == null ? Map.of() : p.options);
  }

  @Override
  public void createTable(String sharedSecret, String tableName, boolean versioningIter,
      TimeType type) throws TException {
    secret.check(sharedSecret);
    call(() -> {
      NewTableConfiguration ntc = new NewTableConfiguration();
      if (!versioningIter) {
        ntc.withoutDefaultIterators();
      }
      if (type != null) {
        ntc.setTimeType(type == TimeType.LOGICAL
            ? org.apache.accumulo.core.client.admin.TimeType.LOGICAL
            : org.apache.accumulo.core.client.admin.TimeType.MILLIS);
      }
      client.tableOperations().create(tableName, ntc);
      return null;
    });
  }

  @Override
  public void deleteTable(String sharedSecret, String tableName) throws TException {
    secret.check(sharedSecret);
    call(() -> {
      client.tableOperations().delete(tableName);
      return null;
    });
  }

  @Override
  public void flushTable(String sharedSecret, String tableName, ByteBuffer startRow,
      ByteBuffer endRow, boolean wait) throws TException {
    secret.check(sharedSecret);
    call(() -> {
      client.tableOperations().flush(tableName, Conversions.rowOrNull(startRow),
          Conversions.rowOrNull(endRow), wait);
      return null;
    });
  }

  @Override
  public Map<String,String> getTableProperties(String sharedSecret, String tableName)
      throws TException {
    secret.check(sharedSecret);
    return call(() -> client.tableOperations().getConfiguration(tableName));
  }

  @Override
  public List<ByteBuffer> listSplits(String sharedSecret, String tableName, int maxSplits)
      throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      // maxSplits <= 0 means "all of them"
      var splits = maxSplits > 0 ? client.tableOperations().listSplits(tableName, maxSplits)
          : client.tableOperations().listSplits(tableName);
      List<ByteBuffer> out = new ArrayList<>(splits.size());
      for (Text t : splits) {
        out.add(ByteBuffer.wrap(t.copyBytes()));
      }
      return out;
    });
  }

  @Override
  public Set<String> listTables(String sharedSecret) throws TException {
    secret.check(sharedSecret);
    return call(() -> client.tableOperations().list());
  }

  @Override
  public Map<String, String> tableIdMap(String sharedSecret) throws TException {
    secret.check(sharedSecret);
    return call(() -> client.tableOperations().tableIdMap());
  }

  @Override
  public void removeTableProperty(String sharedSecret, String tableName, String property)
      throws TException {
    secret.check(sharedSecret);
    call(() -> {
      client.tableOperations().removeProperty(tableName, property);
      return null;
    });
  }

  @Override
  public void setTableProperty(String sharedSecret, String tableName, String property,
      String value) throws TException {
    secret.check(sharedSecret);
    call(() -> {
      client.tableOperations().setProperty(tableName, property, value);
      return null;
    });
  }

  @Override
  public boolean tableExists(String sharedSecret, String tableName) throws TException {
    secret.check(sharedSecret);
    return call(() -> client.tableOperations().exists(tableName));
  }

  // ---- scanning ----

  @Override
  public String createScanner(String sharedSecret, String tableName, ScanOptions options)
      throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      ScanOptions o = options == null ? new ScanOptions() : options;
      long timeoutMs = o.isSetTimeoutMs() ? o.timeoutMs : 0;
      Scanner s = client.createScanner(tableName, scanAuths(o.authorizations, tableName, timeoutMs));
      try {
        if (o.range != null) {
          s.setRange(Conversions.toRange(o.range));
        }
        fetchColumns(s, o.columns);
        for (IteratorSetting it : Conversions.iterators(o.iterators)) {
          s.addScanIterator(it);
        }
        if (o.isSetBufferSize() && o.bufferSize > 0) {
          s.setBatchSize(o.bufferSize);
        }
        if (o.isSetTimeoutMs() && o.timeoutMs > 0) {
          s.setTimeout(o.timeoutMs, TimeUnit.MILLISECONDS);
        }
        if (o.isSetIsolated() && o.isolated) {
          s.enableIsolation(); // each row read whole, at one version
        }
      } catch (RuntimeException e) {
        s.close();
        throw e;
      }
      return scanners.add(new ScannerSession(s, tableName, o.isSetTimeoutMs() ? o.timeoutMs : 0)).id;
    });
  }

  @Override
  public String createBatchScanner(String sharedSecret, String tableName,
      BatchScanOptions options) throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      BatchScanOptions o = options == null ? new BatchScanOptions() : options;
      long timeoutMs = o.isSetTimeoutMs() ? o.timeoutMs : 0;
      Authorizations auths = scanAuths(o.authorizations, tableName, timeoutMs);
      BatchScanner s = o.isSetThreads() && o.threads > 0
          ? client.createBatchScanner(tableName, auths, o.threads)
          : client.createBatchScanner(tableName, auths);
      try {
        s.setRanges(Conversions.toRanges(o.ranges));
        fetchColumns(s, o.columns);
        for (IteratorSetting it : Conversions.iterators(o.iterators)) {
          s.addScanIterator(it);
        }
        if (o.isSetTimeoutMs() && o.timeoutMs > 0) {
          s.setTimeout(o.timeoutMs, TimeUnit.MILLISECONDS);
        }
      } catch (RuntimeException e) {
        s.close();
        throw e;
      }
      return scanners.add(new ScannerSession(s, tableName, o.isSetTimeoutMs() ? o.timeoutMs : 0)).id;
    });
  }

  /** Unset authorizations mean all of the user's own. */
  private Authorizations scanAuths(Set<ByteBuffer> requested, String table, long timeoutMs)
      throws Exception {
    if (requested != null) {
      return Conversions.authorizations(requested);
    }
    if (timeoutMs <= 0) {
      return userAuths();
    }
    // Accumulo asks a tablet server for them and waits as long as it takes: keep the scan's bound
    Future<Authorizations> auths = lookups.submit(this::userAuths);
    try {
      return auths.get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      auths.cancel(true);
      throw new TApplicationException(TApplicationException.INTERNAL_ERROR,
          ErrorNames.message(ErrorNames.TIMED_OUT, "the scan of table " + table + " found no tablet"
              + " server to look up the user's authorizations within its timeout of " + timeoutMs
              + " ms"));
    } catch (ExecutionException e) {
      throw e.getCause() instanceof Exception cause ? cause : e;
    }
  }

  /** The user's authorizations and when they were looked up (System.nanoTime). */
  private record UserAuths(Authorizations auths, long at) {}

  /**
   * How long a lookup of the user's authorizations serves scans that name none. The lookup is a round
   * trip to a tablet server, which doubled the cost of a one-row read (a producer's transaction); a change
   * made through another gateway or the shell reaches this one's scans within this bound.
   */
  static final long USER_AUTHS_TTL_NANOS = TimeUnit.SECONDS.toNanos(1);

  private volatile UserAuths userAuths;

  private Authorizations userAuths() throws Exception {
    UserAuths known = userAuths;
    long now = System.nanoTime();
    if (known != null && now - known.at() < USER_AUTHS_TTL_NANOS) {
      return known.auths();
    }
    Authorizations auths = client.securityOperations().getUserAuthorizations(client.whoami());
    userAuths = new UserAuths(auths, now);
    return auths;
  }

  private static void fetchColumns(org.apache.accumulo.core.client.ScannerBase s,
      List<ScanColumn> columns) {
    if (columns == null) {
      return;
    }
    for (ScanColumn c : columns) {
      if (c.colFamily == null) {
        throw new IllegalArgumentException("scan column without a column family");
      }
      if (c.colQualifier != null) {
        s.fetchColumn(Conversions.text(c.colFamily), Conversions.text(c.colQualifier));
      } else {
        s.fetchColumnFamily(Conversions.text(c.colFamily));
      }
    }
  }

  /**
   * A failure while reading (e.g. an iterator class the tablet server cannot load) is not a
   * permission problem: it goes out as a TApplicationException named {@link ErrorNames#SERVER},
   * which the client maps to its server error. A real security failure (e.g. authorizations the
   * user lacks) stays an AccumuloSecurityException. Upstream's proxy reports both as the latter.
   */
  @Override
  public ScanResult nextK(String scanner, int k) throws TException {
    return page(scanner, k).toThrift();
  }

  /**
   * The next page of a scanner, as the Accumulo client returned it (for {@link NextKEncoder}, which
   * writes it to the wire without Thrift objects); throws what {@link #nextK} declares.
   */
  ScannerSession.Page page(String scanner, int k) throws TException {
    ScannerSession s = scanners.enter(scanner);
    if (s == null) {
      throw new UnknownScanner("unknown scanner " + scanner);
    }
    try {
      return call(() -> {
        try {
          return s.next(k);
        } catch (ScannerSession.TimedOut e) {
          // no tablet server within the scan's timeout: named as such, so the client can say so
          throw new TApplicationException(TApplicationException.INTERNAL_ERROR, e.getMessage());
        }
      });
    } catch (TApplicationException | org.apache.accumulo.proxy.thrift.AccumuloSecurityException
        | UnknownScanner e) {
      throw e;
    } catch (TException e) {
      throw new TApplicationException(TApplicationException.INTERNAL_ERROR,
          ErrorNames.message(ErrorNames.SERVER, "scan failed on the server: " + Errors.messageOf(e)));
    } finally {
      s.exit();
    }
  }

  @Override
  public void closeScanner(String scanner) throws TException {
    ScannerSession s = scanners.enter(scanner);
    if (s == null) {
      throw new UnknownScanner("unknown scanner " + scanner);
    }
    scanners.remove(s);
    s.exit();
    s.release();
  }

  // ---- writing ----

  @Override
  public void updateAndFlush(String sharedSecret, String tableName,
      Map<ByteBuffer,List<ColumnUpdate>> cells) throws TException {
    secret.check(sharedSecret);
    List<Mutation> mutations;
    try {
      mutations = Conversions.toMutations(cells);
    } catch (RuntimeException e) {
      throw new MutationsRejectedException("update refused, none of it applied: " + e.getMessage());
    }
    call(() -> {
      try (BatchWriter w = client.createBatchWriter(tableName)) {
        w.addMutations(mutations);
      }
      return null;
    });
  }

  @Override
  public String createWriter(String sharedSecret, String tableName, WriterOptions opts)
      throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      var config = Conversions.writerConfig(opts);
      long timeoutMs = opts == null ? 0 : opts.getTimeoutMs();
      return writers.add(new WriterSession(() -> client.createBatchWriter(tableName, config),
          tableName, timeoutMs)).id;
    });
  }

  /** Oneway: cannot throw, so failures are kept for the writer's next flush or close. */
  @Override
  public void update(String writer, Map<ByteBuffer,List<ColumnUpdate>> cells) {
    UpdateSession s = enterWriter(writer);
    if (s != null) {
      try {
        s.update(cells);
      } finally {
        s.exit();
      }
    }
  }

  /** {@link #update} for a call that {@link UpdateDecoder} read straight from its frame. */
  void update(UpdateDecoder.Decoded call) {
    UpdateSession s = enterWriter(call.writer);
    if (s != null) {
      try {
        s.update(call);
      } finally {
        s.exit();
      }
    }
  }

  /** The writer, entered; null (with one warning per id) if it is unknown. */
  private UpdateSession enterWriter(String writer) {
    UpdateSession s = writers.enter(writer);
    if (s == null) {
      // the next flush or close on this id reports UnknownWriter, so the loss is not silent
      if (warnedUnknownWriters.size() > 1000) {
        warnedUnknownWriters.clear();
      }
      if (warnedUnknownWriters.add(String.valueOf(writer))) {
        LOG.warn("updates for unknown writer {} dropped", writer);
      }
    }
    return s;
  }

  @Override
  public void flush(String writer) throws TException {
    UpdateSession s = writers.enter(writer);
    if (s == null) {
      throw new UnknownWriter("unknown writer " + writer);
    }
    try {
      s.flush();
    } finally {
      s.exit();
    }
  }

  @Override
  public void closeWriter(String writer) throws TException {
    UpdateSession s = writers.enter(writer);
    if (s == null) {
      throw new UnknownWriter("unknown writer " + writer);
    }
    writers.remove(s);
    try {
      s.closeAndReport();
    } finally {
      s.exit();
    }
  }

  // ---- conditional writing ----

  @Override
  public String createConditionalWriter(String sharedSecret, String tableName,
      ConditionalWriterOptions options) throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      var config = Conversions.conditionalWriterConfig(options);
      return conditionals.add(
          new ConditionalWriterSession(client.createConditionalWriter(tableName, config))).id;
    });
  }

  @Override
  public Map<ByteBuffer,ConditionalStatus> updateRowsConditionally(String conditionalWriter,
      Map<ByteBuffer,ConditionalUpdates> updates) throws TException {
    ConditionalWriterSession s = conditionals.enter(conditionalWriter);
    if (s == null) {
      throw new UnknownWriter("unknown conditional writer " + conditionalWriter);
    }
    try {
      List<ConditionalMutation> mutations;
      try {
        mutations = Conversions.toConditionalMutations(updates);
      } catch (RuntimeException e) {
        throw new org.apache.accumulo.proxy.thrift.AccumuloException(
            "conditional update refused, none of it applied: " + e.getMessage());
      }
      return call(() -> s.write(mutations));
    } finally {
      s.exit();
    }
  }

  @Override
  public void closeConditionalWriter(String conditionalWriter) {
    ConditionalWriterSession s = conditionals.enter(conditionalWriter);
    if (s == null) {
      return; // the IDL declares no error here; closing twice is harmless
    }
    conditionals.remove(s);
    s.exit();
    s.release();
  }

  // ---- security and namespaces ----

  /** The client's secret check: cheap, and declares AccumuloSecurityException (tableExists does not). */
  @Override
  public boolean namespaceExists(String sharedSecret, String namespaceName) throws TException {
    secret.check(sharedSecret);
    return call(() -> client.namespaceOperations().exists(namespaceName));
  }

  @Override
  public List<ByteBuffer> getUserAuthorizations(String sharedSecret, String user)
      throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      List<ByteBuffer> out = new ArrayList<>();
      for (byte[] a : client.securityOperations().getUserAuthorizations(user)
          .getAuthorizations()) {
        out.add(ByteBuffer.wrap(a));
      }
      return out;
    });
  }

  @Override
  public void changeUserAuthorizations(String sharedSecret, String user,
      Set<ByteBuffer> authorizations) throws TException {
    secret.check(sharedSecret);
    call(() -> {
      client.securityOperations().changeUserAuthorizations(user,
          Conversions.authorizations(authorizations == null ? Set.of() : authorizations));
      userAuths = null; // this gateway's scans see the change at once
      return null;
    });
  }

  // ---- this gateway's extensions ----

  @Override
  public Set<String> gatewayExtensions(String sharedSecret) throws TException {
    secret.check(sharedSecret);
    return new TreeSet<>(EXTENSIONS);
  }

  /**
   * The visibility expressions the table's VisibilitySummarizer counted that this gateway's user cannot read
   * (so a scan would show rows without those cells), with what makes the answer incomplete: see the IDL.
   */
  @Override
  public Map<String,Long> unreadableVisibilities(String sharedSecret, String tableName)
      throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      Map<String,Long> out = new TreeMap<>();
      VisibilityEvaluator readable = new VisibilityEvaluator(
          client.securityOperations().getUserAuthorizations(client.whoami()));
      String summarizer = VisibilitySummarizer.class.getName();
      boolean configured = client.tableOperations().listSummarizers(tableName).stream()
          .anyMatch(c -> c.getClassName().equals(summarizer));
      boolean summarized = false;
      for (Summary summary : client.tableOperations().summaries(tableName).flush(true).retrieve()) {
        if (!summary.getSummarizerConfiguration().getClassName().equals(summarizer)) {
          continue;
        }
        summarized = true;
        Summary.FileStatistics files = summary.getFileStatistics();
        out.merge("files", files.getTotal(), Long::sum);
        out.merge("files.missing", files.getMissing(), Long::sum);
        out.merge("files.large", files.getLarge(), Long::sum);
        for (Map.Entry<String,Long> e : summary.getStatistics().entrySet()) {
          String key = e.getKey();
          if (key.startsWith(CountingSummarizer.COUNTER_STAT_PREFIX)) {
            String expression = key.substring(CountingSummarizer.COUNTER_STAT_PREFIX.length());
            if (!expression.isEmpty()
                && !readable.evaluate(new ColumnVisibility(expression))) {
              out.merge("hidden:" + expression, e.getValue(), Long::sum);
            }
          } else if (key.equals(CountingSummarizer.TOO_MANY_STAT)
              || key.equals(CountingSummarizer.TOO_LONG_STAT)) {
            out.merge(key, e.getValue(), Long::sum);
          }
        }
      }
      if (configured && !summarized && client.tableOperations()
          .getDiskUsage(Set.of(tableName)).stream().mapToLong(DiskUsage::getUsage).sum() > 0) {
        out.put("files.missing", 1L); // files, none of them summarized: at least one is missing
      }
      out.put("configured", configured ? 1L : 0L);
      return out;
    });
  }

  @Override
  public String createBulkImport(String sharedSecret, String tableName) throws TException {
    secret.check(sharedSecret);
    return call(() -> bulk.create(tableName));
  }

  /** A file writer; one already open on this gateway for the same file is discarded first. */
  @Override
  public String createBulkFileWriter(String sharedSecret, String bulkId, String fileName)
      throws TException {
    secret.check(sharedSecret);
    return call(() -> {
      String name = BulkImports.checkFileName(fileName);
      synchronized (bulk.lock(bulkId)) {
        BulkImports.Staging staging = bulk.resolve(bulkId);
        discard(bulk.openFile(bulkId, name));
        Map<String,String> fileProperties = new TreeMap<>();
        client.tableOperations().getConfiguration(staging.table()).forEach((k, v) -> {
          if (k.startsWith("table.file.")) { // compression, block sizes: as the table's own files
            fileProperties.put(k, v);
          }
        });
        BulkFileSession s = new BulkFileSession(bulk, staging, name, fileProperties);
        discard(bulk.opened(s)); // one that raced in on another connection
        return writers.add(s).id;
      }
    });
  }

  /** Takes an open bulk file writer out of service, deleting its partial file. */
  private void discard(BulkFileSession s) {
    if (s != null && writers.enter(s.id) != null) {
      writers.remove(s);
      s.exit();
      s.release();
    }
  }

  @Override
  public void importBulk(String sharedSecret, String bulkId) throws TException {
    secret.check(sharedSecret);
    call(() -> {
      bulk.load(bulkId);
      return null;
    });
  }

  @Override
  public int bulkFilesLeft(String sharedSecret, String bulkId) throws TException {
    secret.check(sharedSecret);
    return call(() -> bulk.files(bulk.resolve(bulkId)).size());
  }

  @Override
  public void deleteBulkImport(String sharedSecret, String bulkId) throws TException {
    secret.check(sharedSecret);
    call(() -> {
      synchronized (bulk.lock(bulkId)) {
        for (BulkFileSession s : bulk.openFiles(bulkId)) {
          discard(s);
        }
        bulk.delete(bulkId);
      }
      return null;
    });
  }

  /** Stops the sweeper and closes every open session (flushing writers). */
  @Override
  public void close() {
    sweeper.shutdownNow();
    lookups.shutdownNow();
    writers.closeAll();
    scanners.closeAll();
    conditionals.closeAll();
  }
}
