"""The sandbox API shared by both backends: limits, mounts, exec results, and the
host-side workspace copy with its snapshots, diffs and action log.

A backend subclass only starts/stops its isolation (`_start`, `_stop`) and runs one
command (`_exec`); everything the verifier relies on (what the workspace holds,
what was logged) lives here, identical for both."""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from abc import ABC, abstractmethod
from functools import partial
from pathlib import Path, PurePosixPath
from typing import ClassVar, Sequence

from pydantic import BaseModel, ConfigDict, field_validator

from touchstone.sandbox import workspace as ws
from touchstone.sandbox.action_log import ActionLog, sha256_hex
from touchstone.sandbox.environment import Environment
from touchstone.sandbox.errors import SandboxError, SandboxWarning
from touchstone.sandbox.hostids import HostUser
from touchstone.sandbox.image import image_hash
from touchstone.sandbox.reaper import OWNER_FILE, owner_token, reap_stale_sandboxes
from touchstone.sandbox.reaper import PREFIX as REAPER_PREFIX
from touchstone.sandbox.workspace import WorkspaceDiff

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# Inside every sandbox, both backends: the only user, its home, the workspace.
SANDBOX_UID = SANDBOX_GID = 1000
SANDBOX_HOME = "/home/agent"
WORKSPACE = "/workspace"
# The whole environment of every command (plus what the caller passes to exec);
# nothing leaks in from the harness's own environment.
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": SANDBOX_HOME,
    "USER": "agent",
    "LANG": "C.UTF-8",
    "TMPDIR": "/tmp",
    "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ noise in workspace diffs
}


