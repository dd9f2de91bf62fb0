"""Client-side check of Accumulo column visibility expressions, so a bad one fails before anything is sent.

Grammar (Accumulo's ColumnVisibility): a term is a token of ``[A-Za-z0-9_.:/-]``, a double-quoted string
(with ``\\"`` and ``\\\\`` escapes) or a parenthesised expression; terms join with ``&`` or ``|``, and one
level may not mix the two without parentheses. The empty expression is allowed.
"""

from __future__ import annotations

import re

from connector.errors import ConnectorError

_TOKEN = re.compile(rb"[A-Za-z0-9_.:/\-]+")


class VisibilityError(ConnectorError, ValueError):
    pass


def check_visibility(expr: bytes) -> None:
    """Raise VisibilityError naming the problem if ``expr`` is not a valid visibility expression."""
    if not expr:
        return
    end = _expression(expr, 0)
    if end != len(expr):
        raise VisibilityError(f"unexpected {expr[end:end + 1]!r} at {end} in visibility {expr!r}")


def _expression(expr: bytes, pos: int) -> int:
    pos = _term(expr, pos)
    operator = None
    while pos < len(expr) and expr[pos:pos + 1] in (b"&", b"|"):
        op = expr[pos:pos + 1]
        if operator is not None and op != operator:
            raise VisibilityError(f"cannot mix & and | without parentheses in visibility {expr!r}")
        operator = op
        pos = _term(expr, pos + 1)
    return pos


def _term(expr: bytes, pos: int) -> int:
    if pos >= len(expr):
        raise VisibilityError(f"visibility {expr!r} ends where a term is expected")
    c = expr[pos:pos + 1]
    if c == b"(":
        end = _expression(expr, pos + 1)
        if expr[end:end + 1] != b")":
            raise VisibilityError(f"missing ')' in visibility {expr!r}")
        return end + 1
    if c == b'"':
        i = pos + 1
        while i < len(expr):
            ch = expr[i:i + 1]
            if ch == b"\\":
                if expr[i + 1:i + 2] not in (b'"', b"\\"):
                    raise VisibilityError(f"bad escape in quoted term of visibility {expr!r}")
                i += 2
                continue
            if ch == b'"':
                if i == pos + 1:
                    raise VisibilityError(f"empty quoted term in visibility {expr!r}")
                return i + 1
            i += 1
        raise VisibilityError(f"unterminated quote in visibility {expr!r}")
    match = _TOKEN.match(expr, pos)
    if not match:
        raise VisibilityError(f"unexpected {c!r} at {pos} in visibility {expr!r}")
    return match.end()
