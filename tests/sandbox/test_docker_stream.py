"""A docker exec's output read from the HTTP response's buffered reader (touchstone.sandbox.docker_stream):
bytes that arrived with the response headers are the command's first output, and must not be lost."""

from __future__ import annotations

import http.client
import socket
import struct

from touchstone.sandbox.docker_stream import read_frames


def _frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def test_frames_that_arrived_with_the_headers_come_first_and_whole():
    ours, daemon = socket.socketpair()
    frames = _frame(1, b"alive\n") + _frame(2, b"warning\n") + _frame(1, b"two\n" * 5000)
    # what a fast command does: its output is on the wire before the client reads the headers
    daemon.sendall(b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n\r\n" + frames[:9000])
    response = http.client.HTTPResponse(ours)
    response.begin()  # reads the headers through the buffered reader, which takes the frames with them
    assert response.fp.peek(1)  # (the reader holds output: the raw socket alone would have lost it)
    daemon.sendall(frames[9000:])
    daemon.close()
    got = list(read_frames(response.fp))
    assert got == [(1, b"alive\n"), (2, b"warning\n"), (1, b"two\n" * 5000)]


def test_a_stream_cut_inside_a_frame_ends_without_a_partial_frame_header():
    ours, daemon = socket.socketpair()
    daemon.sendall(_frame(1, b"whole\n") + b"\x01\x00\x00")  # a header cut short: the connection died
    daemon.close()
    assert list(read_frames(ours.makefile("rb"))) == [(1, b"whole\n")]
