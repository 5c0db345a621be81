"""Seed projects for the mutation proposer: a real Python project with a pytest
suite, from the shipped defaults (pinned sdists in touchstone/tasks/seeds/), a
local directory, or a pinned PyPI sdist (`name==version#sha256=HEX`).

A seed is unpacked into a *clean* project directory: no VCS data, caches, build
output or backups, because a task workspace made from it must not carry any
history that reveals the original code.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, replace
from pathlib import Path

from touchstone.envs.spec import EnvSpec
from touchstone.harness import is_test_file
from touchstone.tasks.mutate import module_name

SEEDS_DIR = Path(__file__).parent / "seeds"
MANIFEST = SEEDS_DIR / "seeds.json"

# Never copied into a project: history, caches, build output, backups, editor files.
JUNK = [
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    "__pycache__",
    "*.pyc",
    "*.pyo",
    "*.egg-info",
    ".eggs",
    "build",
    "dist",
    ".tox",
    ".nox",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".venv",
    "venv",
    "*.orig",
    "*.rej",
    "*.bak",
    "*~",
    "*.swp",
    ".#*",
    ".DS_Store",
    ".github",
    ".gitignore",
    ".gitattributes",
]
# Python files that are never mutated: packaging, docs, generated version files.
NOT_SOURCE = [
    "setup.py",
    "conftest.py",
    "versioneer.py",
    "_version.py",
    "docs/*",
    "doc/*",
    "*/docs/*",
    "_build_tlz.py",
    "noxfile.py",
    "tasks.py",
]
_SPEC_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)#sha256=(?P<sha>[0-9a-f]{64})$"
)


class SeedError(ValueError):
    """A seed cannot be used; the message says why."""


@dataclass(frozen=True)
class Seed:
    name: str  # "inflection==0.5.1" or the directory name
    root: Path  # clean project directory
    sources: tuple[str, ...]  # relative paths of mutable source files
    tests: tuple[str, ...]  # relative paths of test files (+ conftest/__init__ in test dirs)
    environment: EnvSpec | None = None  # what its code and tests need installed (None: base)

    def module_of(self, path: str) -> str:
        """Dotted module of a source file; `src/` layouts import without the `src.`."""
        return module_name(path.removeprefix("src/"))

    def only_tests(self, pattern: str | None) -> Seed:
        """The seed with its test files narrowed to a path prefix or fnmatch glob
        (support files, conftest and __init__, stay)."""
        if not pattern:
            return self

        def wanted(rel: str) -> bool:
            name = rel.rsplit("/", 1)[-1]
            return name in ("conftest.py", "__init__.py") or rel.startswith(pattern) or fnmatch.fnmatch(rel, pattern)

        tests = tuple(t for t in self.tests if wanted(t))
        if not any(t.rsplit("/", 1)[-1] not in ("conftest.py", "__init__.py") for t in tests):
            raise SeedError(f"{self.name}: no test file matches {pattern!r}")
        return replace(self, tests=tests)


def _junk(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pat) for pat in JUNK)


def _is_source(rel: str) -> bool:
    return (
        rel.endswith(".py")
        and not is_test_file(rel)
        and not any(fnmatch.fnmatch(rel, p) for p in NOT_SOURCE)
        and not any(fnmatch.fnmatch(rel.rsplit("/", 1)[-1], p) for p in NOT_SOURCE)
    )


def copy_clean(src: Path, dst: Path, keep: list[str] | None = None) -> None:
    """Copy a project without junk; `keep`: top-level names to take (default all).
    Symlinks are not followed and not copied."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        if (keep is not None and entry.name not in keep) or _junk(entry.name) or entry.is_symlink():
            continue
        if entry.is_dir():
            copy_clean(entry, dst / entry.name)
        elif entry.is_file():
            shutil.copyfile(entry, dst / entry.name)


def scan(root: Path, name: str, environment: EnvSpec | None = None) -> Seed:
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.is_file())
    sources = tuple(f for f in files if _is_source(f))
    tests = tuple(f for f in files if is_test_file(f))
    if not any(f.rsplit("/", 1)[-1].startswith("test_") or f.endswith("_test.py") for f in tests):
        raise SeedError(f"{name}: no pytest test files (test_*.py / *_test.py) in {root}")
    if not sources:
        raise SeedError(f"{name}: no Python source files to mutate in {root}")
    return Seed(name, root, sources, tests, environment)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _unpack_sdist(archive: Path, sha256: str, dest: Path, keep: list[str] | None) -> Path:
    actual = sha256_file(archive)
    if actual != sha256:
        raise SeedError(f"{archive}: sha256 {actual} does not match the pinned {sha256}")
    unpack = dest.with_name(dest.name + ".unpack")
    shutil.rmtree(unpack, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpack, filter="data")  # "data" refuses links out and absolute paths
    tops = [p for p in unpack.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise SeedError(f"{archive}: expected one top-level directory, found {len(tops)}")
    copy_clean(tops[0], dest, keep)
    shutil.rmtree(unpack)
    return dest


def default_seeds(work: Path, names: list[str] | None = None) -> list[Seed]:
    """The shipped seeds (or those named), unpacked below `work`, each with its environment."""
    manifest = json.loads(MANIFEST.read_text())
    out = []
    for entry in manifest["seeds"]:
        if names is not None and entry["name"] not in names:
            continue
        spec = f"{entry['name']}=={entry['version']}"
        root = _unpack_sdist(SEEDS_DIR / entry["file"], entry["sha256"], work / spec, entry.get("keep"))
        env = entry.get("environment")
        out.append(scan(root, spec, EnvSpec.model_validate(env) if env is not None else None))
    return out


def shipped_names() -> list[str]:
    return [entry["name"] for entry in json.loads(MANIFEST.read_text())["seeds"]]


def _download(spec: re.Match, work: Path) -> Path:
    """`pip download` one sdist (no dependencies, no wheels) into work/downloads."""
    dl = work / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    req = f"{spec['name']}=={spec['version']}"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(dl), req],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SeedError(f"{req}: pip download failed: {proc.stderr.strip()[-500:]}")
    norm = spec["name"].lower().replace("-", "_").replace(".", "_")
    for archive in dl.glob("*.tar.gz"):
        if archive.name.lower().replace("-", "_").replace(".", "_").startswith(norm):
            return archive
    raise SeedError(f"{req}: no sdist (.tar.gz) was downloaded")


def resolve_seed(spec: str | Path, work: Path, environment: EnvSpec | None = None) -> Seed:
    """A local project directory (a checkout or an unpacked sdist), or
    `name==version#sha256=HEX` (a pinned PyPI sdist), or the name of a shipped seed
    (with its own environment); `environment`: what it needs installed."""
    path = Path(spec)
    if str(spec) in shipped_names():
        return default_seeds(work, [str(spec)])[0]
    if path.is_dir():
        dest = work / path.resolve().name
        shutil.rmtree(dest, ignore_errors=True)
        copy_clean(path, dest)
        return scan(dest, path.resolve().name, environment)
    match = _SPEC_RE.match(str(spec))
    if not match:
        raise SeedError(
            f"seed {spec!r} is neither a directory nor a pinned PyPI spec 'name==version#sha256=HEX' "
            f"nor a shipped seed ({', '.join(shipped_names())})"
        )
    archive = _download(match, work)
    dest = work / f"{match['name']}=={match['version']}"
    shutil.rmtree(dest, ignore_errors=True)
    return scan(_unpack_sdist(archive, match["sha"], dest, None), f"{match['name']}=={match['version']}", environment)
