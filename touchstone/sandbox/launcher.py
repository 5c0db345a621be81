"""The bwrap backend's launchers: small stdlib-only processes that fork every
`bwrap` of a sandbox.

Why: starting bwrap straight from the harness costs, per exec, a fork of the (big)
harness process (preexec_fn disables vfork), a migration into the sandbox's
cgroups (an RCU grace period each in cgroup v1) and a new network namespace. A
per-sandbox launcher pays all three once: it joins the cgroups, enters a private
empty network namespace, and its children inherit both. And so that a sandbox
does not pay a Python start-up either, one *master* per harness process forks
the per-sandbox launchers.

Run as `python -I -S launcher.py MASTER_SOCKET_FD`. All sockets are SOCK_SEQPACKET
carrying `marshal`led dicts (marshal is built in: no import time).
Master socket:
  harness  -> {"procs": [cgroup.procs files], "exec_procs": [...], "sources": [[host path,
              read-only], ...] to mount at STAGE/0, STAGE/1...} + fd (the new sandbox's socket)
Sandbox socket (served by the forked launcher):
  launcher -> {"pid": N, "private_net": bool}              once, when ready (or {"error": text})
  harness  -> {"argv": [...], "rlimits": [[res, soft, hard]...], "uid": N or None} + fds (stdout, stderr, info, ...)
  launcher -> {"pid": N}, later {"status": wait status, "cpu_s": float}
           or {"error": text} when it could not start bwrap (out of memory...)
  harness  -> {"kill": true}   (at any time while a command runs)
EOF on a socket ends its process. Death propagates down by PDEATHSIG: harness ->
master -> launcher -> bwrap -> (--die-with-parent) the sandboxed command."""

import ctypes
import fcntl
import marshal
import os
import resource
import select
import signal
import socket
import sys

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x1, 0x1000, 0x4000, 0x40000
_STAGE = "/mnt"  # bwrap.STAGE
_SIOCSIFFLAGS = 0x8914
_IFF_UP_LOOPBACK_RUNNING = 0x1 | 0x8 | 0x40


def _send(sock: socket.socket, **message) -> None:
    sock.send(marshal.dumps(message))


def _set_rlimit(kind: int, soft: int, hard: int) -> None:
    """Set a limit; where it would raise a hard limit and we may not (a normal
    user's harness), keep the hard limit we have and the soft one under it."""
    try:
        resource.setrlimit(kind, (soft, hard))
    except (ValueError, PermissionError):
        have = resource.getrlimit(kind)[1]
        resource.setrlimit(kind, (soft if soft != resource.RLIM_INFINITY and soft <= have else have, have))


def _fresh_process_state() -> None:
    """What a process inherits besides its environment, as Docker's runc gives it:
    no ignored or blocked signal (the harness may run under nohup, and Python
    ignores SIGPIPE), umask 022, and nice 0 (a root harness may lower it; a normal
    user's harness cannot, and its nice value stays)."""
    for number in range(1, signal.NSIG):
        try:
            if signal.getsignal(number) == signal.SIG_IGN:
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL, SIGSTOP, and numbers Python does not handle
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.umask(0o022)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except PermissionError:
        pass


def _spawn(libc, argv: list, rlimits: list, uid, exec_procs: list, fds: list) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # child: the passed fds become 1, 2, 3...; nothing else stays open
        # bwrap's own --die-with-parent protects the command from bwrap's death,
        # not bwrap from ours: this does (it survives exec; set again after a uid
        # change, which clears it).
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        for procs in exec_procs:  # the memory cgroup: see cgroups.Cgroup.procs_files
            with open(procs, "w") as handle:
                handle.write("0")
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for target, fd in enumerate(fds, 1):
            os.dup2(fd, target)
        # bwrap's options (host paths, the environment it sets) go through a
        # memfd, not its command line: its init, the sandbox's PID 1, keeps that
        # command line where the sandboxed code can read it (/proc/1/cmdline).
        # The command itself (after "--") must stay on the command line.
        split = argv.index("--")
        args_fd = len(fds) + 1
        memfd = os.memfd_create("bwrap-args", 0)
        os.write(memfd, b"".join(arg.encode() + b"\0" for arg in argv[1:split]))
        os.lseek(memfd, 0, os.SEEK_SET)
        os.dup2(memfd, args_fd)
        os.closerange(args_fd + 1, 1 << 16)  # above all: the launcher socket
        for kind, soft, hard in rlimits:
            _set_rlimit(kind, soft, hard)
        _fresh_process_state()
        if uid is not None:  # the sandbox's own host user: bwrap maps its user to it
            os.setgroups([uid])  # its group, the only one: the sandbox user's supplementary group, as in Docker
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # An empty environment: bwrap's init keeps it for the sandbox to read (/proc/1/environ).
        os.execve(argv[0], [argv[0], "--args", str(args_fd), *argv[split:]], {})
    except BaseException as exc:
        os.write(2, f"touchstone launcher: cannot start {argv[0]}: {exc}\n".encode())
    os._exit(126)


