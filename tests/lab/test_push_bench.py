"""The push bench's lean SSE reader: events split anywhere across reads come out whole, once, in order."""

from __future__ import annotations

from mgmatch.lab.push_bench import sse_events

STREAM = (b"retry: 1000\n\n"
          b"id: 1795-0\nevent: queued\ndata: {\"id\":\"t1\",\"note\":\"a: b\"}\n\n"
          b": ping\n\n"
          b"event: error\ndata: {\"error\":\"store\"}\n\n"
          b"id: 1795-1\nevent: matched\ndata: {}\n\n"
          b"id: 1796-0\nevent: queued\ndata: {}\n")


def test_sse_events_split_at_every_byte_come_out_whole_once_and_in_order():
    for cut in range(len(STREAM) + 1):
        got, rest = sse_events(STREAM[:cut])
        more, rest = sse_events(rest + STREAM[cut:])
        assert got + more == [("1795-0", "queued"), ("1795-1", "matched")], cut
        assert rest == b"id: 1796-0\nevent: queued\ndata: {}\n"  # the last block is not complete yet
