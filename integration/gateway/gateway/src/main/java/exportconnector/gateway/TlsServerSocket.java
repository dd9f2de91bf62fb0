package exportconnector.gateway;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.TrustManagerFactory;

/**
 * The TLS listening socket of a gateway: server certificate and key from PEM files (converted in
 * memory at start-up) or from a PKCS12 keystore, and optionally client certificates checked
 * against a CA file. Thrift then runs framed transport + compact protocol inside TLS, as upstream's
 * accumulo-proxy 2.x does with {@code thriftServerType=ssl}.
 */
final class TlsServerSocket {
  private TlsServerSocket() {}

  static SSLServerSocket bind(GatewayConfig.Tls tls, String host, int port)
      throws IOException, GeneralSecurityException {
    SSLContext ctx = SSLContext.getInstance("TLS");
    TrustManagerFactory tmf = null;
    if (tls.clientCaFile() != null) {
      KeyStore trust = KeyStore.getInstance("PKCS12");
      trust.load(null, null);
      int i = 0;
      for (Certificate c : readCertificates(tls.clientCaFile())) {
        trust.setCertificateEntry("ca-" + i++, c);
      }
      tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(trust);
    }
    ctx.init(keyManagers(tls).getKeyManagers(), tmf == null ? null : tmf.getTrustManagers(),
        new SecureRandom());
    SSLServerSocket socket = (SSLServerSocket) ctx.getServerSocketFactory().createServerSocket();
    socket.setReuseAddress(true);
    socket.setEnabledProtocols(tls.protocols());
    socket.setNeedClientAuth(tls.clientCaFile() != null);
    socket.bind(new InetSocketAddress(InetAddress.getByName(host), port), 128);
    return socket;
  }

  private static KeyManagerFactory keyManagers(GatewayConfig.Tls tls)
      throws IOException, GeneralSecurityException {
    KeyStore ks = KeyStore.getInstance("PKCS12");
    char[] password;
    if (tls.keystoreFile() != null) {
      password = Secrets.read("TLS keystore password", "GATEWAY_TLS_KEYSTORE_PASSWORD",
          tls.keystorePasswordFile().toString(), null).toCharArray();
      try (InputStream in = Files.newInputStream(tls.keystoreFile())) {
        ks.load(in, password);
      } catch (IOException e) {
        throw new IllegalArgumentException("cannot open the TLS keystore " + tls.keystoreFile()
            + " (wrong password or not PKCS12?): " + e.getMessage());
      }
    } else {
      List<Certificate> chain = readCertificates(tls.certFile());
      PrivateKey key = readPrivateKey(tls.keyFile(), chain.get(0).getPublicKey().getAlgorithm());
      password = new char[0];
      ks.load(null, null);
      ks.setKeyEntry("gateway", key, password, chain.toArray(new Certificate[0]));
    }
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(ks, password);
    return kmf;
  }

  private static List<Certificate> readCertificates(Path file)
      throws IOException, GeneralSecurityException {
    Collection<? extends Certificate> certs;
    try (InputStream in = Files.newInputStream(file)) {
      certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
    } catch (GeneralSecurityException e) {
      throw new IllegalArgumentException("cannot read PEM certificates from " + file + ": "
          + e.getMessage());
    }
    if (certs.isEmpty()) {
      throw new IllegalArgumentException("no certificate in " + file);
    }
    return new ArrayList<>(certs);
  }

  /** An unencrypted PKCS#8 PEM key ("BEGIN PRIVATE KEY"), what `openssl genpkey` writes. */
  private static PrivateKey readPrivateKey(Path file, String algorithm)
      throws IOException, GeneralSecurityException {
    String pem = Files.readString(file, StandardCharsets.US_ASCII);
    String begin = "-----BEGIN PRIVATE KEY-----";
    String end = "-----END PRIVATE KEY-----";
    int from = pem.indexOf(begin);
    int to = pem.indexOf(end);
    if (from < 0 || to < from) {
      throw new IllegalArgumentException("the TLS key file " + file + " is not an unencrypted "
          + "PKCS#8 PEM key (BEGIN PRIVATE KEY); convert it with "
          + "`openssl pkcs8 -topk8 -nocrypt -in OLD -out NEW`");
    }
    byte[] der = Base64.getMimeDecoder().decode(pem.substring(from + begin.length(), to));
    try {
      return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
    } catch (GeneralSecurityException e) {
      throw new IllegalArgumentException("cannot read the " + algorithm + " key in " + file
          + " (does it match the certificate?): " + e.getMessage());
    }
  }
}
