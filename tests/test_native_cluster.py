"""The native encoder and decoder against a real Accumulo behind the gateway (one small round trip)."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from connector.accumulo._idl import proxy
from connector.accumulo.transport import close_client, send_frame
from connector.accumulo.wire.native import decode_next_k_reply, encode_update_frames
from connector.accumulo.wire.next_k import encode_next_k, recv_exact
from connector.queue.native_rows import entry_deletes

pytestmark = pytest.mark.cluster


def native_scan(client, secret: str, table: str, k: int) -> pa.Table:
    """Every cell of ``table``, page by page: nextK replies decoded natively."""
    scanner = client.createScanner(secret, table, proxy.ScanOptions())
    sock = client.raw_socket.sock
    batches = []
    try:
        while True:
            sock.sendall(encode_next_k(scanner, k))
            (size,) = struct.unpack("!i", recv_exact(sock, 4))
            decoded = decode_next_k_reply(recv_exact(sock, size))
            assert decoded is not None, "a plain ScanResult reply must decode natively"
            batch, more = decoded
            batches.append(batch)
            if not more:
                return pa.Table.from_batches(batches)
    finally:
        client.closeScanner(scanner)


def test_native_frames_write_and_native_scan_reads_back(conn_a, table):
    rows = [b"r%04d\xff" % (i % 300) for i in range(3000)]  # rows recur far apart: merged per frame
    puts = pa.record_batch({
        "row": pa.array(rows, pa.binary()),
        "cf": pa.array([b"e"] * 3000, pa.binary()),
        "cq": pa.array([b"v%d" % (i // 300) for i in range(3000)], pa.binary()),
        "cv": pa.array([b""] * 3000, pa.binary()),
        "ts": pa.array([1000 + i for i in range(3000)], pa.int64()),
        "value": pa.array([b"" if i % 7 == 0 else b"\x00value-%d" % i for i in range(3000)], pa.binary()),
    })
    client = conn_a.new_client()
    try:
        writer = client.createWriter(conn_a.shared_secret, table, proxy.WriterOptions())
        frames = encode_update_frames(writer, puts, 16 << 10)
        assert len(frames) > 1 and all(len(f) <= 16 << 10 for f in frames)
        for frame in frames:
            send_frame(client, frame)
        client.flush(writer)

        got = native_scan(client, conn_a.shared_secret, table, 500)
        expected = sorted(zip(rows, [b"v%d" % (i // 300) for i in range(3000)], range(1000, 4000),
                              puts.column("value").to_pylist(), strict=True))
        assert list(zip(got["row"].to_pylist(), got["cq"].to_pylist(), got["ts"].to_pylist(),
                        got["value"].to_pylist(), strict=True)) == expected
        # the Python scanner sees the same cells
        assert [(c.row, c.cq, c.ts, c.value) for c in conn_a.scan(table)] == expected

        # deletes at each cell's own timestamp (a null value is a delete); a newer put of one cell survives
        send_frame(client, encode_update_frames(writer, pa.record_batch({
            "row": [rows[0], b"q:1:x"], "cf": [b"e", b"e"], "cq": [b"v0", b"v"], "cv": [b"", b""],
            "ts": pa.array([5000, 7], pa.int64()), "value": [b"newer", b"entry"]}), 1 << 20)[0])
        deletes = pa.record_batch({"row": got["row"].combine_chunks(), "cf": got["cf"].combine_chunks(),
                                   "cq": got["cq"].combine_chunks(), "cv": got["cv"].combine_chunks(),
                                   "ts": got["ts"].combine_chunks(), "value": pa.nulls(got.num_rows, pa.binary())})
        for frame in encode_update_frames(writer, deletes, 64 << 10):
            send_frame(client, frame)
        client.flush(writer)
        assert native_scan(client, conn_a.shared_secret, table, 500).to_pylist() == [
            {"row": b"q:1:x", "cf": b"e", "cq": b"v", "cv": b"", "ts": 7, "value": b"entry"},
            {"row": rows[0], "cf": b"e", "cq": b"v0", "cv": b"", "ts": 5000, "value": b"newer"}]
        # the drain's deletes of queue entries: e:v at the entry's own timestamp
        for frame in encode_update_frames(writer, entry_deletes(
                pa.array([b"q:1:x"], pa.binary()), pa.array([7], pa.int64())), 1 << 20):
            send_frame(client, frame)
        client.flush(writer)
        client.closeWriter(writer)
        assert native_scan(client, conn_a.shared_secret, table, 500)["row"].to_pylist() == [rows[0]]
    finally:
        close_client(client)
