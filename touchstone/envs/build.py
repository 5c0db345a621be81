"""Building a task environment: once per digest, cached, atomic.

The build runs in a *build sandbox*: bubblewrap over the same root filesystem
every sandbox uses, with the network on (the only place it is), the host's
pip mounted read-only (the image ships no pip: nothing can install at run
time), and a fresh copy of the root filesystem's `/usr/local` bound writable,
which is where Debian's Python installs by default. That tree is the
environment: both backends later mount it read-only at `/usr/local`
(touchstone/sandbox/environment.py), so what ran in the build is exactly what
every run sees.

Cache: `TOUCHSTONE_CACHE/envs/<digest>/{tree/, env.json}`. The build happens
in a temporary directory renamed into place at the end, and `env.json` is
written last, so a killed build never leaves a half-built environment."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel

from touchstone import paths
from touchstone.envs import docker_build
from touchstone.envs.inputs import build_inputs
from touchstone.envs.spec import EnvError, EnvSpec, digest
from touchstone.sandbox import Environment
from touchstone.sandbox.image import build_lock, image_hash, ensure_rootfs

MANIFEST = "env.json"
TREE = "tree"
SITE = "lib/python3.11/dist-packages"  # Debian's /usr/local site directory, inside the tree
BUILD_TIMEOUT_S = 1800.0
_PIP_FLAGS = "--ignore-installed --no-warn-script-location --progress-bar off"
_FAILED_PACKAGE = [  # pip's ways of naming the requirement it could not install
    re.compile(r"No matching distribution found for (\S+)"),
    re.compile(r"Could not find a version that satisfies the requirement (\S+)"),
    re.compile(r"Failed to build (?:installable wheels for some pyproject\.toml based projects )?\(?([^)\s]+)"),
    re.compile(r"Could not build wheels for (\S+)"),
]


class EnvManifest(BaseModel):
    """`env.json`: what a built environment holds (written last: its presence marks a finished build)."""

    digest: str
    spec: EnvSpec
    base_image: str
    packages: list[str]  # "name==version", sorted
    top_level: list[str]  # importable top-level names the tree installs
    build_s: float
    built_at: str


class BuiltEnv(BaseModel):
    manifest: EnvManifest
    dir: Path
    reused: bool = False

    @property
    def digest(self) -> str:
        return self.manifest.digest

    def sandbox_environment(self) -> Environment:
        return Environment(tree=self.dir / TREE, digest=self.digest, top_level=frozenset(self.manifest.top_level))


def env_dir(env_digest: str) -> Path:
    return paths.cache() / "envs" / env_digest.removeprefix("sha256:")[:24]


def cached(env_digest: str) -> BuiltEnv | None:
    path = env_dir(env_digest) / MANIFEST
    if not path.is_file():
        return None
    return BuiltEnv(manifest=EnvManifest.model_validate_json(path.read_text()), dir=path.parent, reused=True)


def build_env(spec: EnvSpec, workspace: Path | None = None, *, timeout: float = BUILD_TIMEOUT_S) -> BuiltEnv:
    """The environment for `spec` (and `workspace`, which setup commands see),
    built first when it is not cached. Raises EnvError naming what failed."""
    if spec.setup and workspace is None:
        raise EnvError("an environment with setup commands needs the workspace they run in")
    env_digest = digest(spec, image_hash(), workspace)
    if found := cached(env_digest):
        return found
    final = env_dir(env_digest)
    final.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(f"env-{final.name}"):
        if found := cached(env_digest):  # another process built it while we waited
            return found
        for stale in final.parent.glob(f"{final.name}.building-*"):  # a killed build's (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        rootfs = ensure_rootfs(progress=False) if bwrap_available() else None
        started = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}.building-", dir=final.parent))
        try:
            tree = tmp / TREE
            if rootfs is None:
                docker_build.copy_base_tree(tree)
            else:
                shutil.copytree(rootfs / "usr/local", tree, symlinks=True)
            _run_build(spec, rootfs, tree, tmp, workspace, timeout)
            manifest = EnvManifest(
                digest=env_digest, spec=spec, base_image="sha256:" + image_hash(),
                packages=installed_packages(tree), top_level=top_level_names(tree),
                build_s=round(time.monotonic() - started, 3), built_at=datetime.now(timezone.utc).isoformat(),
            )  # fmt: skip
            tmp.chmod(0o755)  # mkdtemp made it 0700: the sandbox user must reach tree/
            (tmp / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
            if final.exists():  # an unstamped leftover
                shutil.rmtree(final)
            tmp.rename(final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return BuiltEnv(manifest=manifest, dir=final)


def bwrap_available() -> bool:
    """False in a step container of the Docker deployment (no bubblewrap, but the
    Docker socket): environments are then built in a container (docker_build)."""
    return shutil.which("bwrap") is not None


def _run_build(
    spec: EnvSpec, rootfs: Path | None, tree: Path, tmp: Path, workspace: Path | None, timeout: float
) -> None:
    """pip install the requirements, then each setup command, in the build sandbox
    (bwrap over `rootfs`; None: a container, touchstone/envs/docker_build.py)."""
    steps: list[tuple[str, str]] = []
    if spec.requirements:
        steps.append(("requirements", f"python3 -m pip install {_PIP_FLAGS} -- {shlex.join(spec.requirements)}"))
    steps += [(f"setup command {cmd!r}", cmd) for cmd in spec.setup]
    if not steps:
        return
    ws = tmp / "workspace"
    if workspace is not None:
        shutil.copytree(workspace, ws, symlinks=True)
    else:
        ws.mkdir()
    try:
        if rootfs is None:
            run = docker_build.step_runner(tree, ws, tmp)
        else:
            argv, env = _build_sandbox(rootfs, tree, ws, tmp)
            run = functools.partial(_run_step, argv, env)
        for what, command in steps:
            rc = run(what, command, tmp / "build.log", timeout)
            if rc != 0:
                raise EnvError(_failure(what, rc, (tmp / "build.log").read_text(errors="replace")))
    finally:  # only tree/ is the environment; the workspace copy and pip's helper are scratch
        for scratch in ("workspace", "helper", "build.log", "pylib", "ca.pem"):
            path = tmp / scratch
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _run_step(argv: list[str], env: dict[str, str], what: str, command: str, log: Path, timeout: float) -> int:
    with open(log, "wb") as out:
        try:
            rc = subprocess.run(
                [*argv, "bash", "-c", command],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            raise EnvError(f"environment build: {what} did not finish in {timeout:g} s") from None
    return rc


def _build_sandbox(rootfs: Path, tree: Path, ws: Path, tmp: Path) -> tuple[list[str], dict[str, str]]:
    """bwrap argv prefix and environment of the build sandbox (network on)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise EnvError("building an environment needs bubblewrap: apt-get install -y bubblewrap")
    inputs = build_inputs(tmp)
    argv = [
        bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
        "--new-session", "--uid", "1000", "--gid", "1000", "--hostname", "envbuild",
        "--ro-bind", str(rootfs), "/", "--proc", "/proc", "--dev", "/dev",
        "--tmpfs", "/tmp", "--tmpfs", "/home/agent", "--bind", str(tree), "/usr/local",
        "--bind", str(ws), "/workspace", "--tmpfs", "/mnt",
        "--ro-bind", str(inputs.helper), "/mnt/build", "--ro-bind", str(inputs.pip), "/mnt/pylib/pip",
        "--bind", str(inputs.pip_cache), "/mnt/pip-cache", "--chdir", "/workspace", "--clearenv",
    ]  # fmt: skip
    if Path("/etc/resolv.conf").is_file():
        argv += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
    if inputs.ca:
        argv += ["--ro-bind", str(inputs.ca), "/mnt/ca.pem"]
    for key, value in inputs.env.items():
        argv += ["--setenv", key, value]
    return [*argv, "--"], {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _failure(what: str, rc: int, log: str) -> str:
    """One message naming the package pip could not install and pip's own error."""
    package = next((m.group(1) for pattern in _FAILED_PACKAGE if (m := pattern.search(log))), None)
    errors = [line.strip() for line in log.splitlines() if line.lstrip().startswith(("ERROR:", "error:"))]
    detail = "\n".join(errors[-6:]) or log.strip()[-1500:]
    subject = f"pip could not install {package}" if package else f"{what} failed (exit {rc})"
    return f"environment build failed: {subject} ({what}):\n{detail}"


def installed_packages(tree: Path) -> list[str]:
    """name==version of every distribution installed in the tree."""
    from importlib.metadata import PathDistribution

    found = set()
    for info in (tree / SITE).glob("*.dist-info"):
        meta = PathDistribution(info).metadata
        if meta and meta["Name"]:
            found.add(f"{meta['Name']}=={meta['Version']}")
    return sorted(found, key=str.lower)


def top_level_names(tree: Path) -> list[str]:
    """Top-level names importable from the tree's site directory (packages,
    modules, extension modules), but not editable-install hooks, whose names
    belong to the workspace itself."""
    site = tree / SITE
    names = set()
    for entry in site.iterdir() if site.is_dir() else []:
        name = entry.name
        if name.startswith("__") or name.endswith((".dist-info", ".egg-info", ".pth", ".egg-link")):
            continue
        if entry.is_dir():
            names.add(name)
        elif name.endswith((".py", ".so")):
            names.add(name.split(".", 1)[0])
    return sorted(names)
