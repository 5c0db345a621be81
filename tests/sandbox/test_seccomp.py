"""The same system-call probes on both backends: what the seccomp filters refuse
(seccomp.DENIED, and socket(AF_VSOCK)) fails with EPERM, and the ordinary calls
next to them still work."""

from __future__ import annotations

import json
import platform

import pytest

from touchstone.sandbox.seccomp import _NUMBERS, DENIED

# Arguments that would succeed (or fail differently) if the call were allowed.
_ARGS = {"io_uring_setup": (8, 0), "unshare": (0x10000000,), "ptrace": (0, 0, 0, 0), "userfaultfd": (0,)}
_PROBE = """
import ctypes, json, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
calls, args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {}
for name, nr in calls.items():
    buf = ctypes.create_string_buffer(256)  # a valid pointer for calls that take one
    argv = [ctypes.c_long(a) for a in args.get(name, [])] or [ctypes.c_long(0), buf, ctypes.c_long(0)]
    ctypes.set_errno(0)
    out[name] = (libc.syscall(nr, *argv), ctypes.get_errno())
for family, kind in (("AF_VSOCK", 40), ("AF_UNIX", 1), ("AF_INET", 2), ("AF_INET6", 10)):
    try:
        socket.socket(kind, socket.SOCK_STREAM).close()
        out[family] = "ok"
    except OSError as exc:
        out[family] = exc.errno
print(json.dumps(out))
"""


def test_same_denials_on_both_backends(sb):
    machine = platform.machine()
    if machine not in _NUMBERS:
        pytest.skip(f"no syscall table for {machine}")
    calls = {name: _NUMBERS[machine][1][name] for name in DENIED}
    r = sb.exec(["python3", "-c", _PROBE, json.dumps(calls), json.dumps(_ARGS)])
    assert r.exit_code == 0, r.stderr
    seen = json.loads(r.stdout)
    refused = {name: tuple(seen[name]) for name in DENIED}
    assert refused == {name: (-1, 1) for name in DENIED}  # every one: EPERM
    assert seen["AF_VSOCK"] == 1
    assert seen["AF_UNIX"] == seen["AF_INET"] == seen["AF_INET6"] == "ok"


def test_ordinary_tools_still_work(sb):
    r = sb.exec(
        "python3 -c 'import asyncio, multiprocessing as m; print(m.Pool(2).map(abs, [-1, -2]))' && "
        "git init -q x && echo ok"
    )
    assert r.stdout.splitlines() == ["[1, 2]", "ok"], r.stderr