def parse_size(value: str | int) -> int:
    """Bytes from `512m`, `1g`, `64k`, `1.5G` or a plain number."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(value).lower())
    if not match:
        raise SandboxError(f"not a size: {value!r} (examples: 512m, 1g, 65536)")
    scale = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": GiB << 10}[match.group(2)]
    return int(float(match.group(1)) * scale)


class Limits(BaseModel):
    """Resource limits of one sandbox (per exec: timeout_s can be overridden)."""

    model_config = ConfigDict(frozen=True)

    timeout_s: float = 60.0
    memory_bytes: int = 1 * GiB
    processes: int = 256
    workspace_bytes: int = 256 * MiB  # apparent size of its files (sparse files count in full)
    workspace_files: int = 100_000  # files, directories and links in the workspace
    cpus: float = 1.0
    output_bytes: int = 64 * KiB  # captured per stream; the true count is always reported
    tmp_bytes: int = 64 * MiB  # /tmp and the home directory, each

    @property
    def scratch_bytes(self) -> int:
        """Size of each scratch tmpfs (/tmp, home, /dev/shm): `tmp_bytes`, at most a
        quarter of the memory limit, since their pages count as the sandbox's
        memory: filled up, they still leave room to run."""
        return min(self.tmp_bytes, self.memory_bytes // 4)

    @field_validator("memory_bytes", "workspace_bytes", "tmp_bytes", mode="before")
    @classmethod
    def _size(cls, value: str | int) -> int:
        try:
            return parse_size(value)
        except SandboxError as exc:  # pydantic reports ValueErrors only
            raise ValueError(str(exc)) from exc

    @field_validator(
        "timeout_s",
        "memory_bytes",
        "processes",
        "workspace_bytes",
        "workspace_files",
        "cpus",
        "output_bytes",
        "tmp_bytes",
    )
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be positive")
        return value


UNLIMITED = -1  # an rlimit without a bound (RLIM_INFINITY)


def exec_rlimits(
    limits: Limits, timeout: float, memory_cgroup: bool = True, nproc: bool = True
) -> dict[str, tuple[int, int]]:
    """The per-process limits (soft, hard) of every command, by `ulimit`'s and
    Docker's names, set the same way in both backends rather than inherited
    from the harness or the Docker daemon. With a memory cgroup the address-space
    cap is only a backstop (the cgroup's OOM killer, which we can report, acts
    first); without one it is the limit. `nproc`: whether to bound the processes
    of the host user (RLIMIT_NPROC counts them all, on the whole host): right for
    a sandbox's own user, wrong for a harness's (its other processes count)."""
    named = {
        "cpu": (cpu := math.ceil(timeout * max(1.0, limits.cpus)) + 1, cpu),
        "as": (mem := limits.memory_bytes * (4 if memory_cgroup else 1), mem),
        "fsize": (limits.workspace_bytes, limits.workspace_bytes),
        "core": (0, 0),
        "nofile": (1024, 4096),
        "stack": (8 * MiB, UNLIMITED),
        "memlock": (8 * MiB, 8 * MiB),
        "msgqueue": (800 * KiB, 800 * KiB),
        "sigpending": (4096, 4096),
    }
    if nproc:  # a second line behind a pids cgroup, the only one without
        named["nproc"] = (limits.processes, limits.processes)
    return named


class Mount(BaseModel):
    """A host path made visible inside the sandbox (read-only unless asked).
    `target` must lie under /mnt/ (where both backends can create mount points on
    a read-only root) or under /workspace/."""

    model_config = ConfigDict(frozen=True)

    host: Path
    target: str
    read_only: bool = True

    @field_validator("host")
    @classmethod
    def _host_exists(cls, value: Path) -> Path:
        value = Path(value).resolve()
        if not value.exists():
            raise ValueError(f"mount source does not exist: {value}")
        return value

    @field_validator("target")
    @classmethod
    def _target_allowed(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not path.is_absolute() or ".." in path.parts or path.parent == path:
            raise ValueError(f"mount target must be an absolute path without '..': {value!r}")
        if not any(path.is_relative_to(base) and path != PurePosixPath(base) for base in ("/mnt", WORKSPACE)):
            raise ValueError(f"mount target must lie under /mnt/ or /workspace/: {value!r}")
        return str(path)


class ExecResult(BaseModel):
    """What one command did. stdout/stderr hold at most `Limits.output_bytes` each
    (decoded as UTF-8, invalid bytes replaced); the *_bytes counts and digests
    cover the whole stream."""

    exit_code: int  # 128+N when killed by signal N (also on timeout: 137)
    signal: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    wall_s: float
    cpu_s: float | None = None  # None where the backend cannot measure it
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_sha256: str
    stderr_sha256: str
    backend: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Sandbox(ABC):
    """One isolated environment around a private copy of a workspace directory."""

    backend: ClassVar[str]

    def __init__(
        self,
        workspace: str | os.PathLike,
        *,
        limits: Limits | None = None,
        mounts: Sequence[Mount] = (),
        action_log: str | os.PathLike | None = None,
        environment: Environment | None = None,
        host_user: HostUser | None = None,
    ):
        source = existing_dir(workspace)
        self._create(limits, mounts, environment, host_user)
        try:
            self._fill(source, action_log)
        except BaseException:
            self.close()
            raise

    def _create(
        self,
        limits: Limits | None,
        mounts: Sequence[Mount],
        environment: Environment | None = None,
        host_user: HostUser | None = None,
    ) -> None:
        """Start the isolation around an empty workspace (a warm pool stops here).
        `host_user`: the host uid to run as, shared with other sandboxes (the
        caller closes it); None: one of its own (root), or the harness's user."""
        # One command at a time per sandbox (threads may share it); the harness's own
        # walks of the workspace and close() wait for it too, so they never overlap a
        # command (and with it, a process that could change the tree under them).
        self._exec_lock = threading.Lock()
        self._closed = True  # until started: close() has nothing to stop
        self.limits = limits or Limits()
        self.mounts = list(mounts)
        # Installed packages, read-only at /usr/local (None: the base environment).
        self.environment = environment
        self.environment_digest = environment.digest if environment else None
        self.id = uuid.uuid4().hex[:12]
        self.image_digest = "sha256:" + image_hash()
        self.action_log: Path | None = None
        self._log: ActionLog | None = None
        self._source: Path | None = None  # the host tree copied in: the "before" side of diffs
        self._initial: dict[str, str] = {}
        reap_stale_sandboxes()
        self._own_host_user = host_user is None and os.geteuid() == 0
        self.host_user = HostUser.acquire() if self._own_host_user else host_user
        self._dir = Path(tempfile.mkdtemp(prefix=f"{REAPER_PREFIX}{self.id}-"))
        (self._dir / OWNER_FILE).write_text(owner_token())
        self._workspace = self._dir / "workspace"
        self._quota = False
        try:
            self._quota = ws.mount_quota(self._workspace, self.limits.workspace_bytes, self.limits.workspace_files)
            if self._owner():
                os.chown(self._workspace, *self._owner())
            self._unbounded_mounts = self._check_writable_mounts()
            self._make_mount_points()
            self._start()
        except BaseException:
            self._remove_dir()
            raise
        self._closed = False
        # Said loudly, per sandbox: a run on such a machine is not contained as documented.
        self.unenforced = self._unenforced()
        if self.unenforced:
            warnings.warn(
                SandboxWarning(
                    f"{self.backend} sandbox {self.id}: limits that do not hold here: " + "; ".join(self.unenforced)
                ),
                stacklevel=3,
            )

    def _check_writable_mounts(self) -> list[Mount]:
        """Every writable mount must be a filesystem of its own no bigger than the
        workspace limits (`workspace.bounded_dir`): a plain host directory would
        let the sandbox fill the host's disk. Refused where the harness could
        have made one (it mounted the workspace's tmpfs); elsewhere (not root, or
        a container without CAP_SYS_ADMIN) returned, to be named as unenforced."""
        lim = self.limits
        unbounded = [
            m
            for m in self.mounts
            if not m.read_only and not ws.is_bounded(m.host, lim.workspace_bytes, lim.workspace_files)
        ]
        if unbounded and self._quota:
            raise SandboxError(
                f"writable mount {unbounded[0].host} -> {unbounded[0].target} is not a filesystem of at most "
                f"{lim.workspace_bytes} bytes and {lim.workspace_files} files of its own; make it with "
                "touchstone.sandbox.workspace.bounded_dir()"
            )
        return unbounded

    def _make_mount_points(self) -> None:
        """Directories for the mounts under /workspace/, made by us as the
        workspace owner before the backend starts. Docker would make them itself
        when the container starts (before the workspace is filled), as root: the
        copy would then find them in its way, and a non-root harness could not
        write into them (a nested test dir like `pkg/tests` leaves `pkg` root's)."""
        for mount in self.mounts:
            if PurePosixPath(mount.target).is_relative_to(WORKSPACE):
                parts = ws.split_relative(mount.target)
                ws.make_dirs(self._workspace, parts if mount.host.is_dir() else parts[:-1], self._owner())

    def _fill(self, source: Path, action_log: str | os.PathLike | None) -> None:
        """Copy the workspace in and open the action log."""
        self._check_log_location(action_log, source)
        try:
            ws.copy_tree(source, self._workspace, self._owner(), self._budget())
        except SandboxError as exc:
            # the same class: a tree over the limits stays WorkspaceRefused (whose tree it is, the caller knows)
            raise type(exc)(f"cannot copy in the workspace {source}: {exc}") from exc
        self._source = source
        self._initial = self.snapshot()
        self.action_log = Path(action_log).resolve() if action_log else self._dir / "actions.jsonl"
        self._log = ActionLog(self.action_log)

    def _check_log_location(self, action_log: str | os.PathLike | None, source: Path) -> None:
        """The log must be unreachable from inside: not in the workspace, not in a mount."""
        if action_log is None:
            return
        log = Path(action_log).resolve()
        for exposed in [source, *(m.host for m in self.mounts)]:
            if log == exposed or log.is_relative_to(exposed):
                raise SandboxError(f"action log {log} lies inside {exposed}, which the sandbox can see")

    # ------------------------------------------------------------ backend hooks

    @abstractmethod
    def _start(self) -> None: ...

    @abstractmethod
    def _exec(self, argv: list[str], timeout: float, env: dict[str, str]) -> ExecResult: ...

    @abstractmethod
    def _stop(self) -> None: ...

    def _owner(self) -> tuple[int, int] | None:
        """Host uid/gid the sandbox runs as and its workspace files belong to
        (None: the harness's own)."""
        return (self.host_user.uid, self.host_user.gid) if self.host_user else None

    def _unenforced(self) -> list[str]:
        """The limits this sandbox cannot enforce on this machine, each with why."""
        missing = [
            f"writable mount {m.target}: not a filesystem of its own, bounded per file only (RLIMIT_FSIZE)"
            for m in self._unbounded_mounts
        ]
        if self._quota:
            return missing
        return [
            "workspace_bytes and workspace_files: no tmpfs quota without root, so only single files are "
            "bounded (RLIMIT_FSIZE) and the harness's writes and walks check the totals",
            *missing,
        ]

    # ------------------------------------------------------------ public API

    def exec(
        self, command: str | Sequence[str], timeout: float | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        """Run a command in /workspace: a string through `bash -c`, a list as argv."""
        self._check_open()
        if isinstance(command, str):
            argv = ["bash", "-c", command]
        else:
            argv = [str(a) for a in command]
            if not argv or not argv[0]:
                raise SandboxError("empty command")
            # Through bash, so that a missing program is exit 127 in every backend.
            argv = ["bash", "-c", 'exec "$@"', "touchstone-exec", *argv]
        timeout = self.limits.timeout_s if timeout is None else float(timeout)
        if timeout <= 0:
            raise SandboxError(f"timeout must be positive, got {timeout}")
        full_env = {**BASE_ENV, **_check_env(env or {})}
        started = time.time()
        with self._exec_lock:
            self._check_open()  # close() may have run while we waited
            result = self._exec(argv, timeout, full_env)
        self._log.append(
            time=started,
            op="exec",
            args={
                "command": command if isinstance(command, str) else list(command),
                "timeout": timeout,
                "env": env or {},
            },
            ok=result.ok,
            **self._log_fields(),
            **result.model_dump(
                include={
                    "exit_code",
                    "signal",
                    "timed_out",
                    "oom_killed",
                    "wall_s",
                    "stdout_sha256",
                    "stderr_sha256",
                    "stdout_bytes",
                    "stderr_bytes",
                }
            ),
        )
        return result

    def read_file(self, path: str | os.PathLike) -> bytes:
        self._check_open()
        started = time.time()
        try:
            with self._exec_lock:
                data = ws.read_file(self._workspace, path)
        except SandboxError as exc:
            self._log.append(
                time=started, op="read", args={"path": os.fspath(path)}, ok=False, error=str(exc), **self._log_fields()
            )
            raise
        self._log.append(
            time=started,
            op="read",
            args={"path": os.fspath(path)},
            ok=True,
            content_sha256=sha256_hex(data),
            content_bytes=len(data),
            **self._log_fields(),
        )
        return data

    def write_file(self, path: str | os.PathLike, data: bytes | str) -> None:
        self._check_open()
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        started = time.time()
        fields = {
            "time": started,
            "op": "write",
            "args": {"path": os.fspath(path)},
            "content_sha256": sha256_hex(payload),
            "content_bytes": len(payload),
            **self._log_fields(),
        }
        try:
            # With the tmpfs quota the kernel enforces the limit (ENOSPC); without it, we do.
            with self._exec_lock:
                if not self._quota and len(payload) + ws.tree_bytes(self._workspace) > self.limits.workspace_bytes:
                    raise SandboxError(
                        f"writing {path} would exceed the workspace limit of {self.limits.workspace_bytes} bytes"
                    )
                try:
                    ws.write_file(self._workspace, path, payload, self._owner())
                except OSError as exc:
                    raise SandboxError(f"cannot write {path}: {exc.strerror}") from exc
        except SandboxError as exc:
            self._log.append(ok=False, error=str(exc), **fields)
            raise
        self._log.append(ok=True, **fields)

    def snapshot(self) -> dict[str, str]:
        """Relative path -> sha256 for every file in the workspace. Raises
        SandboxError naming the path for a tree over the workspace limits or one
        the harness will not walk (see workspace.walk)."""
        self._check_open()
        with self._exec_lock:
            return ws.snapshot(self._workspace, budget=self._budget())

    def diff(self, since: dict[str, str] | None = None) -> WorkspaceDiff:
        """Changes from `since` (a snapshot; default: the workspace as copied in).
        The harness keeps digests, not contents: the text of the old side is
        read from the tree that was copied in (when it still has the digest),
        the new side from the workspace, under the same lock as the snapshot.
        So against a later snapshot, a file that had changed since copy-in is
        listed in `binary`, without a patch."""
        old = self._initial if since is None else since
        with self._exec_lock:
            self._check_open()
            new = ws.snapshot(self._workspace, budget=self._budget())
            return ws.diff(old, new, self._source_blob, partial(ws.read_blob, self._workspace))

    def read_blob(self, path: str, digest: str, limit: int = ws.MAX_DIFF_BYTES) -> bytes | None:
        """The harness's own bounded read (not logged): the file's contents if it
        is at most `limit` bytes and still has `digest` (from a snapshot), else None."""
        self._check_open()
        with self._exec_lock:
            return ws.read_blob(self._workspace, path, digest, limit)

    def _source_blob(self, rel: str, digest: str) -> bytes | None:
        return ws.read_blob(self._source, rel, digest) if self._source else None

    def export(self, dest: str | os.PathLike) -> Path:
        """Copy the workspace to dest (new or empty); links out of it are refused."""
        self._check_open()
        dest = Path(dest).resolve()
        with self._exec_lock:
            ws.export_tree(self._workspace, dest, self._budget())
        return dest

    def close(self) -> None:
        """Stop the sandbox; a command running in another thread finishes first."""
        with self._exec_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._stop()
            finally:
                if self._log:
                    self._log.close()
                self._remove_dir()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    def _budget(self) -> ws.Budget:
        return ws.Budget(max_bytes=self.limits.workspace_bytes, max_entries=self.limits.workspace_files)

    def _remove_dir(self) -> None:
        """Remove the sandbox's host directory and give back its host uid (its
        processes are gone: no one runs as it any more)."""
        if self._quota:
            ws.unmount_quota(self._workspace)
        shutil.rmtree(self._dir, ignore_errors=True)
        if self._own_host_user:
            self.host_user.close()

    def _log_fields(self) -> dict[str, str | None]:
        return {
            "sandbox_id": self.id,
            "backend": self.backend,
            "image_digest": self.image_digest,
            "environment_digest": self.environment_digest,
        }


def existing_dir(workspace: str | os.PathLike) -> Path:
    source = Path(workspace).resolve()
    if not source.is_dir():
        raise SandboxError(f"workspace directory does not exist: {source}")
    return source


def _check_env(env: dict[str, str]) -> dict[str, str]:
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key or "\0" in str(value):
            raise SandboxError(f"invalid environment variable name or value: {key!r}")
    return {key: str(value) for key, value in env.items()}
