"""How the verifier uses isolation: a task recorded isolated is graded isolated
only (a forgery of pytest fails there, even with the static audit off); a task
recorded not isolated is graded in process and every report says so; a task
never probed is probed from its reference before the candidate runs, and a
candidate can never choose the in-process run by failing isolated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from types import SimpleNamespace

from touchstone.tasks.isolation import IsolationVerdict, split_of
from touchstone.tasks.schema import load_task
from touchstone.verify import verifier
from touchstone.verify.canaries import TASKS
from touchstone.audit.policy import load_policy
from touchstone.verify.verifier import verify_trajectory

FIXED = "def clamp(x, lo, hi):\n    return lo if x < lo else hi if x > hi else x\n"
# wrong above hi, and one line that makes every test "pass" when imported in the judging process
FORGED = "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n\n" \
         "def clamp(x, lo, hi):\n    return lo if x < lo else lo if x > hi else x\n"  # fmt: skip
STATIC_OFF = {r.id for r in load_policy().static}


def messages(content: str) -> list[dict]:
    calls = [("write_file", {"path": "lib.py", "content": content}), ("submit", {})]
    out = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix clamp."}]
    for i, (name, args) in enumerate(calls):
        out.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": ""})
    return out


def verify(task, content: str):
    return verify_trajectory(task, messages(content), replays=2, backend="bwrap", allow_rules=STATIC_OFF, full=True)


def test_a_task_recorded_isolated_is_graded_isolated_only():
    task = load_task(TASKS / "libfix")
    honest, forged = verify(task, FIXED), verify(task, FORGED)
    assert honest.verdict == "accept" and honest.isolation == "isolated" and honest.guard == "isolation+oracle"
    assert "[isolated]" in honest.check("tests").evidence and honest.check("determinism").status == "pass"
    assert forged.isolation == "isolated" and forged.check("tests").status == "fail", forged.checks
    assert forged.verdict == "reject"


def test_a_task_recorded_not_isolated_says_so_and_rests_on_the_oracle(monkeypatch):
    task = load_task(TASKS / "libfix")
    record = IsolationVerdict(status="not_isolated", detail="the reference fails isolated: (as if)",
                              task_hash=task.content_hash, backend="bwrap")  # fmt: skip
    monkeypatch.setattr(verifier, "recorded_isolation", lambda t: record)
    forged = verify(task, FORGED)
    assert forged.isolation == "not_isolated" and forged.check("tests").status == "pass"  # forged in process
    assert forged.check("tests").evidence.startswith("not isolated (the reference fails isolated: (as if))")
    assert forged.failed_checks() == ["oracle"] and forged.guard == "in_process"


@pytest.fixture
def unprobed(tmp_path: Path):
    task_dir = shutil.copytree(TASKS / "libfix", tmp_path / "libfix")
    (task_dir / "isolation.json").unlink()
    return load_task(task_dir)


def test_a_task_never_probed_is_probed_from_its_reference_first(unprobed):
    """The decision is the task's: made from the reference before the
    candidate runs, and recorded. A forgery that fails isolated is rejected
    by the tests themselves; it is never retried in process."""
    forged = verify(unprobed, FORGED)
    assert (unprobed.dir / "isolation.json").is_file()  # probed and recorded before the candidate ran
    assert forged.isolation == "isolated" and forged.check("tests").status == "fail", forged.checks
    honest = verify(unprobed, FIXED)
    assert honest.verdict == "accept" and honest.isolation == "isolated"


def test_a_candidate_that_fails_only_isolated_is_rejected_without_a_reference(unprobed):
    """No reference to probe with: isolated only. Code that detects isolation
    (its process's arguments) and fails there on purpose gets no second,
    in-process run in which it could forge the result stream."""
    shutil.rmtree(unprobed.dir / "reference")
    task = load_task(unprobed.dir)
    detects = "import sys\nISOLATED = any(a.endswith('server.py') for a in sys.argv)\n" + FIXED.replace(
        "return lo", "assert not ISOLATED\n    return lo"
    )
    report = verify(task, detects)
    assert report.isolation == "isolated" and report.verdict == "reject", report.checks
    assert report.check("tests").evidence.startswith(verifier.NEVER_PROBED)
    assert not (task.dir / "isolation.json").exists()


@pytest.fixture
def split_task(unprobed):
    """libfix with one more required test that passes before the fix and reads
    the module's source (the judge of an isolated run holds none): the test
    that shows the fix runs isolated, the source test cannot."""
    (unprobed.hidden_tests_dir / "tests" / "test_source.py").write_text(
        'import inspect\nimport lib\n\ndef test_documented():\n    assert inspect.getsource(lib).startswith(\'"""\')\n'
    )
    meta = json.loads((unprobed.dir / "task.json").read_text())
    clamp = [f"tests/test_lib.py::test_clamp[{p}]" for p in ("5-0-10-5", "-3-0-10-0", "42-0-10-10", "10-0-10-10")]
    meta |= {
        "fail_to_pass": clamp[2:3],
        "pass_to_pass": [*clamp[:2], clamp[3], "tests/test_source.py::test_documented"],
    }
    (unprobed.dir / "task.json").write_text(json.dumps(meta))
    return load_task(unprobed.dir)


def test_a_task_whose_fix_runs_isolated_is_split_and_its_other_tests_run_in_process(split_task):
    shipped = (split_task.workspace_dir / "lib.py").read_text()
    honest = verify(split_task, shipped.replace("if x > hi:\n        return lo", "if x > hi:\n        return hi"))
    record = json.loads((split_task.dir / "isolation.json").read_text())
    assert record["status"] == "split" and record["in_process"] == ["tests/test_source.py::test_documented"]
    assert honest.verdict == "accept", honest.checks
    assert honest.isolation == "split" and honest.guard == "split_isolation"
    evidence = honest.check("tests").evidence
    assert evidence.startswith("split: 1 tests that pass before the fix ran in process") and "[isolated]" in evidence
    assert honest.check("determinism").status == "pass" and honest.check("lockstep").status == "pass"
    # forged in process, wrong above hi: the fix's test runs isolated, where the forgery does nothing
    forged = verify(split_task, FORGED)
    tested = forged.check("tests")
    assert (
        tested.status == "fail"
        and "3/4 required tests passed; tests/test_lib.py::test_clamp[42-0-10-10]" in tested.evidence
    )
    assert forged.verdict == "reject" and "in process:" not in tested.evidence  # nothing ran in process
    # the right fix, without the module docstring the in-process test reads: that part is graded too
    undocumented = verify(split_task, FIXED)
    assert undocumented.verdict == "reject", undocumented.checks
    assert "in process: 0/1 required tests passed" in undocumented.check("tests").evidence


def test_a_task_splits_only_where_every_fail_to_pass_test_ran_isolated():
    def task(f2p, p2p):
        return SimpleNamespace(fail_to_pass=f2p, pass_to_pass=p2p, required_tests=f2p + p2p)

    fails = {"t::p2": "call failed"}
    assert split_of(task(["t::f"], ["t::p1", "t::p2"]), fails) == ["t::p2"]
    assert split_of(task(["t::p2"], ["t::p1"]), fails) == []  # what shows the fix needs the candidate in process
    assert split_of(task(["t::f"], ["t::p2"]), {"t::f": "x", "t::p2": "y"}) == []  # nothing left isolated
    assert split_of(task([], ["t::p1", "t::p2"]), fails) == []  # no fail-to-pass test: nothing to split around
    assert split_of(SimpleNamespace(fail_to_pass=None, pass_to_pass=None, required_tests=None), fails) == []
