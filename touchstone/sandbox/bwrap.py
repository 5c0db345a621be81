"""The bubblewrap backend: no daemon, a few milliseconds per command.

Every exec is a fresh `bwrap` whose root is the read-only sandbox root filesystem
(the same one the Docker image is imported from), with new user, PID, IPC, UTS,
cgroup and network namespaces, the workspace bound read-write at /workspace, and
fresh size-limited tmpfs at /tmp, $HOME and /dev/shm. Because the command runs as PID 2 of a
new PID namespace under bwrap's init, killing that init (on timeout, or when the
harness dies: --die-with-parent) kills every process it left, grandchildren and
daemons included. Memory, process and CPU limits come from a per-sandbox cgroup;
rlimits are a second line (and the only one where cgroups are unavailable).

The bwraps are forked by a per-sandbox launcher process (launcher.py) that sits in
the cgroup and in a private network namespace, so none of that is paid per exec.

Run as root, bwrap itself runs as an unprivileged host user of the sandbox's own
(hostids.py), to which it maps the sandbox user: never host root, nor a user
another sandbox runs as, whose per-user kernel budgets it could otherwise use up. That user cannot reach the harness's
directories (the root filesystem in root's cache, the 0700 workspace directory),
so the launcher, in a mount namespace of its own, mounts each of them under
STAGE first: the read-only ones as overlays, whose host paths then do not show in
the sandbox's /proc/self/mountinfo (see launcher._stage)."""

from __future__ import annotations

import marshal
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from touchstone.sandbox.base import (
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    UNLIMITED,
    WORKSPACE,
    ExecResult,
    Sandbox,
    exec_rlimits,
)
from touchstone.sandbox.capture import OutputCapture
from touchstone.sandbox.cgroups import Cgroup
from touchstone.sandbox.environment import ENV_TARGET
from touchstone.sandbox.errors import SandboxError
from touchstone.sandbox.image import ensure_rootfs
from touchstone.sandbox.seccomp import denylist_program

