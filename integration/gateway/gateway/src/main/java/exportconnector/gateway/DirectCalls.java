package exportconnector.gateway;

import java.util.HashMap;
import java.util.Map;

import org.apache.accumulo.proxy.thrift.AccumuloProxy;
import org.apache.accumulo.proxy.thrift.AccumuloSecurityException;
import org.apache.accumulo.proxy.thrift.NoMoreEntriesException;
import org.apache.accumulo.proxy.thrift.UnknownScanner;
import org.apache.thrift.ProcessFunction;
import org.apache.thrift.TApplicationException;
import org.apache.thrift.TBase;
import org.apache.thrift.TBaseProcessor;
import org.apache.thrift.TException;
import org.apache.thrift.TProcessor;
import org.apache.thrift.protocol.TCompactProtocol;
import org.apache.thrift.protocol.TProtocol;
import org.apache.thrift.transport.TTransport;

/**
 * The processor of the gateway: the generated one, except that the two calls on the hot path of a
 * drain, {@code update} and {@code nextK}, skip the generated structs: an update is read from its
 * frame straight into Mutations ({@link UpdateDecoder}), a page is written from the scanner's Keys
 * straight to the reply ({@link NextKEncoder}). The bytes on the wire are the IDL's, unchanged; a
 * call in another shape than the plain one (or another protocol) goes the generic way.
 *
 * <p>{@code EXPORTCONNECTOR_GATEWAY_CODEC=generic} in the environment serves every call the generic
 * way (for benchmarks that compare the two).
 */
final class DirectCalls {
  static final String CODEC_ENV = "EXPORTCONNECTOR_GATEWAY_CODEC";

  private DirectCalls() {}

  /** Whether the environment asks for the generated code on every call. */
  static boolean genericOnly() {
    return "generic".equals(System.getenv(CODEC_ENV));
  }

  /**
   * The processor for {@code handler} (the guarded gateway), with {@code gateway} serving update
   * and nextK directly; the generated processor alone when {@code direct} is false.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static TProcessor processor(AccumuloProxy.Iface handler, Gateway gateway, boolean direct) {
    AccumuloProxy.Processor<AccumuloProxy.Iface> generic = new AccumuloProxy.Processor<>(handler);
    if (!direct) {
      return generic;
    }
    Map<String,ProcessFunction<AccumuloProxy.Iface,? extends TBase>> calls =
        new HashMap<>(generic.getProcessMapView());
    calls.put("update", new Update(gateway));
    calls.put("nextK", new NextK(gateway));
    return new TBaseProcessor<AccumuloProxy.Iface>(handler, calls) {};
  }

  /** update's arguments, read straight into Mutations when they are in the plain shape. */
  static final class UpdateArgs extends AccumuloProxy.update_args {
    private static final long serialVersionUID = 1L;
    transient UpdateDecoder.Decoded decoded;

    @Override
    public void read(TProtocol in) throws TException {
      if (in instanceof TCompactProtocol) {
        TTransport t = in.getTransport();
        int n = t.getBytesRemainingInBuffer(); // the framed transport holds the whole frame
        if (n > 0) {
          decoded = UpdateDecoder.decode(t.getBuffer(), t.getBufferPosition(), n);
          if (decoded != null) {
            t.consumeBuffer(decoded.consumed);
            return;
          }
        }
      }
      super.read(in);
    }
  }

  private static final class Update extends ProcessFunction<AccumuloProxy.Iface,UpdateArgs> {
    private final Gateway gateway;

    Update(Gateway gateway) {
      super("update");
      this.gateway = gateway;
    }

    @Override
    public UpdateArgs getEmptyArgsInstance() {
      return new UpdateArgs();
    }

    @Override
    protected boolean isOneway() {
      return true;
    }

    @Override
    public TBase getResult(AccumuloProxy.Iface iface, UpdateArgs args) throws TException {
      if (args.decoded != null) {
        gateway.update(args.decoded);
      } else {
        iface.update(args.writer, args.cells);
      }
      return null;
    }
  }

  /** nextK's result, whose success field is written straight from the page. */
  static final class NextKResult extends AccumuloProxy.nextK_result {
    private static final long serialVersionUID = 1L;
    transient ScannerSession.Page page;

    @Override
    public void write(TProtocol out) throws TException {
      if (page == null) {
        super.write(out); // one of the declared exceptions
      } else if (out instanceof TCompactProtocol) {
        NextKEncoder.write(page, out.getTransport());
      } else {
        success = page.toThrift();
        super.write(out);
      }
    }
  }

  private static final class NextK extends ProcessFunction<AccumuloProxy.Iface,AccumuloProxy.nextK_args> {
    private final Gateway gateway;

    NextK(Gateway gateway) {
      super("nextK");
      this.gateway = gateway;
    }

    @Override
    public AccumuloProxy.nextK_args getEmptyArgsInstance() {
      return new AccumuloProxy.nextK_args();
    }

    @Override
    protected boolean isOneway() {
      return false;
    }

    @Override
    public TBase getResult(AccumuloProxy.Iface iface, AccumuloProxy.nextK_args args) throws TException {
      NextKResult result = new NextKResult();
      try {
        result.page = gateway.page(args.scanner, args.k);
      } catch (NoMoreEntriesException e) {
        result.ouch1 = e;
      } catch (UnknownScanner e) {
        result.ouch2 = e;
      } catch (AccumuloSecurityException e) {
        result.ouch3 = e;
      } catch (RuntimeException e) {
        // as DeclaredExceptionsGuard does for the generic path: never a message-less internal error
        TException te = Errors.translate(e);
        throw te instanceof TApplicationException ? (TApplicationException) te
            : new TApplicationException(TApplicationException.INTERNAL_ERROR, ErrorNames.undeclared(te));
      }
      return result;
    }
  }
}
