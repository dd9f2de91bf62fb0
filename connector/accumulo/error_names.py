"""The names errors carry across the gateway where the Thrift IDL has no exception for them.

The gateway sends a ``TApplicationException`` (a call whose IDL declares no exception, a scan that timed out
or failed on the server), an ``AccumuloException`` of a kind the client tells apart (a bulk import that is not
there) or a writer's rejection whose text starts with one of these names and :data:`SEPARATOR`; the client
maps them to its typed errors (``errors.translate``, the writer's flush). This is the only place on the Python
side that spells them. The gateway spells them once too, in
``integration/gateway/gateway/src/main/java/exportconnector/gateway/ErrorNames.java``;
``tests/test_error_names.py`` checks that the two lists are equal.
"""

from __future__ import annotations

#: no tablet server served a scan, or took a writer's writes, within the caller's timeout
TIMED_OUT = "TimedOutException"
#: Accumulo's servers failed a scan (an iterator that cannot load, say): not a permission problem
SERVER = "AccumuloServerException"
#: the IDL's AccumuloSecurityException, sent on a call that declares none (a wrong shared secret)
SECURITY = "AccumuloSecurityException"
#: the IDL's TableNotFoundException, sent on a call that declares none
TABLE_NOT_FOUND = "TableNotFoundException"
#: no staging directory of that bulk id under the gateway's gateway.bulk.dir (deleted, never made, or made by a
#: gateway with another gateway.bulk.dir); sent in an AccumuloException
BULK_IMPORT_NOT_FOUND = "BulkImportNotFoundException"
#: between the name and the rest of the message
SEPARATOR = ": "


def all_names() -> dict[str, str]:
    """Every constant of this module by its name, as the Java class's ``main`` prints its own."""
    return {name: value for name, value in globals().items() if name.isupper() and isinstance(value, str)}
