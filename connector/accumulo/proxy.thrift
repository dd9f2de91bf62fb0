// The subset of the Accumulo Proxy 2.x Thrift interface that this project uses.
//
// Names, field ids and types match the upstream proxy 2.x interface, so the Python client speaks to our
// gateway (integration/gateway) and to an upstream accumulo-proxy 2.x alike. Transport: framed; protocol:
// compact. Calls that act on a table take the gateway's shared secret as argument 1; calls on an open
// writer or scanner take the opaque id that the create call returned.
//
// This gateway's extensions: struct fields numbered from 101 (upstream's proxy skips them) and the calls at
// the end of the service (upstream's answers them with UNKNOWN_METHOD). gatewayExtensions() names them.
//
// One file, two consumers: thriftpy2 loads it at run time, and the gateway's Maven build generates its
// Java bindings from it.

namespace java org.apache.accumulo.proxy.thrift
namespace py accumulo

struct Key {
  1:binary row
  2:binary colFamily
  3:binary colQualifier
  4:binary colVisibility
  5:optional i64 timestamp = 0x7FFFFFFFFFFFFFFF
}

struct ColumnUpdate {
  1:binary colFamily
  2:binary colQualifier
  3:optional binary colVisibility
  4:optional i64 timestamp
  5:optional binary value
  6:optional bool deleteCell
}

struct KeyValue {
  1:Key key
  2:binary value
}

struct ScanResult {
  1:list<KeyValue> results
  2:bool more
}

struct Range {
  1:Key start
  2:bool startInclusive
  3:Key stop
  4:bool stopInclusive
}

struct ScanColumn {
  1:binary colFamily
  2:optional binary colQualifier
}

struct IteratorSetting {
  1:i32 priority
  2:string name
  3:string iteratorClass
  4:map<string, string> properties
}

struct ScanOptions {
  1:optional set<binary> authorizations
  2:optional Range range
  3:optional list<ScanColumn> columns
  4:optional list<IteratorSetting> iterators
  5:optional i32 bufferSize
  // this gateway's extension (upstream's proxy skips the field): how long a scan may wait for a tablet
  // server before it fails with TimedOutException; unset or 0: as long as it takes
  101:optional i64 timeoutMs
  // this gateway's extension: true reads each row whole at one version (Accumulo's
  // Scanner.enableIsolation(): a row never mixes cells of two writes to it). Upstream's proxy skips the
  // field and the scan silently runs without isolation, so a client must not rely on it unless
  // gatewayExtensions() names "scan.isolated" (the Python client checks that before reading)
  102:optional bool isolated
}

struct BatchScanOptions {
  1:optional set<binary> authorizations
  2:optional list<Range> ranges
  3:optional list<ScanColumn> columns
  4:optional list<IteratorSetting> iterators
  5:optional i32 threads
  // as ScanOptions.timeoutMs
  101:optional i64 timeoutMs
}

struct Column {
  1:binary colFamily
  2:binary colQualifier
  3:binary colVisibility
}

struct Condition {
  1:Column column
  2:optional i64 timestamp
  3:optional binary value
  4:optional list<IteratorSetting> iterators
}

struct ConditionalUpdates {
  2:list<Condition> conditions
  3:list<ColumnUpdate> updates
}

enum ConditionalStatus {
  ACCEPTED
  REJECTED
  VIOLATED
  UNKNOWN
  INVISIBLE_VISIBILITY
}

enum Durability {
  DEFAULT
  NONE
  LOG
  FLUSH
  SYNC
}

struct ConditionalWriterOptions {
  1:optional i64 maxMemory
  2:optional i64 timeoutMs
  3:optional i32 threads
  4:optional set<binary> authorizations
  5:optional Durability durability
}

struct WriterOptions {
  1:i64 maxMemory
  2:i64 latencyMs
  3:i64 timeoutMs
  4:i32 threads
  5:optional Durability durability
}

struct PluginConfig {
  1:string className
  2:map<string, string> options
}

enum IteratorScope {
  MINC
  MAJC
  SCAN
}

enum TimeType {
  LOGICAL
  MILLIS
}

