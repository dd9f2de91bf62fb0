package exportconnector.gateway;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;

import org.apache.accumulo.proxy.thrift.AccumuloProxy;
import org.apache.thrift.TApplicationException;
import org.apache.thrift.TException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Wraps the handler so that no call ends as Thrift's message-less "Internal error processing X".
 * An error the IDL declares for that call goes out as is; any other one (e.g. a bad shared secret
 * on listTables, which declares no exceptions) becomes a TApplicationException that carries the
 * exception's type and message.
 */
final class DeclaredExceptionsGuard {
  private static final Logger LOG = LoggerFactory.getLogger(DeclaredExceptionsGuard.class);

  private DeclaredExceptionsGuard() {}

  static AccumuloProxy.Iface wrap(AccumuloProxy.Iface target) {
    return (AccumuloProxy.Iface) Proxy.newProxyInstance(AccumuloProxy.Iface.class.getClassLoader(),
        new Class<?>[] {AccumuloProxy.Iface.class}, (proxy, method, args) -> {
          try {
            return method.invoke(target, args);
          } catch (InvocationTargetException ite) {
            TException te = Errors.translate(ite.getCause());
            if (te instanceof TApplicationException || declares(method, te)) {
              throw te;
            }
            LOG.debug("{} failed with undeclared {}", method.getName(), te.getClass().getSimpleName());
            throw new TApplicationException(TApplicationException.INTERNAL_ERROR,
                ErrorNames.undeclared(te));
          }
        });
  }

  private static boolean declares(Method method, TException te) {
    for (Class<?> declared : method.getExceptionTypes()) {
      if (declared != TException.class && declared.isInstance(te)) {
        return true;
      }
    }
    return false;
  }

}
