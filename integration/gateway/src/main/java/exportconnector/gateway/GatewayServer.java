package exportconnector.gateway;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.accumulo.proxy.thrift.AccumuloProxy;
import org.apache.thrift.protocol.TCompactProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportException;
import org.apache.thrift.transport.layered.TFramedTransport;

/**
 * The Thrift server: framed transport, compact protocol, one thread per connection. One thread
 * per connection matters: it applies a connection's oneway {@code update} calls in order, before
 * the {@code flush} that follows them (selector-based servers may reorder oneway calls).
 */
final class GatewayServer implements AutoCloseable {
  /** Largest frame accepted unless --max-frame-bytes says otherwise (upstream's proxy: 16M). */
  static final int DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;

  private final TThreadPoolServer server;
  private final ServerSocket socket;
  private final String host;

  private GatewayServer(TThreadPoolServer server, ServerSocket socket, String host) {
    this.server = server;
    this.socket = socket;
    this.host = host;
  }

  /**
   * Binds now (port 0 picks a free port) and serves on a background thread. A frame longer than
   * {@code maxFrameBytes} closes its connection, as upstream's proxy does past its maxFrameSize.
   */
  static GatewayServer start(AccumuloProxy.Iface handler, String host, int port, String name,
      int maxFrameBytes) throws IOException, TTransportException {
    checkMaxFrameBytes(maxFrameBytes);
    ServerSocket socket = new ServerSocket();
    socket.setReuseAddress(true);
    socket.bind(new InetSocketAddress(InetAddress.getByName(host), port), 128);

    AtomicInteger n = new AtomicInteger();
    // daemon workers, so an idle client connection never keeps the JVM alive at exit
    ThreadPoolExecutor workers = new ThreadPoolExecutor(1, Integer.MAX_VALUE, 60, TimeUnit.SECONDS,
        new SynchronousQueue<>(), r -> {
          Thread t = new Thread(r, "gateway-" + name + "-conn-" + n.incrementAndGet());
          t.setDaemon(true);
          return t;
        });
    TThreadPoolServer.Args args = new TThreadPoolServer.Args(new TServerSocket(socket))
        .processor(new AccumuloProxy.Processor<>(handler))
        .transportFactory(new TFramedTransport.Factory(maxFrameBytes))
        .protocolFactory(new TCompactProtocol.Factory())
        .executorService(workers)
        .stopTimeoutVal(1)
        .stopTimeoutUnit(TimeUnit.SECONDS);
    TThreadPoolServer server = new TThreadPoolServer(args);
    Thread serve = new Thread(server::serve, "gateway-" + name + "-accept");
    serve.setDaemon(true);
    serve.start();
    return new GatewayServer(server, socket, host);
  }

  /** For argument parsing: a limit below 1 KiB could not even carry a createWriter call. */
  static int checkMaxFrameBytes(int maxFrameBytes) {
    if (maxFrameBytes < 1024) {
      throw new IllegalArgumentException(
          "--max-frame-bytes must be at least 1024, got " + maxFrameBytes);
    }
    return maxFrameBytes;
  }

  String host() {
    return host;
  }

  int port() {
    return socket.getLocalPort();
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