def _run(libc, sock: socket.socket, request: dict, exec_procs: list, fds: list) -> None:
    try:
        pid = _spawn(libc, request["argv"], request["rlimits"], request["uid"], exec_procs, fds)
    except OSError as exc:  # no process left for us (the host's limits): say so, stay alive
        _send(sock, error=f"cannot fork: {exc.strerror}")
        return
    finally:
        for fd in fds:
            os.close(fd)
    pidfd = os.pidfd_open(pid)
    _send(sock, pid=pid)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    while True:
        ready = {fd for fd, _ in poller.poll()}
        if sock.fileno() in ready:
            message = sock.recv(1 << 16)
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # a kill request, or the harness is gone
            if not message:
                os.waitpid(pid, 0)
                sys.exit(0)
        if pidfd in ready:
            _, status, usage = os.wait4(pid, 0)
            os.close(pidfd)
            _send(sock, status=status, cpu_s=usage.ru_utime + usage.ru_stime)
            return


def _stage(libc, sources: list) -> None:
    """Mount each source at _STAGE/N in a mount namespace of our own, where the
    unprivileged user bwrap runs as can reach it. A read-only directory becomes a
    lower-only overlay (layers named relative to _STAGE): a bind would show its
    host path in the sandbox's /proc/self/mountinfo, an overlay shows `lowerdir=sN:e`."""

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    check(libc.mount(b"touchstone-stage", _STAGE.encode(), b"tmpfs", 0, b"mode=0755,size=64k"), "staging tmpfs")
    os.chdir(_STAGE)
    os.mkdir("e")  # an overlay needs two layers at least: the second is empty
    for i, (source, read_only) in enumerate(sources):
        if read_only and os.path.isdir(source):
            os.mkdir(f"s{i}")
            check(libc.mount(source.encode(), f"s{i}".encode(), None, _MS_BIND | _MS_REC, None), f"binding {source}")
            os.mkdir(str(i))
            check(
                libc.mount(b"overlay", str(i).encode(), b"overlay", _MS_RDONLY, f"lowerdir=s{i}:e".encode()),
                f"overlay of {source}",
            )
            continue
        if os.path.isdir(source):
            os.mkdir(str(i))
        else:
            os.close(os.open(str(i), os.O_CREAT | os.O_WRONLY, 0o644))
        check(libc.mount(source.encode(), str(i).encode(), None, _MS_BIND | _MS_REC, None), f"binding {source}")
    os.chdir("/")


def _serve(libc, sock: socket.socket, cgroup_procs: list, exec_procs: list, sources: list) -> None:
    """One sandbox's launcher (a fork of the master)."""
    for procs in cgroup_procs:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    if sources:
        try:
            _stage(libc, sources)
        except OSError as exc:
            _send(sock, error=str(exc))
            return
    private_net = libc.unshare(_CLONE_NEWNET) == 0  # root only; else bwrap unshares per exec
    if private_net:  # bring up loopback, as bwrap --unshare-net and Docker do
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as ctl:
            fcntl.ioctl(
                ctl, _SIOCSIFFLAGS, b"lo".ljust(16, b"\0") + _IFF_UP_LOOPBACK_RUNNING.to_bytes(2, "little") + bytes(22)
            )
    _send(sock, pid=os.getpid(), private_net=private_net)
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
        if not message:
            return
        request = marshal.loads(message)
        if "argv" in request:  # not a late kill for a command that already ended
            _run(libc, sock, request, exec_procs, fds)
        else:
            for fd in fds:
                os.close(fd)


def main() -> None:
    master = socket.socket(fileno=int(sys.argv[1]))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the harness died before the line above
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps finished launchers
    while True:
        message, fds, _, _ = socket.recv_fds(master, 1 << 16, 1)
        if not message:
            return
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # launchers wait for their bwraps
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            master.close()
            try:
                groups = marshal.loads(message)
                _serve(libc, socket.socket(fileno=fds[0]), groups["procs"], groups["exec_procs"], groups["sources"])
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    main()
