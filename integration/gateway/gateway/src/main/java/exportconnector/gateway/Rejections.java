package exportconnector.gateway;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.accumulo.core.client.MutationsRejectedException;
import org.apache.accumulo.core.client.security.SecurityErrorCode;
import org.apache.accumulo.core.data.ConstraintViolationSummary;
import org.apache.accumulo.core.data.TabletId;

/**
 * The failures a writer session has seen since its last flush. A oneway update cannot report an
 * error, so failures wait here until the next flush or close reports them and starts afresh.
 */
final class Rejections {
  /** How many messages the Thrift error spells out; the rest are only counted. */
  static final int SHOWN = 5;

  private final List<String> messages = new ArrayList<>();
  private int count;

  void record(String message) {
    if (messages.size() < SHOWN) {
      messages.add(message);
    }
    count++;
  }

  boolean isEmpty() {
    return count == 0;
  }

  /** The report for the caller, then forget everything (the session stays usable). */
  String drain(String writerId) {
    StringBuilder sb = new StringBuilder();
    sb.append(count).append(count == 1 ? " failure" : " failures").append(" on writer ")
        .append(writerId).append(" since the last flush: ");
    sb.append(String.join("; ", messages));
    if (count > messages.size()) {
      sb.append("; and ").append(count - messages.size()).append(" more");
    }
    messages.clear();
    count = 0;
    return sb.toString();
  }

  /** A readable summary of what Accumulo's BatchWriter refused. */
  static String describe(MutationsRejectedException e) {
    List<String> parts = new ArrayList<>();
    List<ConstraintViolationSummary> cvs = e.getConstraintViolationSummaries();
    if (cvs != null && !cvs.isEmpty()) {
      List<String> each = new ArrayList<>();
      for (ConstraintViolationSummary s : cvs) {
        each.add(s.getConstrainClass() + " code " + s.getViolationCode() + " ("
            + s.getViolationDescription() + ") x" + s.getNumberOfViolatingMutations());
      }
      parts.add("constraint violations: " + String.join(", ", each));
    }
    Map<TabletId,Set<SecurityErrorCode>> sec = e.getSecurityErrorCodes();
    if (sec != null && !sec.isEmpty()) {
      List<String> each = new ArrayList<>();
      sec.forEach((tablet, codes) -> each.add(tablet.getTable() + " " + codes));
      parts.add("security errors: " + String.join(", ", each));
    }
    if (e.getErrorServers() != null && !e.getErrorServers().isEmpty()) {
      parts.add("server errors: " + e.getErrorServers());
    }
    if (e.getUnknownExceptions() > 0) {
      Throwable last = e.getCause();
      parts.add(e.getUnknownExceptions() + " other error(s)"
          + (last == null ? "" : ", the last: " + Conversions.firstLine(Errors.describe(last))));
    }
    if (parts.isEmpty()) {
      parts.add(String.valueOf(e.getMessage()));
    }
    return "mutations rejected: " + String.join("; ", parts);
  }
}
