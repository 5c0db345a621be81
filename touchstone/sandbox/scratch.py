"""The Docker backend's scratch keeper: a small stdlib-only process, one per
container, that makes /tmp, the home directory and /dev/shm new, empty tmpfs and
removes every IPC object before each exec, as bwrap's fresh namespaces do.

Why outside the container: cleaning from inside runs as the sandbox user, whom
the previous command could stop (an unreadable folder, a killed wrapper). This
process is host root in the container's mount and IPC namespaces (setns on the
descriptors the harness passes), not in its PID namespace, so nothing inside
can see or signal it; it calls mount(2) itself, with no program of the
container's. It imports everything before it enters the container's mount
namespace, where the host's files are out of reach.

Run as `python -I -S scratch.py MNT_FD IPC_FD SPEC_JSON` with SPEC_JSON
`{"mounts": [[path, tmpfs options], ...]}`. Each line on stdin asks for a reset;
it answers `ok` or `error: why` on stdout. EOF (the harness closed or died) ends it."""

import ctypes
import json
import os
import sys

_CLONE_NEWNS, _CLONE_NEWIPC = 0x00020000, 0x08000000
_MS_NOSUID, _MS_NODEV = 0x2, 0x4
_MNT_DETACH, _UMOUNT_NOFOLLOW = 0x2, 0x8
_IPC_RMID = 0
_MQUEUE = "/dev/mqueue"


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _remove_ipc(libc) -> None:
    """Every System V object of the namespace (their ids, from /proc/sysvipc) and
    every POSIX message queue."""
    removers = {
        "shm": lambda ident: libc.shmctl(ident, _IPC_RMID, None),
        "msg": lambda ident: libc.msgctl(ident, _IPC_RMID, None),
        "sem": lambda ident: libc.semctl(ident, 0, _IPC_RMID),
    }
    for kind, remove in removers.items():
        with open(f"/proc/sysvipc/{kind}") as table:
            next(table)  # the header
            for line in table:
                _check(remove(int(line.split()[1])), f"removing {kind} {line.split()[1]}")
    if os.path.isdir(_MQUEUE):
        for name in os.listdir(_MQUEUE):
            os.unlink(f"{_MQUEUE}/{name}")


def _reset(libc, mounts: list) -> None:
    for path, options in mounts:
        target = path.encode()
        _check(libc.umount2(target, _MNT_DETACH | _UMOUNT_NOFOLLOW), f"unmounting {path}")
        _check(libc.mount(b"tmpfs", target, b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()), f"mounting {path}")
    _remove_ipc(libc)


def main() -> None:
    mnt_fd, ipc_fd, spec = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    libc = ctypes.CDLL(None, use_errno=True)
    for fn in (libc.shmctl, libc.msgctl, libc.semctl, libc.umount2, libc.mount):
        fn.restype = ctypes.c_int  # resolved now: no lookups once the host's files are gone
    _check(libc.setns(ipc_fd, _CLONE_NEWIPC), "entering the IPC namespace")
    _check(libc.setns(mnt_fd, _CLONE_NEWNS), "entering the mount namespace")
    os.close(ipc_fd)
    os.close(mnt_fd)
    os.chdir("/")
    for _ in sys.stdin:
        try:
            _reset(libc, spec["mounts"])
            answer = "ok"
        except OSError as exc:
            answer = f"error: {exc}"
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