_LAUNCHER = Path(__file__).with_name("launcher.py")
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="touchstone-launcher-spawner")
# After a command ends, how long its output pipes may stay open (they close when
# the PID namespace is gone, i.e. at once; this only bounds a kernel hiccup).
_DRAIN_GRACE_S = 5.0
# Where a root-run launcher binds what bwrap mounts (in its own mount namespace).
STAGE = "/mnt"
# The tmpfs that holds the mount points under /mnt (read-only once they are made).
_MNT_TMPFS_BYTES = 64 * 1024


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def _start(self) -> None:
        self._bwrap = shutil.which("bwrap")
        if self._bwrap is None:
            raise SandboxError("bubblewrap is not installed: apt-get install -y bubblewrap")
        self._rootfs = ensure_rootfs()
        self._seccomp = denylist_program()
        if self._seccomp is None:
            raise SandboxError(f"no seccomp filter for this machine's architecture ({os.uname().machine})")
        lim = self.limits
        self._cgroup = Cgroup.create(f"touchstone-{self.id}", lim.memory_bytes, lim.processes, lim.cpus)
        if self._cgroup is None and os.geteuid() == 0:
            # RLIMIT_NPROC does not bind root: without a pids cgroup a fork bomb would reach the host.
            raise SandboxError(
                "the bwrap backend runs as root here but cannot create cgroups under /sys/fs/cgroup, "
                "so process and memory limits cannot be enforced; run as a normal user or use --backend docker"
            )
        sources = [
            (self._rootfs, True),
            *([(self.environment.tree, True)] if self.environment else []),
            (self._workspace, False),
            *((m.host, m.read_only) for m in self.mounts),
        ]
        try:
            self._launcher = _Launcher(self._cgroup, sources if os.geteuid() == 0 else [])
            self._prefix = self._bwrap_args(unshare_net=not self._launcher.private_net, sources=sources)
        except BaseException:
            self._stop()
            raise

    def _unenforced(self) -> list[str]:
        missing = super()._unenforced()
        if self._cgroup is None:
            missing += [
                "memory_bytes: no cgroup, only RLIMIT_AS per process (an OOM shows as a failed "
                "allocation, never as oom_killed)",
                "processes: no cgroup, only RLIMIT_NPROC, counted over every process of the harness's user",
                "cpus: no cgroup, no CPU share (cpu_s comes from rusage and misses orphaned children)",
            ]
        return missing

    def _bwrap_args(self, unshare_net: bool, sources: list[tuple[Path, bool]]) -> list[str]:
        staged = iter(f"{STAGE}/{i}" if self._launcher.staged else str(path) for i, (path, _) in enumerate(sources))
        scratch = str(self.limits.scratch_bytes)
        args = [
            self._bwrap,
            "--unshare-user",
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *(["--unshare-net"] if unshare_net else []),
            "--die-with-parent",
            "--new-session",
            "--disable-userns",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_GID),
            "--hostname",
            "sandbox",
            "--ro-bind",
            next(staged),
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            *(["--ro-bind", next(staged), ENV_TARGET] if self.environment else []),
            "--perms",
            "1777",
            "--size",
            scratch,
            "--tmpfs",
            "/tmp",
            "--perms",
            "1777",
            "--size",
            scratch,
            "--tmpfs",
            "/dev/shm",
            "--perms",
            "0755",
            "--size",
            scratch,
            "--tmpfs",
            SANDBOX_HOME,
            # bwrap's /dev is a tmpfs the sandbox user owns: read-only once its nodes
            # and /dev/shm are in place, so nothing but /dev/shm's bounded tmpfs is writable.
            "--remount-ro",
            "/dev",
            "--bind",
            next(staged),
            WORKSPACE,
        ]
        on_mnt = any(m.target.startswith("/mnt/") for m in self.mounts)
        if on_mnt:  # mount points cannot be created on the read-only root; made, /mnt turns read-only too
            args += ["--size", str(_MNT_TMPFS_BYTES), "--tmpfs", "/mnt"]
        for mount in self.mounts:
            args += ["--ro-bind" if mount.read_only else "--bind", next(staged), mount.target]
        if on_mnt:
            args += ["--remount-ro", "/mnt"]
        return args + ["--chdir", WORKSPACE, "--clearenv", "--info-fd", "3", "--seccomp", "4"]

    def _exec(self, argv: list[str], timeout: float, env: dict[str, str]) -> ExecResult:
        cmd = list(self._prefix)
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        cmd += ["--", *argv]
        oom_before = self._cgroup.oom_kills() if self._cgroup else 0
        cpu_before = self._cgroup.cpu_ns() if self._cgroup else 0
        uid = self.host_user.uid if self.host_user else None
        run = self._launcher.run(cmd, self._rlimits(timeout), uid, timeout, self.limits.output_bytes, self._seccomp)
        self._ensure_quiet()
        if run.error:
            raise SandboxError(f"the sandbox launcher could not start bwrap: {run.error}")
        if not run.started and not run.timed_out:
            why = run.err.head.decode(errors="replace").strip()
            if uid is not None:
                why += (
                    f" (bwrap runs as the unprivileged uid {uid}, so the kernel must allow unprivileged "
                    "user namespaces: sysctl user.max_user_namespaces > 0, and where AppArmor restricts them, "
                    "kernel.apparmor_restrict_unprivileged_userns=0)"
                )
            raise SandboxError(f"bwrap could not set up the sandbox: {why}")
        # bwrap reports a command killed by signal N as exit status 128+N; a negative
        # code means bwrap itself was killed (by the launcher, on timeout).
        code = os.waitstatus_to_exitcode(run.status)
        if code < 0:
            code = 128 - code
        return ExecResult(
            exit_code=code,
            signal=code - 128 if 128 < code <= 128 + 64 else None,
            timed_out=run.timed_out,
            oom_killed=bool(self._cgroup and self._cgroup.oom_kills() > oom_before),
            wall_s=run.wall_s,
            # The cgroup counts every process of the exec; bwrap's rusage misses those
            # its PID namespace's init never waited for.
            cpu_s=(self._cgroup.cpu_ns() - cpu_before) / 1e9 if self._cgroup else run.cpu_s,
            backend=self.backend,
            **run.out.fields("stdout"),
            **run.err.fields("stderr"),
        )

    def _ensure_quiet(self) -> None:
        """Return once nothing of the exec is left in the cgroup but the launcher: a
        killed bwrap's PID namespace dies a moment after bwrap itself."""
        if self._cgroup is not None and not self._cgroup.kill_all(spare=self._launcher.pid):
            raise SandboxError(f"sandbox {self.id}: processes of an exec survive every kill")

    def _rlimits(self, timeout: float) -> list[tuple[int, int, int]]:
        """(resource, soft, hard) for the launcher: exec_rlimits (RLIMIT_NPROC
        where the sandbox has a host user of its own, or no pids cgroup)."""
        cgroup = self._cgroup is not None
        named = exec_rlimits(self.limits, timeout, memory_cgroup=cgroup, nproc=bool(self.host_user) or not cgroup)
        return [
            (
                getattr(resource, f"RLIMIT_{name.upper()}"),
                *(resource.RLIM_INFINITY if v == UNLIMITED else v for v in pair),
            )
            for name, pair in named.items()
        ]

    def _stop(self) -> None:
        if hasattr(self, "_launcher"):
            self._launcher.close()
        if self._cgroup:
            self._cgroup.kill_all()
            self._cgroup.remove()


