"""The system calls no sandboxed command may make, for both backends.

`DENIED` lists them: what Docker's default profile refuses a process without
capabilities that the kernel would otherwise still let it reach (key management,
BPF, perf, userfaultfd, namespace, mount and module calls), and on top of it
io_uring (a large attack surface that seccomp cannot inspect), ptrace and
process_vm_* (a process could take over another one of the same user), and
`socket(AF_VSOCK, ...)` (a channel to the hypervisor that network namespaces do
not cut). All are answered with EPERM.

Only the native ABI passes either filter: a 64-bit x86 process can still make
i386 calls (`int 0x80`) and x32 calls (numbers with bit 30 set), where the same
call has another number and `socketcall` hides `socket`'s arguments behind a
pointer. Both filters kill the process at its first foreign call (SIGSYS, exit
159), as libseccomp's bad-architecture action does in Docker.

- bwrap takes a compiled classic-BPF program (`--seccomp FD`): `denylist_program()`
  writes it by hand, since libseccomp's binding is not in the harness's venv.
- Docker takes a JSON profile, which replaces its default: `docker_profile()` is
  Docker's default (`docker-default-seccomp.json`, Docker 20.10's
  profiles/seccomp/default.json as Debian ships it, Apache-2.0) with the same
  calls removed from every rule that allows them."""

from __future__ import annotations

import errno
import functools
import json
import platform
import struct
from pathlib import Path

_LD_ABS_W, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_X32_BIT = 0x40000000
_ARG0_LOW = 16  # offsetof(struct seccomp_data, args[0]), low word on little-endian machines
AF_VSOCK = 40

# name -> number, per architecture (from the kernel's syscall tables)
_NUMBERS = {
    "x86_64": (
        0xC000003E,
        {
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "lookup_dcookie": 212,
            "acct": 163,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "syslog": 103,
            "setns": 308,
            "unshare": 272,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "socket": 41,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "lookup_dcookie": 18,
            "acct": 89,
            "swapon": 224,
            "swapoff": 225,
            "reboot": 142,
            "syslog": 116,
            "setns": 268,
            "unshare": 97,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "socket": 198,
        },
    ),
}
# Refused whatever their arguments; `socket` only for AF_VSOCK.
DENIED = sorted(set(_NUMBERS["x86_64"][1]) - {"socket"})


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def denylist_program() -> bytes | None:
    """The compiled filter for this machine, or None on an architecture we have no
    table for (the sandbox then relies on its other layers)."""
    machine = platform.machine()
    if machine not in _NUMBERS:
        return None
    arch, numbers = _NUMBERS[machine]
    # Layout: load arch, foreign arch -> kill, load nr, [x32 -> kill], denied nrs -> deny,
    # socket -> (load arg0, AF_VSOCK -> deny), allow, deny, kill. Jumps are relative to the next insn.
    denied = [numbers[name] for name in DENIED]
    n = (1 if machine == "x86_64" else 0) + len(denied)
    allow, deny, kill = 3 + n + 3, 3 + n + 4, 3 + n + 5  # after: jeq socket, ld arg0, jeq vsock
    program = [_insn(_LD_ABS_W, 0, 0, 4), _insn(_JEQ, 0, kill - 2, arch), _insn(_LD_ABS_W, 0, 0, 0)]
    if machine == "x86_64":  # x32 ABI calls
        program.append(_insn(_JGE, kill - len(program) - 1, 0, _X32_BIT))
    for nr in denied:
        program.append(_insn(_JEQ, deny - len(program) - 1, 0, nr))
    program.append(_insn(_JEQ, 0, allow - len(program) - 1, numbers["socket"]))
    program.append(_insn(_LD_ABS_W, 0, 0, _ARG0_LOW))
    program.append(_insn(_JEQ, deny - len(program) - 1, 0, AF_VSOCK))
    program += [_insn(_RET, 0, 0, _RET_ALLOW), _insn(_RET, 0, 0, _RET_ERRNO | errno.EPERM)]
    program.append(_insn(_RET, 0, 0, _RET_KILL_PROCESS))
    assert len(program) == kill + 1
    return b"".join(program)


@functools.cache
def docker_profile() -> str:
    """Docker's default profile less `DENIED`, with socket allowed for every
    address family but AF_VSOCK, as the JSON `--security-opt seccomp=` takes."""
    profile = json.loads(Path(__file__).with_name("docker-default-seccomp.json").read_text())
    # Only the native ABI: Docker adds each entry's subarchitectures (i386 and x32
    # next to x86_64), where `socketcall` reaches `socket` with its family out of
    # the filter's sight. Calls of any other ABI get the bad-architecture action.
    profile["archMap"] = [{**entry, "subArchitectures": []} for entry in profile["archMap"]]
    denied = {*DENIED, "socket"}
    rules = []
    for rule in profile["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW":
            rule = {**rule, "names": [name for name in rule["names"] if name not in denied]}
            if not rule["names"]:
                continue
        rules.append(rule)
    rules.append(
        {
            "names": ["socket"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": AF_VSOCK, "op": "SCMP_CMP_NE"}],
        }
    )
    return json.dumps({**profile, "syscalls": rules})
