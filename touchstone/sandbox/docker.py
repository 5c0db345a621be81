"""The Docker backend: one locked-down container per sandbox, one `docker exec` per
command (through the Docker SDK).

The image is the same debootstrapped root filesystem the bwrap backend uses,
`docker import`ed (no registry needed) plus the metadata in
`sandbox_images/Dockerfile`. Containers run with no network, all capabilities
dropped, no-new-privileges, a read-only root, pids/memory/CPU limits, size-limited
tmpfs /tmp and home, and the host workspace copy bound at /workspace.

To behave like bwrap (where each exec is a fresh PID namespace), the harness
checks from the host (the container's cgroup) after every exec that no process
of the sandbox user is left, killing until none is, then has the container's
scratch keeper (scratch.py) mount new /tmp, home and /dev/shm and remove every
IPC object: only /workspace carries state between execs. Each command runs
under a short bash wrapper that sets the per-exec rlimits (as bwrap's launcher
does) and execs it.

PID 1 is a bash loop that reaps orphans, running as `nobody` (65534), not as the
sandbox user: without capabilities, and with ptrace refused by the seccomp
profile (seccomp.py, which replaces Docker's default), the sandboxed code can
neither signal, trace nor read it, so it cannot keep a process alive through it."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import json
import queue
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Sequence

from touchstone import paths
from touchstone.sandbox.base import (
    SANDBOX_HOME,
    WORKSPACE,
    ExecResult,
    Limits,
    Mount,
    Sandbox,
    exec_rlimits,
    existing_dir,
    UNLIMITED,
)
from touchstone.sandbox.capture import OutputCapture
from touchstone.sandbox.docker_stream import ExecStream
from touchstone.sandbox.environment import ENV_TARGET, Environment
from touchstone.sandbox.errors import SandboxError
from touchstone.sandbox.reaper import owner_alive, owner_token
from touchstone.sandbox.seccomp import docker_profile
from touchstone.sandbox.image import (
    BASE_REPO,
    build_lock,
    base_tag,
    image_hash,
    ensure_rootfs,
    image_tag,
    images_dir,
    rootfs_path,
    rootfs_ready,
    short_hash,
)

_PID1 = 'trap "exit 0" TERM; while :; do sleep 86400 & wait $!; done'
PID1_USER = "65534:65534"
# What bwrap gets for free from fresh namespaces per exec: no processes, new /tmp,
# home and /dev/shm, no IPC objects. A harness that is root and sees the container's
# processes makes them so from outside after every exec (scratch.py): new tmpfs,
# every IPC object removed; nothing the sandboxed code did can stop it. Else
# the wrapper empties them as the sandbox user after every command (a weaker
# fallback, named in `unenforced`: killing the wrapper or an unreadable folder
# keeps files). Only builtins unless there is something to delete: every fork
# here is per-exec latency.
_SCRATCH = f"/tmp {SANDBOX_HOME} /dev/shm /dev/mqueue"
_KILL = "kill -9 -1 2>/dev/null"
_CLEAN = (
    "shopt -s nullglob dotglob; "
    f"left=({' '.join(d + '/*' for d in _SCRATCH.split())}); "
    f"((${{#left[@]}})) && find {_SCRATCH} -mindepth 1 -delete 2>/dev/null; "
    "ipc=(); for t in shm msg sem; do mapfile -t -O ${#ipc[@]} ipc < /proc/sysvipc/$t; done; "
    "((${#ipc[@]} > 3)) && ipcrm --all 2>/dev/null; true"
)
_RESET = f"{_KILL}; {_CLEAN}"
_WRAPPER = f'"$@"; rc=$?; {_RESET}; exit $rc'
# exec_rlimits by bash's `ulimit` flag and unit. Each command sets them all: Docker
# sets those that depend on the exec's timeout on none, and runc (a Go program,
# which raises its own soft open-file limit) sometimes passes nofile's soft limit on raised.
_ULIMIT_FLAGS = {
    "cpu": ("-t", 1),
    "as": ("-v", 1024),
    "fsize": ("-f", 1024),
    "core": ("-c", 1024),
    "nofile": ("-n", 1),
    "stack": ("-s", 1024),
    "memlock": ("-l", 1024),
    "msgqueue": ("-q", 1),
    "nproc": ("-u", 1),
    "sigpending": ("-i", 1),
}
_PER_EXEC_RLIMITS = ("cpu", "as")  # the others are also set on the container (raising one needs root)
_EXIT_POLL_S = 0.002
_SCRATCH_KEEPER = Path(__file__).with_name("scratch.py")


def extra_labels() -> dict[str, str]:
    """Labels from TOUCHSTONE_SANDBOX_LABELS ("k=v,k2=v2") on every sandbox container:
    a deployment names its own, so tearing it down also finds the sandboxes its steps started."""
    spec = os.environ.get("TOUCHSTONE_SANDBOX_LABELS", "").strip()
    pairs = [item.partition("=") for item in spec.split(",") if item.strip()]
    bad = [key for key, sep, _ in pairs if not sep or not key.strip()]
    if bad:
        raise SandboxError(f"TOUCHSTONE_SANDBOX_LABELS={spec!r}: expected comma-separated key=value pairs")
    return {key.strip(): value.strip() for key, _, value in pairs}


@functools.cache
def _client():
    """One client per process: each holds a connection pool, so one per sandbox leaks sockets."""
    import docker

    return docker.from_env(timeout=120)


@contextlib.contextmanager
def _daemon_failures(what: str) -> Iterator[None]:
    """The daemon failing or going away (restarted, stopped) mid-call is the sandbox's
    failure, never the command's: the SDK raises its own errors or, when the socket is
    gone, the HTTP library's."""
    import docker
    import requests

    try:
        yield
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"{what}: {type(exc).__name__}: {exc}") from exc


