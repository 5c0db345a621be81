"""The sandbox environment: one Debian root filesystem built by debootstrap from
`sandbox_images/`, used directly as the bwrap root and `docker import`ed as the base
of the Docker image. Both are named by a content hash of `sandbox_images/`, so an
edit there rebuilds them, and a trajectory can record exactly what it ran in."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel

from touchstone import paths
from touchstone.hashing import tree_hash
from touchstone.sandbox.errors import SandboxError

IMAGE_REPO = "touchstone-sandbox"
BASE_REPO = "touchstone-sandbox-base"
# Written into the root filesystem last, so its presence marks a finished build.
STAMP = "etc/touchstone-image"


class RootfsSpec(BaseModel):
    """`sandbox_images/rootfs.json`: what debootstrap installs."""

    suite: str
    variant: str = "minbase"
    mirror: str
    packages: list[str]


def images_dir() -> Path:
    """`sandbox_images/` of this checkout (override: TOUCHSTONE_SANDBOX_IMAGES)."""
    override = os.environ.get("TOUCHSTONE_SANDBOX_IMAGES")
    path = Path(override) if override else Path(__file__).resolve().parents[2] / "sandbox_images"
    if not (path / "rootfs.json").is_file():
        raise SandboxError(f"sandbox image definition not found: {path}/rootfs.json")
    return path


def image_hash(directory: Path | None = None) -> str:
    """The content hash (`touchstone.hashing.tree_hash`) of `sandbox_images/`,
    but its README (documentation edits must not rebuild the environment) and caches."""
    return tree_hash(directory or images_dir(), skip=lambda rel: rel.rsplit("/", 1)[-1] == "README.md"
                     or "__pycache__" in rel.split("/"))  # fmt: skip


def short_hash() -> str:
    return image_hash()[:16]


def image_tag() -> str:
    return f"{IMAGE_REPO}:{short_hash()}"


def base_tag() -> str:
    return f"{BASE_REPO}:{short_hash()}"


def rootfs_path() -> Path:
    return paths.cache() / f"rootfs-{short_hash()}"


def rootfs_ready(path: Path | None = None) -> bool:
    return ((path or rootfs_path()) / STAMP).is_file()


@contextmanager
def build_lock(name: str) -> Iterator[None]:
    """One builder per cache entry across processes (parallel test workers, CLI)."""
    lock_path = paths.cache() / f"{name}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_rootfs(progress: bool = True) -> Path:
    """The cached root filesystem, built first if missing. The build happens in a
    temporary directory renamed into place at the end, so a killed build never
    leaves a half-built root behind."""
    final = rootfs_path()
    if rootfs_ready(final):
        return final
    with build_lock(final.name):
        if rootfs_ready(final):  # another process finished it while we waited
            return final
        _check_can_build()
        tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}.building-", dir=final.parent))
        try:
            _debootstrap(tmp, progress)
            (tmp / STAMP).write_text(image_hash() + "\n")
            tmp.chmod(0o755)  # mkdtemp made it 0700: the sandbox user must traverse its "/"
            if final.exists():  # a stale, unstamped leftover from an older layout
                shutil.rmtree(final)
            tmp.rename(final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def _check_can_build() -> None:
    if os.geteuid() != 0:
        raise SandboxError(
            "building the sandbox root filesystem needs root (debootstrap + chroot); "
            "run `sudo touchstone sandbox rootfs` once, or set TOUCHSTONE_CACHE to a "
            "cache that already holds it"
        )
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap is not installed: apt-get install -y debootstrap")


def _debootstrap(target: Path, progress: bool) -> None:
    spec = RootfsSpec.model_validate_json((images_dir() / "rootfs.json").read_text())
    mirror = os.environ.get("TOUCHSTONE_DEBIAN_MIRROR", spec.mirror)
    log_path = target.parent / f"{target.name}.log"
    cmd = [
        "debootstrap",
        f"--variant={spec.variant}",
        f"--include={','.join(spec.packages)}",
        spec.suite,
        str(target),
        mirror,
    ]
    _run_logged(cmd, log_path, "debootstrap (about a minute)", progress)
    setup = target / "setup-rootfs.sh"
    shutil.copy(images_dir() / "setup-rootfs.sh", setup)
    try:
        _run_logged(["chroot", str(target), "/bin/sh", "/setup-rootfs.sh"], log_path, "configuring", progress)
    finally:
        setup.unlink(missing_ok=True)
    log_path.unlink(missing_ok=True)


def _run_logged(cmd: list[str], log_path: Path, what: str, progress: bool) -> None:
    """Run a build step with a spinner; on failure show the tail of its log."""
    from rich.console import Console

    console = Console(stderr=True)
    with open(log_path, "ab") as log:
        if progress:
            with console.status(f"sandbox rootfs: {what}"):
                rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        else:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise SandboxError(f"{cmd[0]} failed with exit code {rc}; log tail:\n{tail}")
