"""The same system-call probes on both backends: what the seccomp filters refuse
(seccomp.DENIED, and socket(AF_VSOCK)) fails with EPERM, the ordinary calls
next to them still work, and a call through a foreign ABI (i386, x32) kills
the process."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

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


# 32-bit and x32 system calls from a 64-bit process, through machine code in an
# executable page below 4 GiB (socketcall takes a 32-bit pointer to its arguments).
# Each call runs in a forked child: {"ret": value or null, "signal": N or null}.
_PROBE_FOREIGN_ABI = r"""
import ctypes, json, mmap, os, socket
# long call(nr, a, b, c): int 0x80 with eax=nr, ebx=a, ecx=b, edx=c; result sign-extended
I386 = bytes.fromhex("53 89f8 89f3 4989c8 89d1 4489c2 cd80 4863c0 5b c3")
# long call(nr, a, b, c): syscall with nr | 0x40000000 (the x32 ABI), rdi=a, rsi=b, rdx=c
X32 = bytes.fromhex("4889f8 480d00000040 4889f7 4889d6 4889ca 0f05 c3")
page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40,  # MAP_32BIT
                 prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page[0:len(I386)], page[64:64 + len(X32)] = I386, X32
base = ctypes.addressof(ctypes.c_char.from_buffer(page))
kind = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long)
i386, x32 = kind(base), kind(base + 64)
block = (ctypes.c_uint32 * 3).from_buffer(page, 256)
block[0], block[1], block[2] = 40, socket.SOCK_STREAM, 0  # AF_VSOCK
calls = {
    "i386 getpid": lambda: i386(20, 0, 0, 0),
    "i386 socket(AF_VSOCK)": lambda: i386(359, 40, socket.SOCK_STREAM, 0),
    "i386 socketcall(SYS_SOCKET, AF_VSOCK)": lambda: i386(102, 1, base + 256, 0),
    "x32 getpid": lambda: x32(39, 0, 0, 0),
    "x32 socket(AF_VSOCK)": lambda: x32(41, 40, socket.SOCK_STREAM, 0),
}
out = {}
for name, call in calls.items():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, str(call()).encode())
        os._exit(0)
    os.close(w)
    ret = os.read(r, 64).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    out[name] = {"ret": int(ret) if ret else None, "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}
print(json.dumps(out))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 and x32 ABIs exist on x86_64 only")
def test_a_foreign_abi_call_kills_the_process(sb):
    """Issue 34 #1: through `int 0x80`, socketcall reached socket(AF_VSOCK) past
    Docker's filter, which checked the family of the native call only."""
    host = subprocess.run([sys.executable, "-c", _PROBE_FOREIGN_ABI], capture_output=True, text=True, check=True)
    if json.loads(host.stdout)["i386 getpid"]["ret"] is not None:  # the kernel runs i386 calls here
        assert json.loads(host.stdout)["i386 getpid"]["ret"] > 0, "the probe's machine code is wrong"
    r = sb.exec(["python3", "-c", _PROBE_FOREIGN_ABI])
    assert r.exit_code == 0, r.stderr
    seen = json.loads(r.stdout)
    # SIGSYS at the first foreign call, before it does anything: no vsock socket exists
    assert seen == {name: {"ret": None, "signal": 31} for name in seen} and len(seen) == 5
