package exportconnector.gateway;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;

import org.apache.accumulo.proxy.thrift.ColumnUpdate;
import org.apache.accumulo.proxy.thrift.MutationsRejectedException;

/**
 * What the IDL's writer calls act on: {@code update} (oneway: failures are kept for later),
 * {@code flush} and {@code closeWriter}, which report them. A table writer ({@link WriterSession})
 * or one RFile of a bulk import ({@link BulkFileSession}); their ids share one registry, so a
 * client uses either with the same calls.
 */
abstract class UpdateSession extends Session {
  /** One update call in the generated shape. */
  abstract void update(Map<ByteBuffer,List<ColumnUpdate>> cells);

  /** One update call that {@link UpdateDecoder} read straight from its frame. */
  abstract void update(UpdateDecoder.Decoded call);

  /** Reports any failure recorded since the last flush (a table writer also makes its writes durable). */
  abstract void flush() throws MutationsRejectedException;

  /** For closeWriter: finishes the session, then reports any recorded failure. */
  abstract void closeAndReport() throws MutationsRejectedException;
}
