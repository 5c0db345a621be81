"""The Docker deployment's images, built on this machine: no registry, no pulled base.

Both start FROM the sandbox's debootstrapped Debian (`touchstone sandbox
build-image` imports it), so nothing is pulled:
- the user-code image (`orchestration/deploy/docker/Dockerfile`): the project and
  a venv installed offline from wheels that `pip download` fetched on the host,
  with the host venv's exact versions as constraints (what the tests ran on);
- the PostgreSQL image (`orchestration/deploy/docker/postgres/`): Debian's package.

Tags are content hashes (base image, wheels, sources), so a rebuild happens only
when something changed, and the wheel layer is reused across code changes."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from touchstone import paths

PROJECT = Path(__file__).resolve().parents[2]
DOCKER_DIR = Path(__file__).resolve().parent / "docker"
USER_CODE_REPO = "touchstone-orchestration"
POSTGRES_REPO = "touchstone-postgres"
IMAGE_LABEL = "touchstone.deploy.image"


class ImageBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Images:
    user_code: str
    postgres: str


def build_images(log=print) -> Images:
    """Build (when missing) both images and return their tags."""
    from touchstone.sandbox.docker import _client, ensure_image
    from touchstone.sandbox.image import base_tag

    ensure_image(progress=False)  # imports the debootstrapped base too
    base, client = base_tag(), _client()
    context = paths.cache() / "deploy" / "context"
    wheels_hash = _prepare_wheels(context / "wheels", log)
    python_prefix = _copy_interpreter(context / "python")
    src_hash = _copy_sources(context / "src")
    shutil.copy(DOCKER_DIR / "Dockerfile", context / "Dockerfile")
    user = f"{USER_CODE_REPO}:{_digest(base, wheels_hash, sys.version, python_prefix, src_hash, _file_hash(DOCKER_DIR / 'Dockerfile'))}"
    _build(client, context, user, {"BASE": base, "PYTHON_PREFIX": python_prefix}, log)
    return Images(user_code=user, postgres=build_postgres_image(log))


def build_postgres_image(log=print) -> str:
    """Build (when missing) the PostgreSQL image alone and return its tag."""
    from touchstone.sandbox.docker import _client, ensure_image
    from touchstone.sandbox.image import base_tag

    ensure_image(progress=False)  # imports the debootstrapped base too
    pg_dir = DOCKER_DIR / "postgres"
    postgres = f"{POSTGRES_REPO}:{_digest(base_tag(), *(_file_hash(p) for p in sorted(pg_dir.iterdir())))}"
    _build(_client(), pg_dir, postgres, {"BASE": base_tag()}, log)
    return postgres


def _build(client, context: Path, tag: str, buildargs: dict[str, str], log) -> None:
    import docker

    try:
        client.images.get(tag)
        return
    except docker.errors.ImageNotFound:
        pass
    log(f"building {tag} (context {context})")
    tail: list[str] = []
    for chunk in client.api.build(
        path=str(context),
        tag=tag,
        buildargs=buildargs,
        rm=True,
        forcerm=True,
        labels={IMAGE_LABEL: tag.split(":")[0]},
        decode=True,
    ):
        line = chunk.get("stream", "").strip()
        tail = [*tail[-30:], line] if line else tail
        if "error" in chunk:
            output = "\n".join(tail)
            raise ImageBuildError(f"building {tag} failed: {chunk['error'].strip()}\n{output}")
        if line.startswith("Step "):
            log(f"  {line}")
    client.images.get(tag)  # raises if the build produced nothing


def requirements() -> list[str]:
    """What the image installs: the project's dependencies, torch at the host's version
    (on a CPU host, pip finds the CPU build the host's pip config points at)."""
    deps = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = metadata.version("torch").split("+")[0]
    return [f"torch=={torch}" if _name(d) == "torch" else d for d in deps] + ["pip", "setuptools"]


def constraints() -> list[str]:
    """The host venv's exact versions (local builds like +cpu excluded: the
    requirement above pins torch)."""
    pins = {}
    for dist in metadata.distributions():
        name, version = dist.metadata["Name"], dist.version
        if name and "+" not in version and _name(name) != "touchstone":
            pins[_name(name)] = f"{_name(name)}=={version}"
    return sorted(pins.values())


def _prepare_wheels(wheels: Path, log) -> str:
    """`pip download` every dependency into `wheels/` unless the same set is there."""
    reqs, cons = requirements(), constraints()
    stamp = hashlib.sha256(json.dumps([reqs, cons]).encode()).hexdigest()
    if (wheels / ".stamp").is_file() and (wheels / ".stamp").read_text() == stamp:
        return stamp
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    (wheels / "requirements.txt").write_text("\n".join(reqs) + "\n")
    (wheels / "constraints.txt").write_text("\n".join(cons) + "\n")
    log(f"downloading wheels into {wheels}")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--only-binary=:all:",
        "-d",
        str(wheels),
        "-r",
        str(wheels / "requirements.txt"),
        "-c",
        str(wheels / "constraints.txt"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ImageBuildError(f"pip download failed:\n{done.stderr[-3000:]}")
    (wheels / ".stamp").write_text(stamp)
    return stamp


def _copy_interpreter(dest: Path) -> str:
    """The running interpreter's prefix (stdlib, binaries; no site-packages) into
    `dest`, once per interpreter; returns the prefix, where the image puts it (its
    binaries may hold that path as their library search path)."""
    prefix = Path(sys.base_prefix)
    if prefix == Path("/usr"):
        raise ImageBuildError(
            "the user-code image copies the host's Python, which must live in its own prefix "
            "(pyenv, a python.org build, /opt/python...), not /usr"
        )
    stamp = dest / ".stamp"
    if stamp.is_file() and stamp.read_text() == f"{prefix}\n{sys.version}":
        return str(prefix)
    shutil.rmtree(dest, ignore_errors=True)
    skip = shutil.ignore_patterns("site-packages", "__pycache__", "test", "idle_test")
    shutil.copytree(prefix, dest, symlinks=True, ignore=skip)
    (dest / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages").mkdir()
    stamp.write_text(f"{prefix}\n{sys.version}")
    return str(prefix)


def _copy_sources(dest: Path) -> str:
    """The checkout's tracked and new (not ignored) files into `dest`; their hash."""
    listed = subprocess.run(
        ["git", "-C", str(PROJECT), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        raise ImageBuildError(f"the user-code image is built from a git checkout; {PROJECT}: {listed.stderr}")
    shutil.rmtree(dest, ignore_errors=True)
    digest = hashlib.sha256()
    for rel in sorted(f for f in listed.stdout.split("\0") if f):
        src = PROJECT / rel
        if not src.is_file():  # deleted but not yet committed
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        digest.update(rel.encode() + b"\0" + _file_hash(src).encode())
    return digest.hexdigest()


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _name(requirement: str) -> str:
    """Normalized project name of a requirement string."""
    for sep in "<>=!~[; ":
        requirement = requirement.split(sep)[0]
    return requirement.strip().lower().replace("_", "-").replace(".", "-")
