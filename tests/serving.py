"""A real `transformers serve` on a free loopback port, for the tests that
drive the openai policy against a checkpoint directory."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def transformers_serve(model_dir: Path | str, timeout_s: float = 120) -> Iterator[str]:
    """Serve `model_dir` on CPU; yields the OpenAI base URL (`http://127.0.0.1:PORT/v1`)."""
    port = free_port()
    exe = Path(sys.executable).parent / "transformers"
    proc = subprocess.Popen(
        [
            str(exe if exe.exists() else shutil.which("transformers")),
            "serve",
            str(model_dir),
            "--device",
            "cpu",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"transformers serve exited: {proc.stderr.read().decode()[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(f"transformers serve did not come up within {timeout_s:.0f} s")
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
