"""Per-sandbox control groups for the bwrap backend: memory (with an OOM-kill
counter), process count, CPU share and CPU time. rlimits cannot do this: RLIMIT_NPROC does
not apply to root and counts across sandboxes, RLIMIT_AS is not resident memory.

cgroup v1 (one hierarchy per controller) and v2 (unified) are both handled. A
group is created below the harness's own group, so an outer limit still applies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
_CPU_PERIOD_US = 100_000


def _own_path(controller: str | None) -> str:
    """This process's group path in the v1 hierarchy of `controller` (None: v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller is None and controllers == "") or (controller in controllers.split(",")):
            return path.lstrip("/")
    raise OSError(f"no cgroup line for {controller or 'v2'}")


class Cgroup:
    """One sandbox's group. `create()` returns None when the machine does not let
    us create groups (not root, read-only cgroupfs, no delegation)."""

    def __init__(self, dirs: dict[str, Path], unified: bool):
        self.dirs = dirs  # controller -> directory ("unified" for v2)
        self.unified = unified

    @classmethod
    def create(cls, name: str, memory_bytes: int, pids: int, cpus: float) -> Cgroup | None:
        try:
            group = cls._make_v2(name) if (ROOT / "cgroup.controllers").exists() else cls._make_v1(name)
        except OSError:
            return None
        try:
            group._set_limits(memory_bytes, pids, cpus)
        except OSError:
            group.remove()
            return None
        return group

    @classmethod
    def _make_v1(cls, name: str) -> Cgroup:
        dirs: dict[str, Path] = {}
        try:
            for controller in _V1_CONTROLLERS:
                path = ROOT / controller / _own_path(controller) / name
                if any(path.resolve() == made.resolve() for made in dirs.values()):
                    continue  # co-mounted controllers (cpu,cpuacct) share one directory
                path.mkdir()
                dirs[controller] = path
        except OSError:
            cls(dirs, unified=False).remove()
            raise
        return cls(dirs, unified=False)

    @classmethod
    def _make_v2(cls, name: str) -> Cgroup:
        # Our own group holds processes, so children there cannot get controllers
        # ("no internal processes"); a sibling tree under the root can.
        parent = ROOT / "touchstone-sandboxes"
        parent.mkdir(exist_ok=True)
        (ROOT / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        path = parent / name
        path.mkdir()
        return cls({"unified": path}, unified=True)

    def _set_limits(self, memory_bytes: int, pids: int, cpus: float) -> None:
        quota = max(1000, int(cpus * _CPU_PERIOD_US))
        if self.unified:
            path = self.dirs["unified"]
            (path / "memory.max").write_text(str(memory_bytes))
            if (path / "memory.swap.max").exists():  # no escaping into swap
                (path / "memory.swap.max").write_text("0")
            (path / "pids.max").write_text(str(pids))
            (path / "cpu.max").write_text(f"{quota} {_CPU_PERIOD_US}")
            return
        mem = self.dirs["memory"]
        (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
        if (mem / "memory.memsw.limit_in_bytes").exists():  # no escaping into swap
            (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (self.dirs["pids"] / "pids.max").write_text(str(pids))
        (self.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(_CPU_PERIOD_US))
        (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))

    def procs_files(self) -> tuple[list[Path], list[Path]]:
        """The files a process writes its PID to, to join this group: those the
        sandbox's launcher joins once (its children inherit them), and those each
        exec joins. The memory group is always per exec: a launcher inside it
        could be the OOM killer's victim (and cannot be exempted without
        CAP_SYS_RESOURCE in the initial user namespace)."""
        if self.unified:
            return [], [self.dirs["unified"] / "cgroup.procs"]
        once = [path / "cgroup.procs" for controller, path in self.dirs.items() if controller != "memory"]
        return once, [self.dirs["memory"] / "cgroup.procs"]

    def oom_kills(self) -> int:
        """How many processes the kernel OOM-killed in this group so far."""
        if self.unified:
            text = (self.dirs["unified"] / "memory.events").read_text()
        else:
            text = (self.dirs["memory"] / "memory.oom_control").read_text()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def cpu_ns(self) -> int:
        """CPU time used by the group's processes so far, in nanoseconds."""
        if self.unified:
            for line in (self.dirs["unified"] / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
            return 0
        group = self.dirs.get("cpuacct") or self.dirs["cpu"]
        return int((group / "cpuacct.usage").read_text())

    def pids(self) -> list[int]:
        """Processes in the group (v1: the pids group, which the launcher is in too)."""
        path = next(iter(self.dirs.values())) if self.unified else self.dirs["pids"]
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]

    def kill_all(self, spare: int | None = None) -> bool:
        """SIGKILL every process in the group but `spare`, repeating while forks race
        us (for up to a second); True once none is left."""
        for _ in range(500):
            try:
                pids = [pid for pid in self.pids() if pid != spare]
            except FileNotFoundError:  # already removed
                return True
            if not pids:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)
        return False

    def remove(self) -> None:
        for path in self.dirs.values():
            for _ in range(100):  # a dying process can keep the group busy briefly
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
