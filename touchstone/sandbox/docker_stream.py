"""The output of a `docker exec`, read without losing its first bytes.

docker-py's `exec_start(socket=True)` (and its own streaming, which reads the same
socket) hands out the raw socket under the HTTP response. But http.client reads the
response headers through a buffered reader, which takes whatever else had already
arrived: a command that writes before the client gets to the headers (a fast
command, a busy machine) loses those bytes, the first line of its stdout
(docker/docker-py#3332; seen here as `''` for `echo alive`, one exec in 150 at nice
19 beside two busy jobs). `ExecStream` reads the multiplexed frames from that
buffered reader instead, so the bytes it holds come first."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

_HEADER = struct.Struct(">BxxxL")  # stream (1 stdout, 2 stderr), three pad bytes, payload size


def read_frames(reader: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(stream, payload) of each frame of a non-TTY attach stream, until it ends."""
    while True:
        header = reader.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        stream, size = _HEADER.unpack(header)
        payload = reader.read(size)  # a buffered reader blocks for all of it (or the end)
        if not payload:
            return
        yield stream, payload


class ExecStream:
    """A started exec's output, frame by frame, from the response's buffered reader."""

    def __init__(self, api: Any, exec_id: str):
        # What APIClient.exec_start does, keeping the response instead of its raw socket.
        self._response = api._post_json(
            api._url("/exec/{0}/start", exec_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": False, "Detach": False},
            stream=True,
        )
        api._raise_for_status(self._response)
        self._reader = self._response.raw._fp.fp  # http.client's buffered reader of the hijacked connection

    def frames(self) -> Iterator[tuple[int, bytes]]:
        return read_frames(self._reader)

    def close(self) -> None:
        """Close the connection itself: closing the readers alone leaves the socket open."""
        sock = getattr(self._reader.raw, "_sock", None)
        self._response.close()  # first: it flushes the reader it closes
        if sock is not None:
            sock.close()
