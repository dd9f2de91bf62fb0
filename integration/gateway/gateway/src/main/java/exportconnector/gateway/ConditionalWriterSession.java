package exportconnector.gateway;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.accumulo.core.client.AccumuloException;
import org.apache.accumulo.core.client.AccumuloSecurityException;
import org.apache.accumulo.core.client.ConditionalWriter;
import org.apache.accumulo.core.data.ConditionalMutation;
import org.apache.accumulo.proxy.thrift.ConditionalStatus;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** One client conditional writer. */
final class ConditionalWriterSession extends Session {
  private static final Logger LOG = LoggerFactory.getLogger(ConditionalWriterSession.class);

  private final ConditionalWriter writer;

  ConditionalWriterSession(ConditionalWriter writer) {
    this.writer = writer;
  }

  /**
   * The status of each row. A row whose outcome Accumulo could not learn is UNKNOWN (it may or may
   * not be written), so one failed row does not hide the others' results.
   */
  Map<ByteBuffer,ConditionalStatus> write(List<ConditionalMutation> mutations)
      throws AccumuloSecurityException {
    Map<ByteBuffer,ConditionalStatus> out = new HashMap<>();
    Iterator<ConditionalWriter.Result> results = writer.write(mutations.iterator());
    while (results.hasNext()) {
      ConditionalWriter.Result r = results.next();
      ByteBuffer row = ByteBuffer.wrap(r.getMutation().getRow());
      ConditionalStatus status;
      try {
        status = ConditionalStatus.valueOf(r.getStatus().name());
      } catch (AccumuloException e) {
        LOG.warn("conditional update of row {} has an unknown outcome: {}",
            Conversions.printable(r.getMutation().getRow()), e.getMessage());
        status = ConditionalStatus.UNKNOWN;
      }
      out.put(row, status);
    }
    return out;
  }

  @Override
  void release() {
    writer.close();
  }
}
