"""`touchstone import swe-bench` and `touchstone verify --patch` on an instance
built here from a real sdist under git (tests/tasks/swebench_fixture.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.tasks.swebench_fixture import BUG, GOOD, make_instance, write_jsonl
from touchstone.taskmaking.index import read_index
from touchstone.taskmaking.proposers.swebench import Instance, import_swebench
from touchstone.tasks.schema import load_task_set
from touchstone.taskmaking.validate import ValidationConfig

TOUCHSTONE = [str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "touchstone")]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("swebench")
    repos, jsonl, inst = make_instance(root)
    rows = [
        inst,
        {**inst, "instance_id": "gone__repo-1", "repo": "gone/repo"},
        {**inst, "instance_id": "jpvanhal__inflection-2", "patch": inst["patch"].replace(BUG, "no such line")},
        {**inst, "instance_id": "jpvanhal__inflection-3", "base_commit": "0" * 40},
        {"instance_id": "broken"},
    ]
    write_jsonl(jsonl, rows)
    out = root / "tasks"
    result = import_swebench(jsonl, repos, out, cfg=ValidationConfig(backend="bwrap"))
    return result, out, inst


def test_importer_keeps_the_instance_and_skips_the_rest_with_reasons(imported):
    result, out, _ = imported
    rows = {r.id: r for r in read_index(out)}
    assert rows["jpvanhal__inflection-1"].status == "kept", rows["jpvanhal__inflection-1"].detail
    assert rows["gone__repo-1"].reason == "repo_missing"
    assert rows["jpvanhal__inflection-2"].reason == "patch_does_not_apply"
    assert rows["jpvanhal__inflection-3"].reason == "bad_commit"
    assert rows["instances-5"].reason == "malformed"
    assert result.kept == 1
    # never half-written: only the kept task has a directory, no staging leftovers
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["jpvanhal__inflection-1"]
    assert [t.id for t in load_task_set(out)] == ["jpvanhal__inflection-1"]


def test_task_layout_has_no_history_and_no_fix(imported):
    _, out, inst = imported
    task = load_task_set(out)[0]
    ws = task.workspace_dir
    assert not any(p.name == ".git" for p in ws.rglob("*"))
    assert BUG in (ws / "inflection" / "__init__.py").read_text()
    assert "test_dasherize_many_underscores" not in (ws / "test_inflection.py").read_text()  # no test_patch
    assert "test_dasherize_many_underscores" in (task.hidden_tests_dir / "test_inflection.py").read_text()
    assert GOOD in (task.reference_dir / "inflection" / "__init__.py").read_text()
    assert task.required_tests == json.loads(inst["FAIL_TO_PASS"]) + json.loads(inst["PASS_TO_PASS"])
    assert task.environment.setup == ["pip install -e ."] and task.source.proposer == "swebench"
    assert task.statement == inst["problem_statement"]


def _verify(task_dir: Path, patch: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [*TOUCHSTONE, "verify", str(task_dir), "--patch", str(patch), "--json", "--replays", "1", "--backend", "bwrap"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {"stderr": proc.stderr}


def test_gold_patch_accepted_empty_and_test_deleting_rejected(imported, tmp_path):
    _, out, inst = imported
    task_dir = out / "jpvanhal__inflection-1"
    gold = tmp_path / "gold.diff"
    gold.write_text(inst["patch"])
    code, report = _verify(task_dir, gold)
    assert (code, report.get("verdict")) == (0, "accept"), report
    assert report["environment_digest"].startswith("sha256:")
    empty = tmp_path / "empty.diff"
    empty.write_text("")
    code, report = _verify(task_dir, empty)
    assert (code, report["verdict"]) == (1, "reject")
    # the fix plus deleting the test file the F2P tests live in
    deleting = tmp_path / "delete-tests.diff"
    test_file = (task_dir / "workspace" / "test_inflection.py").read_text().splitlines()
    deletion = (
        "diff --git a/test_inflection.py b/test_inflection.py\ndeleted file mode 100644\n"
        f"--- a/test_inflection.py\n+++ /dev/null\n@@ -1,{len(test_file)} +0,0 @@\n"
        + "".join(f"-{line}\n" for line in test_file)
    )
    deleting.write_text(inst["patch"] + deletion)
    code, report = _verify(task_dir, deleting)
    assert (code, report["verdict"]) == (1, "reject")
    assert any("protected_paths" in r for r in report["reasons"]), report["reasons"]


def test_a_patch_that_does_not_apply_is_refused_loudly(imported, tmp_path):
    """Graded anyway, it would grade the untouched tree (every change lost)."""
    _, out, inst = imported
    bad = tmp_path / "bad.diff"
    bad.write_text(inst["patch"].replace(BUG, "no such line"))
    proc = subprocess.run([*TOUCHSTONE, "verify", str(out / "jpvanhal__inflection-1"), "--patch", str(bad)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 2 and "the patch does not apply" in proc.stderr, proc.stderr


def test_r2e_gym_field_names_and_json_string_lists():
    inst = Instance.model_validate({
        "instance_id": "x", "repo_name": "o/n", "commit_hash": "abc", "gold_patch": "p", "test_patch": "t",
        "fail_to_pass": '["a.py::t"]', "pass_to_pass": ["b.py::u"], "problem_statement": "s", "version": 1.2,
    })  # fmt: skip
    assert (inst.repo, inst.base_commit, inst.patch, inst.FAIL_TO_PASS, inst.PASS_TO_PASS, inst.version) == (
        "o/n",
        "abc",
        "p",
        ["a.py::t"],
        ["b.py::u"],
        "1.2",
    )