exception UnknownScanner {
  1:string msg
}

exception UnknownWriter {
  1:string msg
}

exception NoMoreEntriesException {
  1:string msg
}

exception AccumuloException {
  1:string msg
}

exception AccumuloSecurityException {
  1:string msg
}

exception TableNotFoundException {
  1:string msg
}

exception TableExistsException {
  1:string msg
}

exception MutationsRejectedException {
  1:string msg
}

service AccumuloProxy {

  // table operations
  void addSplits(1:string sharedSecret, 2:string tableName, 3:set<binary> splits)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  void attachIterator(1:string sharedSecret, 2:string tableName, 3:IteratorSetting setting,
                      4:set<IteratorScope> scopes)
    throws (1:AccumuloSecurityException ouch1, 2:AccumuloException ouch2, 3:TableNotFoundException ouch3)

  void compactTable(1:string sharedSecret, 2:string tableName, 3:binary startRow, 4:binary endRow,
                    5:list<IteratorSetting> iterators, 6:bool flush, 7:bool wait,
                    8:PluginConfig selectorConfig, 9:PluginConfig configurerConfig)
    throws (1:AccumuloSecurityException ouch1, 2:TableNotFoundException ouch2, 3:AccumuloException ouch3)

  void createTable(1:string sharedSecret, 2:string tableName, 3:bool versioningIter, 4:TimeType type)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableExistsException ouch3)

  void deleteTable(1:string sharedSecret, 2:string tableName)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  void flushTable(1:string sharedSecret, 2:string tableName, 3:binary startRow, 4:binary endRow,
                  5:bool wait)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  map<string, string> getTableProperties(1:string sharedSecret, 2:string tableName)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  list<binary> listSplits(1:string sharedSecret, 2:string tableName, 3:i32 maxSplits)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  set<string> listTables(1:string sharedSecret)

  // table name -> table id, as upstream's proxy: the id keys a table's tablets in accumulo.metadata (queue
  // files' statistics read them)
  map<string, string> tableIdMap(1:string sharedSecret)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2)

  void removeTableProperty(1:string sharedSecret, 2:string tableName, 3:string property)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  void setTableProperty(1:string sharedSecret, 2:string tableName, 3:string property, 4:string value)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  bool tableExists(1:string sharedSecret, 2:string tableName)

  // scanning
  string createBatchScanner(1:string sharedSecret, 2:string tableName, 3:BatchScanOptions options)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  string createScanner(1:string sharedSecret, 2:string tableName, 3:ScanOptions options)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  ScanResult nextK(1:string scanner, 2:i32 k)
    throws (1:NoMoreEntriesException ouch1, 2:UnknownScanner ouch2, 3:AccumuloSecurityException ouch3)

  void closeScanner(1:string scanner) throws (1:UnknownScanner ouch1)

  // writing
  void updateAndFlush(1:string sharedSecret, 2:string tableName, 3:map<binary, list<ColumnUpdate>> cells)
    throws (1:AccumuloException outch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3,
            4:MutationsRejectedException ouch4)

  string createWriter(1:string sharedSecret, 2:string tableName, 3:WriterOptions opts)
    throws (1:AccumuloException outch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  oneway void update(1:string writer, 2:map<binary, list<ColumnUpdate>> cells)

  void flush(1:string writer) throws (1:UnknownWriter ouch1, 2:MutationsRejectedException ouch2)

  void closeWriter(1:string writer) throws (1:UnknownWriter ouch1, 2:MutationsRejectedException ouch2)

  // conditional writing
  string createConditionalWriter(1:string sharedSecret, 2:string tableName,
                                 3:ConditionalWriterOptions options)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  map<binary, ConditionalStatus> updateRowsConditionally(1:string conditionalWriter,
                                                         2:map<binary, ConditionalUpdates> updates)
    throws (1:UnknownWriter ouch1, 2:AccumuloException ouch2, 3:AccumuloSecurityException ouch3)

  void closeConditionalWriter(1:string conditionalWriter)

  // security and namespaces (same names and field ids as upstream's proxy.thrift)
  // namespaceExists is cheap and declares AccumuloSecurityException on every server, so the client
  // checks its shared secret with it (tableExists/listTables declare no exception upstream).
  bool namespaceExists(1:string sharedSecret, 2:string namespaceName)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2)

  list<binary> getUserAuthorizations(1:string sharedSecret, 2:string user)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2)

  void changeUserAuthorizations(1:string sharedSecret, 2:string user, 3:set<binary> authorizations)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2)

  // ---- this gateway's extensions (not in upstream's proxy, which answers each of these calls with a
  // TApplicationException UNKNOWN_METHOD; the Python client turns that into an AccumuloError saying the
  // feature needs this project's gateway) ----

  // The extensions this gateway serves, by name: "scan.timeoutMs" (ScanOptions/BatchScanOptions field 101),
  // "scan.isolated" (ScanOptions field 102), "bulk.rfile" (the bulk calls below), "summary.visibility"
  // (unreadableVisibilities).
  set<string> gatewayExtensions(1:string sharedSecret)
    throws (1:AccumuloSecurityException ouch1)

  // Bulk loads of sorted RFiles that keep their cells' timestamps. A bulk import is a staging directory on
  // the cluster's file system (under gateway.bulk.dir) for one destination table; the gateway writes RFiles
  // into it with Accumulo's RFile writer and loads them with importDirectory(dir).to(table).tableTime(false).
  // Ids are opaque; any gateway of the cluster with the same gateway.bulk.dir resolves them.

  // A new, empty staging directory for table tableName; returns the bulk import's id.
  string createBulkImport(1:string sharedSecret, 2:string tableName)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  // A writer of one RFile, fileName (letters, digits, '_', '-'; ".rf" is added) of bulk import bulkId: use
  // the id with update (cells), flush (reports a failure) and closeWriter (completes the file; only then
  // does the file count for importBulk). The cells of each update call are sorted by Accumulo's Key order
  // (row, family, qualifier, visibility ascending, timestamp descending, a delete before a put); across
  // calls keys must keep rising. A key lower than the last one written, or a cell without a timestamp,
  // fails the file: its partial file is deleted, later updates are dropped, and every flush / closeWriter
  // throws MutationsRejectedException naming the key. An exact duplicate of the last key is dropped. A
  // second writer of the same name replaces the first (a file written again after a lost connection).
  // A file writer closed for idling (gateway.idle.timeout.ms) or at shutdown is discarded, not completed.
  string createBulkFileWriter(1:string sharedSecret, 2:string bulkId, 3:string fileName)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2)

  // Loads the completed files: importDirectory(dir).to(table).tableTime(false).load(), which keeps every
  // cell's timestamp. Files still being written on this gateway make it fail. Accumulo moves the files into
  // the table, so calling it again after it succeeded loads nothing (there is nothing left to load).
  void importBulk(1:string sharedSecret, 2:string bulkId)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  // How many completed files wait in the staging directory: 0 once importBulk succeeded, so a client that
  // resumes can tell whether the import happened. AccumuloException if the bulk import does not exist (its
  // message then starts with "BulkImportNotFoundException: ", as for createBulkFileWriter and importBulk).
  i32 bulkFilesLeft(1:string sharedSecret, 2:string bulkId)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2)

  // What the table's visibility summaries (Accumulo's VisibilitySummarizer, when configured on the table)
  // say it holds that this gateway's user cannot read, after flushing the table (summaries cover files
  // only): "hidden:<expression>" -> cells, and "configured" (1 or 0), "files", "files.missing" (files written
  // before the summarizer was configured; at least 1 when no file has a summary), "files.large" (summaries
  // too large to keep), "tooMany" and
  // "tooLong" (expressions the summaries did not count). Deleted cells are not counted.
  map<string,i64> unreadableVisibilities(1:string sharedSecret, 2:string tableName)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2, 3:TableNotFoundException ouch3)

  // Removes the staging directory with whatever it holds (file writers of it on this gateway are
  // discarded); removing one that is gone already is harmless.
  void deleteBulkImport(1:string sharedSecret, 2:string bulkId)
    throws (1:AccumuloException ouch1, 2:AccumuloSecurityException ouch2)
}
