"""The candidate's side of its output: `install` makes `sys.stdout` and
`sys.stderr` of the candidate's process forward every write to the judge's
process (the writers are judge functions called back over the wire), so a
test's `capsys` sees what candidate code prints, as in process. Standard
library only: copied into the candidate's sandbox with the server."""

import io
import sys


class Forward(io.TextIOBase):
    """A text stream whose writes are calls of a judge-side writer."""

    def __init__(self, write, name: str):
        self._write, self._name = write, name

    @property
    def name(self):
        return self._name

    def writable(self):
        return True

    def write(self, text):
        if type(text) is not str:
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            self._write(text)
        return len(text)


def install(stdout, stderr) -> None:
    sys.stdout, sys.stderr = Forward(stdout, "<stdout>"), Forward(stderr, "<stderr>")
