package exportconnector.gateway;

import java.util.ArrayList;
import java.util.List;

import org.apache.accumulo.proxy.thrift.AccumuloException;
import org.apache.accumulo.proxy.thrift.AccumuloSecurityException;
import org.apache.accumulo.proxy.thrift.MutationsRejectedException;
import org.apache.accumulo.proxy.thrift.TableExistsException;
import org.apache.accumulo.proxy.thrift.TableNotFoundException;
import org.apache.thrift.TApplicationException;
import org.apache.thrift.TException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Maps Accumulo's Java exceptions onto the Thrift exceptions of the IDL, keeping the message. */
final class Errors {
  private static final Logger LOG = LoggerFactory.getLogger(Errors.class);
  private static final String THRIFT_PACKAGE = AccumuloException.class.getPackageName();

  private Errors() {}

  static TException translate(Throwable e) {
    if (e instanceof TApplicationException || (e instanceof TException
        && e.getClass().getPackageName().equals(THRIFT_PACKAGE))) {
      return (TException) e; // already one of ours
    }
    // Accumulo often wraps its checked exceptions (in RuntimeExceptions while scanning, or a
    // TableNotFoundException in an AccumuloException when setting properties), so look down the
    // whole cause chain, most specific type first.
    List<Throwable> chain = new ArrayList<>();
    for (Throwable c = e; c != null && !chain.contains(c); c = c.getCause()) {
      chain.add(c);
    }
    for (Throwable c : chain) {
      if (c instanceof org.apache.accumulo.core.client.TableNotFoundException) {
        return new TableNotFoundException(c.getMessage());
      }
      if (c instanceof org.apache.accumulo.core.client.TableExistsException) {
        return new TableExistsException(c.getMessage());
      }
    }
    for (Throwable c : chain) {
      if (c instanceof org.apache.accumulo.core.client.AccumuloSecurityException) {
        return new AccumuloSecurityException(c.getMessage());
      }
      if (c instanceof org.apache.accumulo.core.client.MutationsRejectedException mre) {
        return new MutationsRejectedException(Rejections.describe(mre));
      }
    }
    for (Throwable c : chain) {
      if (c instanceof org.apache.accumulo.core.client.AccumuloException) {
        return new AccumuloException(c.getMessage());
      }
    }
    // Unexpected: keep the class name so the caller can tell what went wrong.
    LOG.warn("unexpected error: {}", describe(e), e);
    return new AccumuloException(describe(e));
  }

  /** Thrift exceptions keep their text in a "msg" field, not in Throwable's message. */
  static String messageOf(TException te) {
    try {
      Object msg = te.getClass().getField("msg").get(te);
      if (msg != null) {
        return msg.toString();
      }
    } catch (ReflectiveOperationException e) {
      // not a generated exception: fall through
    }
    return te.getMessage();
  }

  /** Whether Accumulo gave up because of a client-side timeout (scanner or BatchWriter). */
  static boolean isTimeout(Throwable e) {
    List<Throwable> seen = new ArrayList<>();
    for (Throwable c = e; c != null && !seen.contains(c); c = c.getCause()) {
      seen.add(c);
      if (c.getClass().getSimpleName().contains("TimedOut")) {
        return true;
      }
    }
    return false;
  }

  static String describe(Throwable e) {
    return e.getClass().getName() + ": " + e.getMessage();
  }
}
