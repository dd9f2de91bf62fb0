package exportconnector.gateway;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The open sessions of one kind, by id. */
final class SessionRegistry<S extends Session> {
  private static final Logger LOG = LoggerFactory.getLogger(SessionRegistry.class);

  private final String kind;
  private final Map<String,S> sessions = new ConcurrentHashMap<>();

  SessionRegistry(String kind) {
    this.kind = kind;
  }

  S add(S session) {
    sessions.put(session.id, session);
    return session;
  }

  /** The session, entered (the caller must exit it), or null if the id is unknown or closed. */
  S enter(String id) {
    S s = id == null ? null : sessions.get(id);
    if (s == null || !s.enter()) {
      return null;
    }
    return s;
  }

  /** Takes an entered session out of the registry; the caller exits it, then releases it. */
  void remove(S entered) {
    entered.markClosed();
    sessions.remove(entered.id, entered);
  }

  void sweep(long idleNanos) {
    for (S s : sessions.values()) {
      if (s.expireIfIdle(idleNanos)) {
        sessions.remove(s.id, s);
        LOG.info("closed idle {} {}", kind, s.id);
      }
    }
  }

  /** At shutdown: close whatever is open, waiting for calls in progress. */
  void closeAll() {
    for (S s : sessions.values()) {
      if (s.enter()) {
        remove(s);
        s.exit();
        s.release();
      }
    }
  }

  int size() {
    return sessions.size();
  }
}
