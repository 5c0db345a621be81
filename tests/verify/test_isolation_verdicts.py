"""How the verifier uses isolation: a task recorded isolated is graded isolated
only (a forgery of pytest fails there, even with the static audit off); a task
recorded not isolated is graded in process and every report says so; a task
never probed runs isolated first and says when only an in-process run passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from touchstone.tasks.isolation import IsolationVerdict
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
    assert honest.verdict == "accept" and honest.isolation == "isolated" and honest.guard == "isolation"
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
    assert forged.failed_checks() == ["oracle"] and forged.guard == "none"


@pytest.fixture
def unprobed(tmp_path: Path):
    task_dir = shutil.copytree(TASKS / "libfix", tmp_path / "libfix")
    (task_dir / "isolation.json").unlink()
    return load_task(task_dir)


def test_a_task_never_probed_runs_isolated_first(unprobed):
    honest = verify(unprobed, FIXED)
    assert honest.verdict == "accept" and honest.isolation == "isolated"
    forged = verify(unprobed, FORGED)  # fails isolated, passes in process: reported, never silent
    assert forged.isolation == "not_isolated" and forged.check("tests").status == "pass"
    assert "task never probed; fails isolated" in forged.check("tests").evidence
    assert forged.verdict == "reject" and forged.failed_checks() == ["oracle"]