def docker_unavailable_reason() -> str | None:
    """None when Docker can run sandboxes here; else why not (for errors and skips)."""
    try:
        client = _client()
        client.ping()
    except Exception as exc:  # the SDK raises many kinds (connection, permission, config)
        return f"the Docker daemon does not answer ({type(exc).__name__}: {exc})"
    try:
        client.images.get(image_tag())
    except Exception:
        return f"the sandbox image {image_tag()} is not built; run `touchstone sandbox build-image`"
    return None


def ensure_image(progress: bool = True) -> str:
    """Build (if missing) the sandbox image from sandbox_images/ and return its tag."""
    import docker

    try:
        client = _client()
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the Docker daemon does not answer: {exc}") from exc
    tag = image_tag()
    with build_lock(f"image-{short_hash()}"):
        if _has_image(client, tag):
            return tag
        if not _has_image(client, base_tag()):
            _import_base(client, ensure_rootfs(progress))
        client.images.build(
            path=str(images_dir()),
            tag=tag,
            buildargs={"BASE": base_tag()},
            rm=True,
            network_mode="none",
            labels={"touchstone.sandbox_images": image_hash()},
        )
    return tag


def image_accounts() -> Path:
    """A folder with the sandbox image's own `passwd` and `group`: the root
    filesystem's `etc` where it is on this machine, else copied once out of the
    image (a step container of the Docker deployment has the image, through the
    Docker socket, but neither the root filesystem nor debootstrap to build it)."""
    if rootfs_ready():
        return rootfs_path() / "etc"
    folder = paths.cache() / f"image-accounts-{short_hash()}"
    if (folder / "group").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(folder.name):
        if (folder / "group").is_file():  # another process copied it while we waited
            return folder
        tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.copying-", dir=folder.parent))
        container = _client().containers.create(ensure_image(progress=False), command=["true"], network_disabled=True)
        try:
            for name in ("passwd", "group"):
                stream, _ = container.get_archive(f"/etc/{name}")
                with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                    (tmp / name).write_bytes(tar.extractfile(name).read())
            tmp.chmod(0o755)
            tmp.rename(folder)  # whole or absent
        finally:
            container.remove(force=True)
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _has_image(client, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _import_base(client, rootfs: Path) -> None:
    """`tar -C rootfs . | docker import`, through a temporary file the SDK streams."""
    with tempfile.NamedTemporaryFile(suffix=".tar", dir=rootfs.parent) as tar:
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", tar.name, "."], check=True)
        client.api.import_image_from_file(tar.name, repository=BASE_REPO, tag=short_hash())
    client.images.get(base_tag())  # raises if the import did not produce it


class DockerSandbox(Sandbox):
    backend = "docker"

    def _user(self) -> str:
        """The container user: the sandbox's own host uid (Docker has no user
        namespace per container, so it is the uid inside too), or the harness's
        own when it is not root (it could not chown the workspace to another)."""
        uid, gid = self._owner() or (os.getuid(), os.getgid())
        return f"{uid}:{gid}"

    def _account_files(self) -> dict[str, dict[str, str]]:
        """/etc/passwd and /etc/group naming the sandbox's own host uid `agent`
        (hostids.HostUser.account_files), bound read-only over the image's:
        `id`, `whoami`, `~agent` and `ls -l` then name the user as in bwrap."""
        if self.host_user is None:
            return {}
        files = self.host_user.account_files(image_accounts())
        return {str(path): {"bind": f"/etc/{name}", "mode": "ro"} for name, path in files.items()}

    def _start(self) -> None:
        reason = docker_unavailable_reason()
        if reason:
            raise SandboxError(reason)
        with _daemon_failures("could not start the sandbox container"):
            self._start_container()

    def _start_container(self) -> None:
        import docker

        self._docker = _client()
        _reap_stale_containers(self._docker)
        lim = self.limits
        user = self._user()
        uid, gid = user.split(":")
        volumes = {str(self._workspace): {"bind": WORKSPACE, "mode": "rw"}, **self._account_files()}
        for mount in self.mounts:
            volumes[str(mount.host)] = {"bind": mount.target, "mode": "ro" if mount.read_only else "rw"}
        if self.environment:
            volumes[str(self.environment.tree)] = {"bind": ENV_TARGET, "mode": "ro"}
        tmpfs_opts = _scratch_options(lim.scratch_bytes)
        try:
            self._container = self._docker.containers.run(
                image_tag(),
                ["bash", "-c", _PID1],
                detach=True,
                user=PID1_USER,
                hostname="sandbox",
                network_mode="none",
                sysctls={"net.ipv6.conf.lo.disable_ipv6": "0"},  # ::1 on loopback, as in bwrap
                cap_drop=["ALL"],
                security_opt=["no-new-privileges", f"seccomp={docker_profile()}"],
                pids_limit=lim.processes,
                mem_limit=lim.memory_bytes,
                memswap_limit=lim.memory_bytes,
                nano_cpus=int(lim.cpus * 1e9),
                read_only=True,
                working_dir=WORKSPACE,
                # home: 0755 like the image's directory, which Docker copies onto the tmpfs anyway
                tmpfs={"/tmp": f"{tmpfs_opts},mode=1777", SANDBOX_HOME: f"{tmpfs_opts},mode=0755,uid={uid},gid={gid}"},
                shm_size=lim.scratch_bytes,
                volumes=volumes,
                ulimits=[
                    docker.types.Ulimit(name=name, soft=soft, hard=hard)
                    for name, (soft, hard) in exec_rlimits(lim, lim.timeout_s, nproc=bool(self.host_user)).items()
                    if name not in _PER_EXEC_RLIMITS
                ],
                labels={"touchstone.sandbox": self.id, "touchstone.owner": owner_token(), **extra_labels()},
            )
        except docker.errors.DockerException as exc:
            raise SandboxError(f"could not start the sandbox container: {exc}") from exc
        self._container.reload()
        self._cgroup_dirs = _container_cgroup_dirs(self._container.attrs["State"]["Pid"])
        self._keeper = self._start_scratch_keeper()

    def _start_scratch_keeper(self) -> subprocess.Popen | None:
        """The process that recreates the scratch space from outside (scratch.py),
        or None where the harness cannot enter the container's namespaces (not
        root, or the daemon's processes are not on this machine)."""
        if os.geteuid() != 0 or not self._cgroup_dirs:
            return None
        pid = self._container.attrs["State"]["Pid"]
        uid, gid = self._user().split(":")
        modes = {"/tmp": "mode=1777", SANDBOX_HOME: f"mode=0755,uid={uid},gid={gid}", "/dev/shm": "mode=1777"}
        # tmpfs's own options; the flags of _scratch_options() are scratch.py's mount flags
        spec = {"mounts": [[path, f"size={self.limits.scratch_bytes},{mode}"] for path, mode in modes.items()]}
        fds = []
        try:
            for kind in ("mnt", "ipc"):
                fds.append(os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC))
            self._keeper = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_SCRATCH_KEEPER), *map(str, fds), json.dumps(spec)],
                pass_fds=fds,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={},
                text=True,
            )
        except OSError:
            return None
        finally:
            for fd in fds:
                os.close(fd)
        try:  # the first reset says whether it could enter (a step container may lack CAP_SYS_ADMIN)
            self._fresh_scratch()  # and makes the scratch ours from the first exec on (Docker's /dev/shm is noexec)
        except SandboxError:
            self._close_keeper()
            return None
        return self._keeper

    def _close_keeper(self) -> None:
        self._keeper.stdin.close()  # EOF: it exits
        self._keeper.stdout.close()
        self._keeper.wait()

    def _fresh_scratch(self) -> None:
        """New /tmp, home and /dev/shm, no IPC object left (see scratch.py)."""
        try:
            self._keeper.stdin.write("reset\n")
            self._keeper.stdin.flush()
            answer = self._keeper.stdout.readline().strip()
        except OSError as exc:
            answer = f"error: {exc}"
        if answer != "ok":
            raise SandboxError(f"sandbox {self.id}: could not recreate its scratch space: {answer or 'keeper exited'}")

    def _unenforced(self) -> list[str]:
        missing = super()._unenforced()
        if not self._keeper:
            missing.append(
                "fresh scratch per exec: the harness cannot enter the container's namespaces (not root, or a "
                "remote daemon), so /tmp, home, /dev/shm and IPC objects are emptied by the sandbox user "
                "after each command, which the command can prevent"
            )
        return missing

    def _exec(self, argv: list[str], timeout: float, env: dict[str, str]) -> ExecResult:
        # e.g. the container is gone (removed, PID 1 killed), or the daemon with it
        with _daemon_failures(f"docker exec in sandbox {self.id} failed"):
            return self._exec_in_container(argv, timeout, env)

    def _exec_in_container(self, argv: list[str], timeout: float, env: dict[str, str]) -> ExecResult:
        api = self._docker.api
        out, err = OutputCapture(self.limits.output_bytes), OutputCapture(self.limits.output_bytes)
        oom_before, cpu_before = self._oom_kills(), self._cpu_ns()
        started = time.monotonic()
        exec_id = api.exec_create(
            self._container.id,
            ["bash", "-c", self._wrapper(timeout, env), "touchstone-exec", *argv],
            environment=env,
            workdir=WORKSPACE,
            user=self._user(),
        )["Id"]
        output = ExecStream(api, exec_id)

        def pump() -> None:
            for stream, data in output.frames():
                (out if stream == 1 else err).feed(data)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        reader.join(timeout)
        timed_out = reader.is_alive()
        if timed_out:
            self._reset()
            reader.join()
        output.close()
        wall = time.monotonic() - started
        code = 137 if timed_out else self._exit_code(exec_id)
        self._ensure_quiet()
        if self._keeper:
            self._fresh_scratch()
        cpu_after = self._cpu_ns()
        return ExecResult(
            exit_code=code,
            signal=code - 128 if 128 < code <= 128 + 64 else None,
            timed_out=timed_out,
            oom_killed=self._oom_kills() > oom_before,
            wall_s=wall,
            cpu_s=(cpu_after - cpu_before) / 1e9 if cpu_after is not None else None,
            backend=self.backend,
            **out.fields("stdout"),
            **err.fields("stderr"),
        )

    def _wrapper(self, timeout: float, env: dict[str, str]) -> str:
        """The bash script every command runs under: the per-exec rlimits (as bwrap's
        launcher sets them), no HOSTNAME that the caller did not pass (Docker adds
        it), then the command itself (`exec`: the harness kills what it leaves and
        recreates the scratch space from outside), or, where the harness cannot,
        the command followed by the sandbox user's own cleanup."""
        limits = exec_rlimits(self.limits, timeout, nproc=bool(self.host_user))

        def settings(which: int) -> str:
            return " ".join(
                f"{flag} {'unlimited' if limits[name][which] == UNLIMITED else limits[name][which] // unit}"
                for name, (flag, unit) in _ULIMIT_FLAGS.items()
                if name in limits
            )

        script = f"ulimit -S {settings(0)} && ulimit -H {settings(1)}; "  # soft first: it must stay under the hard one
        script += "" if "HOSTNAME" in env else "unset HOSTNAME; "
        return script + ('exec "$@"' if self._keeper else _WRAPPER)

    def _exit_code(self, exec_id: str) -> int:
        """The exec's exit code (Docker may report it a moment after the stream ends)."""
        for _ in range(1000):
            info = self._docker.api.exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return info["ExitCode"]
            time.sleep(_EXIT_POLL_S)
        raise SandboxError(f"docker exec {exec_id[:12]} did not report an exit code")

    def _ensure_quiet(self) -> None:
        """Return only once no process of the sandbox user is left in the container:
        the wrapper's reset may not have run (the command killed it, or OOM did)."""
        for _ in range(50):
            if not self._agent_pids():
                return
            self._reset()
        raise SandboxError(f"sandbox {self.id}: processes of the sandbox user survive every kill")

    def _agent_pids(self) -> list[int]:
        """Host PIDs of the container's processes that are not PID 1's (uid 65534)."""
        group = self._cgroup_dirs.get("pids") or self._cgroup_dirs.get("memory")
        if group is None:
            return []  # no view of the cgroup here: the wrapper's reset is all there is
        pids = []
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue  # exited meanwhile
            uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
            if uid != PID1_USER.split(":")[0]:
                pids.append(int(pid))
        return pids

    def _reset(self) -> None:
        """Kill everything the sandbox user runs (not PID 1) and empty /tmp and home."""
        exec_id = self._docker.api.exec_create(self._container.id, ["bash", "-c", _RESET], user=self._user())["Id"]
        self._docker.api.exec_start(exec_id)

    def _oom_kills(self) -> int:
        path = self._cgroup_dirs.get("memory")
        if path is None:
            return 0
        name = "memory.events" if (path / "memory.events").exists() else "memory.oom_control"
        for line in (path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def _cpu_ns(self) -> int | None:
        path = self._cgroup_dirs.get("cpuacct")
        if path is not None and (path / "cpuacct.usage").exists():
            return int((path / "cpuacct.usage").read_text())
        if path is not None and (path / "cpu.stat").exists():
            for line in (path / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
        return None

    def _stop(self) -> None:
        import docker

        if getattr(self, "_keeper", None):
            self._close_keeper()
        with _daemon_failures(f"could not remove sandbox {self.id}'s container"):
            try:
                self._container.remove(force=True)
            except docker.errors.NotFound:
                pass


def _scratch_options(size: int) -> str:
    """Mount options of /tmp, home and /dev/shm: as bwrap's (executable: the
    workspace is anyway, and tools build and load code in /tmp)."""
    return f"rw,nosuid,nodev,exec,size={size}"


@functools.cache
def _reap_stale_containers(client) -> None:
    """Remove sandbox containers whose harness died without closing them."""
    import docker

    # The low-level listing: no per-container inspect that races with other harnesses.
    for summary in client.api.containers(all=True, filters={"label": "touchstone.owner"}):
        if not owner_alive(summary["Labels"]["touchstone.owner"]):
            try:
                client.api.remove_container(summary["Id"], force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                # Another harness reaping the same container at once: 409 "removal in progress".
                if exc.status_code != 409:
                    raise


def remove_own_containers() -> int:
    """Remove the sandbox containers this process started (an interrupted command
    stops its sandboxes now, not at the next start's reap); returns how many."""
    import docker

    try:
        client = _client()
        found = client.api.containers(all=True, filters={"label": f"touchstone.owner={owner_token()}"})
    except docker.errors.DockerException:
        return 0  # no daemon: no container of ours either
    for summary in found:
        try:
            client.api.remove_container(summary["Id"], force=True)
        except docker.errors.APIError:
            pass  # already being removed (its sandbox's own close)
    return len(found)


def _container_cgroup_dirs(pid: int) -> dict[str, Path]:
    """Host cgroup directories of a container's PID 1 (memory and cpu accounting),
    for OOM-kill counts and CPU time; empty where /proc or /sys is not readable."""
    dirs: dict[str, Path] = {}
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return dirs
    for line in lines:
        _, controllers, path = line.split(":", 2)
        names = controllers.split(",") if controllers else ["unified"]
        for name in names:
            base = Path("/sys/fs/cgroup") if name == "unified" else Path("/sys/fs/cgroup") / name
            if (base / path.lstrip("/")).is_dir():
                key = {"unified": "memory", "cpu": "cpuacct"}.get(name, name)
                dirs.setdefault(key, base / path.lstrip("/"))
    if "memory" in dirs and "cpuacct" not in dirs and (dirs["memory"] / "cpu.stat").exists():
        dirs["cpuacct"] = dirs["memory"]  # v2: one directory for everything
    return dirs


class WarmPool:
    """Pre-started Docker sandboxes for one limits/mounts configuration: `open()`
    takes a running container, copies the workspace in and hands it out, while a
    background thread starts the next one. Cuts container start (~0.5 s) out of
    the latency of rollouts that open many short-lived sandboxes.

        with WarmPool(size=2, limits=Limits(timeout_s=30)) as pool:
            with pool.open(task.workspace_dir, action_log=log) as sb: ...
    """

    def __init__(
        self,
        size: int = 2,
        *,
        limits: Limits | None = None,
        mounts: Sequence[Mount] = (),
        environment: Environment | None = None,
    ):
        if size < 1:
            raise SandboxError(f"a warm pool needs at least one container, got size={size}")
        reason = docker_unavailable_reason()
        if reason:
            raise SandboxError(reason)
        self._limits, self._mounts, self._environment = limits or Limits(), list(mounts), environment
        self._ready: queue.Queue[DockerSandbox | BaseException] = queue.Queue()
        self._wanted = threading.Semaphore(0)
        self._closing = threading.Event()
        self._filler = threading.Thread(target=self._fill_loop, daemon=True, name="touchstone-warm-pool")
        self._filler.start()
        for _ in range(size):
            self._wanted.release()

    def _fill_loop(self) -> None:
        while True:
            self._wanted.acquire()
            if self._closing.is_set():
                return
            try:
                sandbox = DockerSandbox.__new__(DockerSandbox)
                sandbox._create(self._limits, self._mounts, self._environment)
                self._ready.put(sandbox)
            except BaseException as exc:  # handed to the next open(), which raises it
                self._ready.put(exc)

    def open(self, workspace: str | os.PathLike, action_log: str | os.PathLike | None = None) -> DockerSandbox:
        if self._closing.is_set():
            raise SandboxError("the warm pool is closed")
        source = existing_dir(workspace)
        sandbox = self._ready.get()
        self._wanted.release()  # start a replacement
        if isinstance(sandbox, BaseException):
            raise SandboxError(f"the warm pool could not start a container: {sandbox}") from sandbox
        try:
            sandbox._fill(source, action_log)
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    def close(self) -> None:
        self._closing.set()
        self._wanted.release()
        self._filler.join()
        while not self._ready.empty():
            item = self._ready.get()
            if isinstance(item, DockerSandbox):
                item.close()

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
