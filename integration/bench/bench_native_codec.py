"""Encode and decode speed of the wire codec: pure Python (thriftpy2's compact protocol, which the client's
generic calls use) vs native (connector._native, the client's only codec of ``update`` and ``nextK``).

No cluster: 1M synthetic cells are encoded into `update` frames (grouped by row, 4 MiB chunks) from
ColumnUpdate tuples (the per-Mutation path: thriftpy2 structs, then the native entries encoder) and from one
Arrow batch (native), and decoded from `nextK` replies of 1000 cells. Prints cells/s for each path and a
final ``ratio=`` line, the smaller of the native/python speed-ups of the batch encoder and the decoder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo._idl import proxy  # noqa: E402
from connector.accumulo.mutation import ColumnUpdate  # noqa: E402
from connector.accumulo.wire import native  # noqa: E402
from connector.accumulo.wire.structs import column_update_to_thrift  # noqa: E402

N = 1_000_000
PAGE = 1000
CHUNK = 4 << 20


def synthetic() -> tuple[list[bytes], list[bytes], list[int], list[bytes]]:
    rows = [b"row%08d" % (i // 4) for i in range(N)]  # 4 cells per row, like a small derived record
    cqs = [b"q%d" % (i % 4) for i in range(N)]
    ts = [1_700_000_000_000 + i for i in range(N)]
    values = [b"value-%d" % i for i in range(N)]
    return rows, cqs, ts, values


def thriftpy2_message(name: str, kind: int, struct) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin(name, kind, 0)
    proto.write_struct(struct)
    proto.write_message_end()
    return buf.getvalue()


def python_encode(rows, cqs, ts, values) -> int:
    """The BatchWriter's path in thriftpy2: a struct per update, merged by row, a chunk written when it
    reaches CHUNK bytes (sized as the native path sizes them)."""
    out_bytes = 0
    chunk: dict[bytes, list] = {}
    size = 0
    for row, cq, t, v in zip(rows, cqs, ts, values, strict=True):
        chunk.setdefault(row, []).append(column_update_to_thrift(ColumnUpdate(b"f", cq, b"", t, v, False)))
        size += 16 + len(cq) + len(v)
        if size >= CHUNK:
            args = proxy.AccumuloProxy.update_args(writer="writer-1", cells=chunk)
            out_bytes += len(thriftpy2_message("update", TMessageType.ONEWAY, args))
            chunk, size = {}, 0
    if chunk:
        args = proxy.AccumuloProxy.update_args(writer="writer-1", cells=chunk)
        out_bytes += len(thriftpy2_message("update", TMessageType.ONEWAY, args))
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
    """A nextK reply as the gateway sends it, written by thriftpy2."""
    kvs = [proxy.KeyValue(proxy.Key(r, b"f", q, b"", t), v) for r, q, t, v in zip(rows, cqs, ts, values, strict=True)]
    result = proxy.AccumuloProxy.nextK_result(success=proxy.ScanResult(kvs, True))
    return thriftpy2_message("nextK", TMessageType.REPLY, result)


def python_decode(frames: list[bytes]) -> int:
    n = 0
    for frame in frames:
        proto = TCompactProtocol(TMemoryBuffer(frame))
        proto.read_message_begin()
        result = proxy.AccumuloProxy.nextK_result()
        proto.read_struct(result)
        proto.read_message_end()
        n += len(result.success.results)
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

    def native_encode() -> int:
        return sum(len(f) for f in native.encode_update_frames("writer-1", batch, CHUNK))

    enc_py = timed("encode python (ColumnUpdates, thriftpy2)", python_encode, rows, cqs, ts, values)
    enc_entries = timed("encode native (ColumnUpdates)", native_entries_encode, rows, cqs, ts, values)
    enc_native = timed("encode native (Arrow batch)", native_encode)
    dec_py = timed("decode python (thriftpy2)", python_decode, frames)
    dec_native = timed("decode native", native_decode, frames)
    print(f"encode speed-up: {enc_native / enc_py:.1f}x (ColumnUpdates: {enc_entries / enc_py:.1f}x), "
          f"decode speed-up: {dec_native / dec_py:.1f}x")
    print(f"ratio={min(enc_native / enc_py, dec_native / dec_py):.2f}")


if __name__ == "__main__":
    main()