class _Outcome:
    """What the launcher reported about one bwrap, plus its captured output."""

    def __init__(self, cap: int):
        self.out, self.err = OutputCapture(cap), OutputCapture(cap)
        self.status = 0
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.timed_out = False
        self.started = False
        self.error: str | None = None


class _Master:
    """The per-process master launcher (started on first use, restarted if it died)."""

    _lock = threading.Lock()
    _proc: subprocess.Popen | None = None
    _sock: socket.socket | None = None

    @classmethod
    def fork_launcher(cls, theirs: socket.socket, setup: dict) -> None:
        with cls._lock:
            if cls._proc is None or cls._proc.poll() is not None:
                cls._start()
            socket.send_fds(cls._sock, [marshal.dumps(setup)], [theirs.fileno()])

    @classmethod
    def _start(cls) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Started from one long-lived thread: PDEATHSIG fires when the *thread* that
        # forked the child ends, and the caller's thread may be short-lived.
        cls._proc = _SPAWNER.submit(
            subprocess.Popen,
            [sys.executable, "-I", "-S", "-B", str(_LAUNCHER), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={},  # nothing of the harness's environment (API keys...) reaches a sandbox
        ).result()
        theirs.close()
        if cls._sock is not None:
            cls._sock.close()
        cls._sock = ours


def _forget_master_after_fork() -> None:
    """In a forked harness: the master and the spawner thread belong to the parent."""
    global _SPAWNER
    _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="touchstone-launcher-spawner")
    _Master._lock = threading.Lock()
    _Master._proc = None
    if _Master._sock is not None:
        _Master._sock.close()  # our copy only; the parent keeps its master
        _Master._sock = None


os.register_at_fork(after_in_child=_forget_master_after_fork)


