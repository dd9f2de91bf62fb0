"""Encode and decode speed of the wire codec: pure Python (the encoder and decoder the client used before,
kept as test oracles: tests/wire_oracle.py, tests/next_k_oracle.py) vs native (connector._native, the
client's only codec).

No cluster: 1M synthetic cells are encoded into `update` frames (grouped by row, 4 MiB chunks) from
ColumnUpdate tuples (the per-Mutation path: Python oracle, then the native entries encoder) and from one
Arrow batch (native), and decoded from `nextK` replies of 1000 cells. Prints cells/s for each path and a
final ``ratio=`` line, the smaller of the native/python speed-ups of the batch encoder and the decoder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo.mutation import ColumnUpdate  # noqa: E402
from connector.accumulo.wire import native  # noqa: E402
from tests.next_k_oracle import decode_reply_cells  # noqa: E402
from tests.wire_oracle import (  # noqa: E402
    _binary,
    encode_column_update,
    encode_row_entry,
    encode_update_message,
    varint,
)

N = 1_000_000
PAGE = 1000
CHUNK = 4 << 20


def synthetic() -> tuple[list[bytes], list[bytes], list[int], list[bytes]]:
    rows = [b"row%08d" % (i // 4) for i in range(N)]  # 4 cells per row, like a small derived record
    cqs = [b"q%d" % (i % 4) for i in range(N)]
    ts = [1_700_000_000_000 + i for i in range(N)]
    values = [b"value-%d" % i for i in range(N)]
    return rows, cqs, ts, values


def python_encode(rows, cqs, ts, values) -> int:
    """The BatchWriter's path: encode each update, merge by row, send a chunk when it reaches CHUNK bytes."""
    out_bytes = 0
    chunk: dict[bytes, list[bytes]] = {}
    size = 0
    for row, cq, t, v in zip(rows, cqs, ts, values, strict=True):
        enc = encode_column_update(ColumnUpdate(b"f", cq, b"", t, v, False))
        chunk.setdefault(row, []).append(enc)
        size += len(enc)
        if size >= CHUNK:
            entries = b"".join(encode_row_entry(r, u) for r, u in chunk.items())
            out_bytes += len(encode_update_message("writer-1", len(chunk), entries))
            chunk, size = {}, 0
    if chunk:
        entries = b"".join(encode_row_entry(r, u) for r, u in chunk.items())
        out_bytes += len(encode_update_message("writer-1", len(chunk), entries))
    return out_bytes


def native_entries_encode(rows, cqs, ts, values) -> int:
    """The same chunks from ColumnUpdate tuples with the native encoder, as ``add_mutation`` now sends them:
    each update encoded and sized when added (here one per mutation, the most calls), a chunk's rows put
    together when it is full."""
    out_bytes = 0
    chunk: dict[bytes, list] = {}
    size = 0
    for row, cq, t, v in zip(rows, cqs, ts, values, strict=True):
        structs, cost = native.encode_column_updates(row, [ColumnUpdate(b"f", cq, b"", t, v, False)])
        size += cost
        entry = chunk.get(row)
        if entry is None:
            chunk[row] = [1, structs]
        else:
            entry[0] += 1
            entry.append(structs)
        if size >= CHUNK:
            out_bytes += len(native.update_message("writer-1", *native.encode_update_entries(chunk, size)))
            chunk, size = {}, 0
    if chunk:
        out_bytes += len(native.update_message("writer-1", *native.encode_update_entries(chunk, size)))
    return out_bytes


def reply_frame(rows, cqs, ts, values) -> bytes:
    """A nextK reply as the gateway sends it (checked against thriftpy2 below for one page)."""
    parts = [b"\x82\x41\x00" + _binary(b"nextK") + b"\x0c\x00\x19\xfc" + varint(len(rows))]
    for row, cq, t, v in zip(rows, cqs, ts, values, strict=True):
        parts.append(b"\x1c\x18" + _binary(row) + b"\x18\x01f\x18" + _binary(cq) + b"\x18\x00\x16" + varint(t << 1)
                     + b"\x00\x18" + _binary(v) + b"\x00")
    parts.append(b"\x11\x00\x00")
    return b"".join(parts)


def check_reply_against_thriftpy2(frame: bytes, rows, cqs, ts, values) -> None:
    from thriftpy2.protocol import TCompactProtocol
    from thriftpy2.thrift import TMessageType
    from thriftpy2.transport import TMemoryBuffer

    from connector.accumulo._idl import proxy

    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("nextK", TMessageType.REPLY, 0)
    kvs = [proxy.KeyValue(proxy.Key(r, b"f", q, b"", t), v) for r, q, t, v in zip(rows, cqs, ts, values, strict=True)]
    proto.write_struct(proxy.AccumuloProxy.nextK_result(success=proxy.ScanResult(kvs, True)))
    proto.write_message_end()
    assert buf.getvalue() == frame, "synthetic reply differs from thriftpy2's"


def python_decode(frames: list[bytes]) -> int:
    n = 0
    for frame in frames:
        cells, _ = decode_reply_cells(frame)
        n += len(cells)
    return n


def native_decode(frames: list[bytes]) -> int:
    n = 0
    for frame in frames:
        decoded = native.decode_next_k_reply(frame)
        assert decoded is not None
        n += decoded[0].num_rows
    return n


def timed(label: str, fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    seconds = time.perf_counter() - start
    print(f"{label}: {N / seconds:,.0f} cells/s ({seconds:.2f} s)")
    return N / seconds


def main() -> None:
    rows, cqs, ts, values = synthetic()
    batch = pa.record_batch({"row": pa.array(rows, pa.binary()), "cf": pa.array([b"f"] * N, pa.binary()),
                             "cq": pa.array(cqs, pa.binary()), "cv": pa.array([b""] * N, pa.binary()),
                             "ts": pa.array(ts, pa.int64()), "value": pa.array(values, pa.binary())})
    frames = [reply_frame(rows[i:i + PAGE], cqs[i:i + PAGE], ts[i:i + PAGE], values[i:i + PAGE])
              for i in range(0, N, PAGE)]
    check_reply_against_thriftpy2(frames[0], rows[:PAGE], cqs[:PAGE], ts[:PAGE], values[:PAGE])

    def native_encode() -> int:
        return sum(len(f) for f in native.encode_update_frames("writer-1", batch, CHUNK))

    enc_py = timed("encode python (ColumnUpdates, oracle)", python_encode, rows, cqs, ts, values)
    enc_entries = timed("encode native (ColumnUpdates)", native_entries_encode, rows, cqs, ts, values)
    enc_native = timed("encode native (Arrow batch)", native_encode)
    dec_py = timed("decode python", python_decode, frames)
    dec_native = timed("decode native", native_decode, frames)
    print(f"encode speed-up: {enc_native / enc_py:.1f}x (ColumnUpdates: {enc_entries / enc_py:.1f}x), "
          f"decode speed-up: {dec_native / dec_py:.1f}x")
    print(f"ratio={min(enc_native / enc_py, dec_native / dec_py):.2f}")


if __name__ == "__main__":
    main()
