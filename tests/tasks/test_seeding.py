"""Seed projects: shipped pins, local directories, clean copies, bad specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from touchstone.tasks.seeding import (
    MANIFEST,
    SEEDS_DIR,
    SeedError,
    _unpack_sdist,
    default_seeds,
    resolve_seed,
    sha256_file,
)


def test_shipped_seeds_match_their_pins_and_carry_licenses(tmp_path: Path) -> None:
    entries = json.loads(MANIFEST.read_text())["seeds"]
    assert 2 <= len(entries) <= 4
    for e in entries:
        assert sha256_file(SEEDS_DIR / e["file"]) == e["sha256"]
    for seed, e in zip(default_seeds(tmp_path), entries):
        assert seed.name == f"{e['name']}=={e['version']}"
        assert (seed.root / e["license_file"]).is_file()
        assert seed.sources and any("test_" in t for t in seed.tests)
        # packaging files only where the seed's environment installs the project itself
        banned = {".git", "__pycache__", "PKG-INFO"} | (
            set() if seed.environment and seed.environment.setup else {"setup.py"}
        )
        assert not any(p.name in banned for p in seed.root.rglob("*"))
    # the default round draws from code that needs third-party packages or a src/ layout
    with_env = [s for s in default_seeds(tmp_path / "again") if s.environment]
    assert len(with_env) >= 2
    assert any(s.environment.requirements for s in with_env) and any(
        src.startswith("src/") for s in with_env for src in s.sources
    )


def test_local_seed_copy_drops_history_caches_and_backups(calc_seed: Path, tmp_path: Path) -> None:
    seed = resolve_seed(calc_seed, tmp_path / "work")
    names = {p.name for p in seed.root.rglob("*")}
    assert not names & {".git", "__pycache__", "__init__.py.orig"}
    assert seed.sources == ("calc/__init__.py",) and seed.tests == ("tests/test_calc.py",)
    assert seed.module_of("calc/__init__.py") == "calc"


@pytest.mark.parametrize("spec", ["nope/does-not-exist", "inflection==0.5.1", "inflection#sha256=abc"])
def test_bad_specs_are_refused(spec: str, tmp_path: Path) -> None:
    with pytest.raises(SeedError, match="neither a directory nor a pinned PyPI spec"):
        resolve_seed(spec, tmp_path)


def test_sha256_mismatch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SeedError, match="does not match the pinned"):
        _unpack_sdist(SEEDS_DIR / "inflection-0.5.1.tar.gz", "0" * 64, tmp_path / "x", None)


def test_project_without_tests_is_refused(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "mod.py").write_text("def f():\n    return 1\n")
    with pytest.raises(SeedError, match="no pytest test files"):
        resolve_seed(tmp_path / "p", tmp_path / "work")


def test_a_shipped_seed_by_name_comes_with_its_environment(tmp_path: Path) -> None:
    glom = resolve_seed("glom", tmp_path)
    assert glom.name == "glom==23.5.0" and "attrs==23.2.0" in glom.environment.requirements
    assert resolve_seed("inflection", tmp_path / "b").environment is None
