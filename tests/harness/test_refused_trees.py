"""Red team: a tree to grade that no sandbox takes (the candidate's files over
the workspace limits at their apparent size; here one sparse file, cheap on
disk) fails the run with the reason, in process and isolated: the
candidate's outcome, never a grading error that would make the verdict
inconclusive."""

from __future__ import annotations

from pathlib import Path

from touchstone.harness import grading
from touchstone.harness.isolation.runner import IsolatedTrees, run_isolated

TEST = "def test_a():\n    pass\n"


def _tree(root: Path, with_tests: bool, sparse: bool) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    if with_tests:
        (root / "tests").mkdir()
        (root / "tests" / "test_t.py").write_text(TEST)
    if sparse:
        with open(root / "pkg" / "big.bin", "wb") as handle:
            handle.truncate(300 << 20)  # past the default 256 MiB, nothing allocated
    return root


def test_a_tree_over_the_limits_fails_in_process(tmp_path, sandbox_backend):
    tree = _tree(tmp_path / "tree", with_tests=True, sparse=True)
    prefixes = grading.test_functions("tests/test_t.py", TEST)
    res = grading.run_tests(tree, ["tests/test_t.py"], None, prefixes, timeout=60, backend=sandbox_backend)
    assert res.status == "fail" and "the tree to grade is refused" in res.evidence
    assert "over its limits at pkg/big.bin" in res.evidence


def test_a_candidate_tree_over_the_limits_fails_isolated(tmp_path, sandbox_backend):
    trees = IsolatedTrees(
        candidate=_tree(tmp_path / "candidate", with_tests=False, sparse=True),
        judge=_tree(tmp_path / "judge", with_tests=True, sparse=False),
        modules=["pkg/__init__.py"],
    )
    prefixes = grading.test_functions("tests/test_t.py", TEST)
    res = run_isolated(trees, ["tests/test_t.py"], None, prefixes, timeout=60, backend=sandbox_backend)
    assert res.status == "fail" and "over its limits at pkg/big.bin" in res.evidence
