package exportconnector.gateway;

import java.util.UUID;
import java.util.concurrent.locks.ReentrantLock;

/**
 * An open writer, scanner or conditional writer. Calls on one session run one at a time (enter /
 * exit); the idle sweeper only closes a session nobody is inside, so a call never sees its
 * resources closed under it.
 */
abstract class Session {
  final String id = UUID.randomUUID().toString();
  private final ReentrantLock lock = new ReentrantLock();
  private volatile long lastUsedNanos = System.nanoTime();
  private boolean closed; // guarded by lock

  /** Waits for other calls on this session; false if it was closed meanwhile. */
  final boolean enter() {
    lock.lock();
    if (closed) {
      lock.unlock();
      return false;
    }
    return true;
  }

  final void exit() {
    lastUsedNanos = System.nanoTime();
    lock.unlock();
  }

  /** Marks the entered session closed; the caller still exits and then releases it. */
  final void markClosed() {
    closed = true;
  }

  /** Closes the session if nobody is inside and it has been idle that long. */
  final boolean expireIfIdle(long idleNanos) {
    if (!lock.tryLock()) {
      return false; // in use right now, so not idle
    }
    try {
      if (closed || System.nanoTime() - lastUsedNanos < idleNanos) {
        return false;
      }
      closed = true;
    } finally {
      lock.unlock();
    }
    release();
    return true;
  }

  /** Frees the Accumulo resources; called once, after the session was marked closed. */
  abstract void release();
}
