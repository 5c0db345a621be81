"""A seccomp filter for the bwrap backend: the system calls Docker's default profile
also refuses that an unprivileged process could still reach (key management,
BPF, perf, userfaultfd, io_uring, namespace and module calls), answered with
EPERM. Written as a classic BPF program by hand because bwrap takes the compiled
program (`--seccomp FD`) and libseccomp's Python binding is not available here."""

from __future__ import annotations

import errno
import platform
import struct

_LD_ABS_W, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000

# name -> number, per architecture (from the kernel's syscall tables)
_DENIED = {
    "x86_64": (0xC000003E, {
        "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "open_by_handle_at": 304, "name_to_handle_at": 303, "lookup_dcookie": 212,
        "acct": 163, "swapon": 167, "swapoff": 168, "reboot": 169, "syslog": 103, "setns": 308,
        "unshare": 272, "mount": 165, "umount2": 166, "pivot_root": 155,
    }),
    "aarch64": (0xC00000B7, {
        "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "open_by_handle_at": 265, "name_to_handle_at": 264, "lookup_dcookie": 18,
        "acct": 89, "swapon": 224, "swapoff": 225, "reboot": 142, "syslog": 116, "setns": 268,
        "unshare": 97, "mount": 40, "umount2": 39, "pivot_root": 41,
    }),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def denylist_program() -> bytes | None:
    """The compiled filter for this machine, or None on an architecture we have no
    table for (the sandbox then relies on its other layers)."""
    machine = platform.machine()
    if machine not in _DENIED:
        return None
    arch, numbers = _DENIED[machine]
    # Layout: [0] load arch, [1] foreign arch -> deny, [2] load nr, checks..., allow, deny.
    checks = [(_JGE, _X32_BIT)] if machine == "x86_64" else []  # x32 ABI calls
    checks += [(_JEQ, nr) for nr in sorted(numbers.values())]
    deny = 3 + len(checks) + 1
    program = [_insn(_LD_ABS_W, 0, 0, 4), _insn(_JEQ, 0, deny - 2, arch), _insn(_LD_ABS_W, 0, 0, 0)]
    for code, k in checks:
        program.append(_insn(code, deny - len(program) - 1, 0, k))
    program += [_insn(_RET, 0, 0, _RET_ALLOW), _insn(_RET, 0, 0, _RET_ERRNO | errno.EPERM)]
    assert len(program) == deny + 1
    return b"".join(program)
