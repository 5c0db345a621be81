"""A SWE-bench-style instance built here from a real PyPI sdist (inflection
0.5.1, shipped as a seed) put under git: the original release, a commit that
introduces a bug in `dasherize` (the instance's base_commit), and a later
commit holding the fix and a new test (what the workspace must never show)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

from touchstone.tasks.seeding import SEEDS_DIR

REPO = "jpvanhal/inflection"
GOOD = "return word.replace('_', '-')"
BUG = "return word.replace('_', ' - ')"
NEW_TEST = """

def test_dasherize_many_underscores():
    assert inflection.dasherize("a_b_c_d") == "a-b-c-d"
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def make_instance(root: Path) -> tuple[Path, Path, dict]:
    """(repos dir, instances.jsonl, the instance) with a clone at repos/jpvanhal__inflection."""
    repos = root / "repos"
    repo = repos / REPO.replace("/", "__")
    with tarfile.open(SEEDS_DIR / "inflection-0.5.1.tar.gz") as tar:
        tar.extractall(root / "unpack", filter="data")
    repos.mkdir()
    (root / "unpack" / "inflection-0.5.1").rename(repo)
    _git(repo, "init", "-q")
    _commit(repo, "inflection 0.5.1")
    src = repo / "inflection" / "__init__.py"
    src.write_text(src.read_text().replace(GOOD, BUG))
    base = _commit(repo, "refactor dasherize (introduces the bug)")
    src.write_text(src.read_text().replace(BUG, GOOD))
    patch = _git(repo, "diff")
    tests = repo / "test_inflection.py"
    tests.write_text(tests.read_text() + NEW_TEST)
    test_patch = _git(repo, "diff", "--", "test_inflection.py")
    _commit(repo, "fix dasherize, with a test")
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "test_inflection.py"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout.split()
    dasherize = [i for i in collected if "::test_dasherize" in i]
    # the cases with an underscore fail on the bug (and the new test); the others pass on both
    f2p = [i for i in dasherize if "_" in i.partition("[")[2] or "[" not in i]
    p2p = [i for i in dasherize if i not in f2p] + [i for i in collected if "::test_ordinal[" in i][:5]
    instance = {
        "instance_id": "jpvanhal__inflection-1", "repo": REPO, "base_commit": base, "patch": patch,
        "test_patch": test_patch, "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": json.dumps(p2p),
        "problem_statement": "`dasherize('a_b')` returns 'a - b' instead of 'a-b': underscores must become dashes.",
        "version": "0.5",
    }  # fmt: skip
    return repos, root / "instances.jsonl", instance


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