class _Launcher:
    """Harness side of one sandbox's launcher (protocol in launcher.py)."""

    def __init__(self, cgroup: Cgroup | None, sources: list[tuple[Path, bool]]):
        """`sources`: (host path, read-only) to mount under STAGE (root only; empty: none)."""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            once, per_exec = cgroup.procs_files() if cgroup else ([], [])
            _Master.fork_launcher(
                theirs,
                {
                    "procs": [str(p) for p in once],
                    "exec_procs": [str(p) for p in per_exec],
                    "sources": [[str(p), ro] for p, ro in sources],
                },
            )
        finally:
            theirs.close()
        ready = self._receive(timeout=30)
        if "error" in ready:
            raise SandboxError(f"the sandbox launcher could not start: {ready['error']}")
        self.pid, self.private_net, self.staged = ready["pid"], bool(ready["private_net"]), bool(sources)

    def _receive(self, timeout: float | None = None) -> dict:
        self.sock.settimeout(timeout)
        try:
            message = self.sock.recv(1 << 16)
        except TimeoutError as exc:
            raise SandboxError("the sandbox launcher did not answer") from exc
        finally:
            self.sock.settimeout(None)
        if not message:
            raise SandboxError("the sandbox launcher exited")
        return marshal.loads(message)

    def run(
        self, argv: list[str], rlimits: list, uid: int | None, timeout: float, cap: int, seccomp: bytes
    ) -> _Outcome:
        outcome = _Outcome(cap)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        info_r, info_w = os.pipe()  # bwrap writes to it once the sandbox is set up
        # bwrap reads the filter program to its end: a fresh pipe per exec
        filter_r, filter_w = os.pipe()
        os.write(filter_w, seccomp)  # a few hundred bytes: fits the pipe buffer
        os.close(filter_w)
        passed = [out_w, err_w, info_w, filter_r]
        started = time.monotonic()
        try:
            request = marshal.dumps({"argv": argv, "rlimits": rlimits, "uid": uid})
            socket.send_fds(self.sock, [request], passed)
        finally:
            for fd in passed:
                os.close(fd)
        try:
            self._collect(outcome, {out_r: outcome.out, err_r: outcome.err}, started + timeout)
        except BaseException:  # KeyboardInterrupt and the like: leave nothing running
            self._kill()
            raise
        finally:
            for fd in (out_r, err_r):
                os.close(fd)
        outcome.wall_s = time.monotonic() - started
        with os.fdopen(info_r, "rb") as info:
            outcome.started = bool(info.read())
        return outcome

    def _collect(self, outcome: _Outcome, streams: dict[int, OutputCapture], deadline: float) -> None:
        """Read output until the command ended and its pipes closed; kill at the deadline."""
        poller = select.poll()
        for fd in [*streams, self.sock.fileno()]:
            poller.register(fd, select.POLLIN)
        open_streams, ended_at = set(streams), None
        while ended_at is None or open_streams:
            now = time.monotonic()
            if ended_at is not None:
                wait = ended_at + _DRAIN_GRACE_S - now
                if wait <= 0:
                    return
            elif outcome.timed_out:
                wait = None  # killed: the launcher's status report comes next
            elif now >= deadline:
                outcome.timed_out = True
                self._kill()
                wait = None
            else:
                wait = deadline - now
            events = poller.poll(None if wait is None else int(wait * 1000) + 1)
            for fd, _ in events:
                if fd == self.sock.fileno():
                    message = self._receive()
                    if "error" in message:  # nothing started: no output will come
                        outcome.error = message["error"]
                        return
                    if "status" in message:
                        outcome.status, outcome.cpu_s = message["status"], message["cpu_s"]
                        ended_at = time.monotonic()
                        poller.unregister(fd)
                elif chunk := os.read(fd, 1 << 16):
                    streams[fd].feed(chunk)
                else:
                    poller.unregister(fd)
                    open_streams.discard(fd)

    def _kill(self) -> None:
        try:
            self.sock.send(marshal.dumps({"kill": True}))
        except OSError:
            pass  # the launcher is gone, and with it (--die-with-parent) the command

    def close(self) -> None:
        """Close the socket (EOF: the launcher kills what runs and exits) and wait
        for the launcher, not our child, through a pidfd."""
        try:
            pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            self.sock.close()
            return
        self.sock.close()
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            if not poller.poll(10_000):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)
