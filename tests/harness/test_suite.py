"""The harness's public API on real pytest runs in a real sandbox: what
validation, the proposers and the verifier all grade with."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from touchstone.harness import HiddenSuite, run_hidden_tests, run_plan


@dataclass
class Task:  # the three fields the harness reads (touchstone.tasks.Task has them)
    workspace_dir: Path
    hidden_tests_dir: Path
    timeout_s: float = 60.0


def _task(root: Path, hidden: dict[str, str], workspace: dict[str, str] | None = None) -> Task:
    for base, files in (
        (root / "ws", workspace or {"calc.py": "def inc(x):\n    return x\n"}),
        (root / "hidden", hidden),
    ):
        base.mkdir(parents=True, exist_ok=True)
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
    return Task(root / "ws", root / "hidden")


INC = {
    "tests/test_inc.py": "from calc import inc\n\n\ndef test_inc():\n    assert inc(1) == 2\n\n\n"
    "def test_zero():\n    assert inc(-1) == 0\n"
}


def test_a_reference_overlay_passes_where_the_workspace_fails_with_its_assertion(tmp_path):
    task = _task(tmp_path, INC)
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "calc.py").write_text("def inc(x):\n    return x + 1\n")
    start = run_hidden_tests(task, required=None, backend="bwrap")
    assert not start.ok and sorted(start.failed) == ["tests/test_inc.py::test_inc", "tests/test_inc.py::test_zero"]
    assert start.failed["tests/test_inc.py::test_inc"].startswith("call failed")  # the verdict's reason
    assert "assert 1 == 2" in start.messages["tests/test_inc.py::test_inc"]  # what the behaviour was
    assert start.collected == sorted(start.failed) and start.wall_s > 0
    fixed = run_hidden_tests(task, required=None, overlays=[tmp_path / "ref"], backend="bwrap")
    assert fixed.ok and fixed.total == 2
    mutant = run_hidden_tests(
        task,
        required=["tests/test_inc.py::test_inc"],
        overlays=[tmp_path / "ref"],
        files={"calc.py": "def inc(x):\n    return x + 2\n"},
        backend="bwrap",
    )
    assert not mutant.ok and mutant.total == 1


def test_each_run_of_the_plan_has_its_own_hash_seed_and_order(tmp_path):
    assert [run_plan(i) for i in range(4)] == [(0, "forward"), (1, "reverse"), (2, "shuffle:2"), (3, "shuffle:3")]
    seen = "import os\n\n\ndef test_seed():\n    assert os.environ['PYTHONHASHSEED'] == '{}'\n"
    task = _task(tmp_path, {"tests/test_seed.py": seen.format(1)})
    suite = HiddenSuite(task, None)
    tree = suite.compose(tmp_path / "run")
    assert [suite.run(tree, i, backend="bwrap").ok for i in range(3)] == [False, True, False]


@pytest.mark.parametrize("test_dir", ["tests", "pkg/testing"])
def test_test_directories_are_read_only_while_the_tests_run(tmp_path, test_dir):
    writes = (
        "from pathlib import Path\n\n\ndef test_write():\n"
        "    (Path(__file__).parent / 'test_later.py').write_text('def test_x():\\n    pass\\n')\n"
    )
    task = _task(tmp_path, {f"{test_dir}/test_w.py": writes})
    res = run_hidden_tests(task, required=None, backend="bwrap")
    assert not res.ok and "Read-only file system" in res.messages[f"{test_dir}/test_w.py::test_write"]


def test_helpers_in_test_directories_are_not_run_as_tests(tmp_path):
    task = _task(
        tmp_path,
        {**INC, "tests/helpers.py": "def test_like_helper():\n    raise AssertionError\n", "tests/conftest.py": ""},
    )
    suite = HiddenSuite(task, None)
    assert suite.test_files == ["tests/test_inc.py"]
    assert suite.prefixes == ["tests/test_inc.py::test_inc", "tests/test_inc.py::test_zero"]


def test_a_patch_that_does_not_apply_fails_the_run_with_git_s_reason(tmp_path):
    """Never the untouched tree graded in its place: here that tree would pass."""
    task = _task(tmp_path, {"tests/test_ok.py": "def test_ok():\n    pass\n"})
    stale = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def inc(x):\n-    return x - 1\n+    return x + 1\n"
    res = run_hidden_tests(task, required=None, patch=stale, backend="bwrap")
    assert res.status == "fail" and "the patch does not apply" in res.evidence and "calc.py" in res.evidence
