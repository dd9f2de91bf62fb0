"""Typed errors of the Accumulo client. Each carries the server's message where there is one."""

from __future__ import annotations

from connector.errors import ConnectorError

from .error_names import BULK_IMPORT_NOT_FOUND, SECURITY, SEPARATOR, SERVER, TABLE_NOT_FOUND, TIMED_OUT


class AccumuloError(ConnectorError):
    """Base class: something Accumulo or the gateway refused or could not do."""


class AccumuloSecurityError(AccumuloError):
    """Wrong shared secret, or the gateway's user lacks a permission."""

    input_error = True


class AccumuloServerError(AccumuloError):
    """Accumulo's servers failed to do what was asked (e.g. a scan iterator that cannot be loaded or that
    threw); not a permission problem. The tablet server's log has the cause."""


class TableNotFoundError(AccumuloError):
    """The named table does not exist."""

    input_error = True


class TableExistsError(AccumuloError):
    """A table of that name already exists."""


class BulkImportNotFoundError(AccumuloError):
    """The gateway has no staging directory of that bulk id: removed, never made, or made by a gateway with
    another ``gateway.bulk.dir``. Nothing says whether its files were loaded."""


class MutationsRejectedError(AccumuloError):
    """Accumulo or the gateway rejected some mutations; the message names them."""


class UnknownWriterError(AccumuloError):
    """The gateway no longer knows the writer (expired after idling, or the gateway restarted)."""


class UnknownScannerError(AccumuloError):
    """The gateway no longer knows the scanner (expired after idling, or the gateway restarted)."""


class TimedOutError(AccumuloError):
    """No tablet server served a scan, or took a writer's writes, within the connection's ``server_wait``
    (e.g. the only tablet server of the cluster crashed and is not back yet). What a failed flush held is
    not known to be durable: resend it (harmless for cells with explicit timestamps)."""


class SendDeadlinePassedError(AccumuloError):
    """A writer held something past the deadline of the batch it carries (``connector.accumulo.writer.send_deadline``)
    before sending it, first or replayed after a reconnect: it sent none of it after the deadline and dropped all it
    held. What it sent before may be applied or not; the caller treats the batch as held too long and reads it
    again."""


class InvalidMutationError(AccumuloError, ValueError):
    """A mutation was refused on the client before anything was sent (bad visibility, too large, ...)."""


class ConnectionLostError(AccumuloError, ConnectionError):
    """The gateway could not be reached, even after the configured retries."""


class TlsError(AccumuloError):
    """TLS to the gateway failed in a way a retry cannot cure: the server's certificate did not verify
    against ``tls_ca_file`` (or names another host), the gateway wants a client certificate, or a plain
    client reached a gateway that requires TLS. The message says which and what to check."""

    input_error = True


def translate(exc: BaseException) -> BaseException:
    """Map an exception raised by the Thrift client to this module's typed errors (others pass through)."""
    from ._idl import proxy

    mapping: dict[type, type[AccumuloError]] = {
        proxy.AccumuloSecurityException: AccumuloSecurityError,
        proxy.TableNotFoundException: TableNotFoundError,
        proxy.TableExistsException: TableExistsError,
        proxy.MutationsRejectedException: MutationsRejectedError,
        proxy.UnknownWriter: UnknownWriterError,
        proxy.UnknownScanner: UnknownScannerError,
        proxy.AccumuloException: AccumuloError,
    }
    if isinstance(exc, proxy.AccumuloException) and (exc.msg or "").startswith(BULK_IMPORT_NOT_FOUND + SEPARATOR):
        return BulkImportNotFoundError(exc.msg.split(SEPARATOR, 1)[-1])
    for thrift_type, ours in mapping.items():
        if isinstance(exc, thrift_type):
            return ours(getattr(exc, "msg", None) or type(exc).__name__)
    import ssl

    from thriftpy2.thrift import TApplicationException

    if isinstance(exc, ssl.SSLError):  # after the handshake: TLS 1.3 reports a refused client cert here
        reason = exc.reason or str(exc)
        hint = (": the gateway may require a client certificate (tls_cert_file, tls_key_file) signed by the CA "
                "it trusts" if "CERTIFICATE" in reason.upper() else "")
        return TlsError(f"TLS: {reason}{hint}")
    if isinstance(exc, TApplicationException):
        # calls whose IDL declares no exception (tableExists, listTables) carry the type in the message
        message = exc.message or str(exc)
        by_name = {TIMED_OUT: TimedOutError,
                   SECURITY: AccumuloSecurityError,
                   TABLE_NOT_FOUND: TableNotFoundError,
                   SERVER: AccumuloServerError}
        for name, ours in by_name.items():
            if message.startswith(name):
                return ours(message.split(SEPARATOR, 1)[-1])
        return AccumuloError(f"gateway error: {message}")
    return exc
