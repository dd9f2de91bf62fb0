package exportconnector.gateway;

import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.SocketAddress;
import java.net.SocketException;
import java.security.GeneralSecurityException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import javax.net.ssl.SSLException;

import org.apache.accumulo.proxy.thrift.AccumuloProxy;
import org.apache.thrift.TException;
import org.apache.thrift.TProcessor;
import org.apache.thrift.TProcessorFactory;
import org.apache.thrift.protocol.TCompactProtocol;
import org.apache.thrift.protocol.TProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TSocket;
import org.apache.thrift.transport.TTransport;
import org.apache.thrift.transport.TTransportException;
import org.apache.thrift.transport.layered.TFramedTransport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Thrift server: framed transport, compact protocol, one thread per connection. One thread
 * per connection matters: it applies a connection's oneway {@code update} calls in order, before
 * the {@code flush} that follows them (selector-based servers may reorder oneway calls). With TLS
 * configured, the same framed/compact stream runs inside TLS (upstream's {@code thriftServerType=ssl}).
 */
final class GatewayServer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(GatewayServer.class);
  private final TThreadPoolServer server;
  private final ServerSocket socket;
  private final String host;
  private final boolean tls;

  private GatewayServer(TThreadPoolServer server, ServerSocket socket, String host, boolean tls) {
    this.server = server;
    this.socket = socket;
    this.host = host;
    this.tls = tls;
  }

  /** The peer of the connection the current worker thread serves, for log lines (null outside). */
  private static final ThreadLocal<SocketAddress> PEER = new ThreadLocal<>();

  static String currentPeer() {
    SocketAddress a = PEER.get();
    return a == null ? "unknown peer" : a.toString();
  }

  /**
   * Binds now (port 0 picks a free port) and serves on a background thread. A frame longer than
   * {@code maxFrameBytes} closes its connection, as upstream's proxy does past its maxFrameSize.
   * {@code tls} null: plain Thrift. {@code handler} serves the calls ({@code gateway} guarded),
   * {@code gateway} itself the hot ones (see {@link DirectCalls}).
   */
  static GatewayServer start(AccumuloProxy.Iface handler, Gateway gateway, String host, int port,
      String name, int maxFrameBytes, GatewayConfig.Tls tls)
      throws IOException, TTransportException, GeneralSecurityException {
    checkMaxFrameBytes(maxFrameBytes);
    ServerSocket socket;
    if (tls != null) {
      socket = TlsServerSocket.bind(tls, host, port);
    } else {
      socket = new ServerSocket();
      socket.setReuseAddress(true);
      socket.bind(new InetSocketAddress(InetAddress.getByName(host), port), 128);
    }

    AtomicInteger n = new AtomicInteger();
    // daemon workers, so an idle client connection never keeps the JVM alive at exit
    ThreadPoolExecutor workers = new ThreadPoolExecutor(1, Integer.MAX_VALUE, 60, TimeUnit.SECONDS,
        new SynchronousQueue<>(), r -> {
          Thread t = new Thread(r, "gateway-" + name + "-conn-" + n.incrementAndGet());
          t.setDaemon(true);
          return t;
        });
    TThreadPoolServer.Args args = new TThreadPoolServer.Args(new TServerSocket(socket))
        .processorFactory(new PeerRecordingFactory(
            DirectCalls.processor(handler, gateway, !DirectCalls.genericOnly())))
        .transportFactory(new TFramedTransport.Factory(maxFrameBytes))
        .protocolFactory(new TCompactProtocol.Factory())
        .executorService(workers)
        .stopTimeoutVal(1)
        .stopTimeoutUnit(TimeUnit.SECONDS);
    TThreadPoolServer server = new TThreadPoolServer(args);
    Thread serve = new Thread(server::serve, "gateway-" + name + "-accept");
    serve.setDaemon(true);
    serve.start();
    return new GatewayServer(server, socket, host, tls != null);
  }

  /**
   * Remembers each connection's peer address for the worker thread that serves it (one thread per
   * connection), so a refused shared secret can be logged with the address it came from. A client
   * that goes away abruptly (a reset, a TLS peer that closes mid-handshake, a TCP health check)
   * costs one log line here ({@link #connectionEnded}); Thrift's server would log a stack trace at
   * WARN or ERROR for each.
   */
  private static final class PeerRecordingFactory extends TProcessorFactory {
    private final TProcessor processor;

    PeerRecordingFactory(TProcessor processor) {
      super(processor);
      this.processor = processor;
    }

    @Override
    public TProcessor getProcessor(TTransport trans) {
      SocketAddress peer = trans instanceof TSocket && ((TSocket) trans).getSocket() != null
          ? ((TSocket) trans).getSocket().getRemoteSocketAddress() : null;
      return new TProcessor() {
        @Override
        public void process(TProtocol in, TProtocol out) throws TException {
          PEER.set(peer);
          try {
            processor.process(in, out);
          } catch (TTransportException e) {
            throw connectionEnded(e, peer);
          } finally {
            PEER.remove();
          }
        }
      };
    }
  }

  /**
   * What to hand Thrift's server for a transport failure on a connection. A peer that went away
   * (reset, broken pipe, end of stream inside TLS) or whose TLS handshake failed gets one log line
   * and an END_OF_FILE, which the server ends the connection on without logging; anything else
   * (a frame over the limit, say) goes on as it was, and the server logs it with its trace.
   */
  static TTransportException connectionEnded(TTransportException e, SocketAddress peer) {
    if (e.getType() == TTransportException.END_OF_FILE
        || e.getType() == TTransportException.TIMED_OUT) {
      return e; // an orderly close: the server ends the connection quietly
    }
    String who = peer == null ? "unknown peer" : peer.toString();
    Throwable gone = cause(e, SocketException.class, EOFException.class);
    if (gone != null) {
      LOG.info("client {} disconnected: {}", who, gone.getMessage());
    } else if (cause(e, SSLException.class) instanceof SSLException tls) {
      LOG.warn("TLS with client {} failed: {}", who, tls.getMessage());
    } else {
      return e;
    }
    return new TTransportException(TTransportException.END_OF_FILE, e.getMessage());
  }

  /** The first cause of {@code e} (itself included) of one of the types, or null. */
  private static Throwable cause(Throwable e, Class<?>... types) {
    for (Throwable c = e; c != null; c = c.getCause() == c ? null : c.getCause()) {
      for (Class<?> t : types) {
        if (t.isInstance(c)) {
          return c;
        }
      }
    }
    return null;
  }

  /** A limit below 1 KiB could not even carry a createWriter call. */
  static int checkMaxFrameBytes(int maxFrameBytes) {
    if (maxFrameBytes < GatewayConfig.MIN_MAX_FRAME_BYTES) {
      throw new IllegalArgumentException("the frame limit must be at least "
          + GatewayConfig.MIN_MAX_FRAME_BYTES + ", got " + maxFrameBytes);
    }
    return maxFrameBytes;
  }

  String host() {
    return host;
  }

  int port() {
    return socket.getLocalPort();
  }

  boolean tls() {
    return tls;
  }

  @Override
  public void close() {
    server.stop();
    try {
      socket.close();
    } catch (IOException e) {
      // closing anyway
    }
  }
}
