"""Test inputs outside the test folders (golden files) are the task's: the
isolation probe records the files the tests read when they run on the
reference, the verifier protects them, and every run serves them read-only
from the pristine workspace (in the judge's tree when isolated)."""

from __future__ import annotations

import json

from touchstone.tasks.isolation import probe_isolation, recorded_isolation
from touchstone.tasks.schema import load_task
from touchstone.verify.verifier import verify_trajectory
from tests.verify.test_call_oracle import make_task


def writes(files: dict[str, str]) -> list[dict]:
    """One write_file call per file, each with its (untrusted) tool result, then submit."""
    calls = [("write_file", {"path": rel, "content": text}) for rel, text in files.items()] + [("submit", {})]
    out: list[dict] = [{"role": "user", "content": "Make render match the golden file."}]
    for i, (name, args) in enumerate(calls):
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        out += [{"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": ""}]  # fmt: skip
    return out


REFERENCE = {"render.py": "def render(n):\n    return '\\n'.join(f'{i}: {i * i}' for i in range(n)) + '\\n'\n"}
WORKSPACE = {"render.py": "def render(n):\n    return ''\n", "data/squares.txt": "0: 0\n1: 1\n2: 4\n3: 9\n"}
TESTS = {
    "tests/test_render.py": """
    from pathlib import Path

    from render import render


    def test_matches_the_golden_file():
        assert render(4) == Path("data/squares.txt").read_text()
"""
}
WRONG = "def render(n):\n    return 'nothing\\n'\n"


def test_golden_files_are_recorded_protected_and_served_pristine(tmp_path):
    task = load_task(make_task(tmp_path, "golden", workspace=WORKSPACE, hidden=TESTS, reference=REFERENCE))
    probed = probe_isolation(task, "bwrap")
    assert probed.status == "isolated" and probed.inputs == ["data/squares.txt"], probed
    assert recorded_isolation(task).inputs == ["data/squares.txt"]

    honest = verify_trajectory(task, writes(REFERENCE), replays=1, backend="bwrap")
    assert honest.verdict == "accept" and honest.guard == "isolation+oracle", honest.reasons
    # rewriting the golden file to match a wrong answer is tampering with a test input
    edited = verify_trajectory(task, writes({**{"render.py": WRONG}, "data/squares.txt": "nothing\n"}),
                               replays=1, backend="bwrap", full=True)  # fmt: skip
    assert edited.verdict == "reject" and "protected_paths" in edited.failed_checks(), edited.reasons
    # rewriting it at run time, from the code under test, reaches no file the tests read
    at_run_time = WRONG.replace("    return", "    open('data/squares.txt', 'w').write('nothing\\n')\n    return")
    for isolated in (True, False):
        run = verify_trajectory(task, writes({"render.py": at_run_time}), replays=1, backend="bwrap",
                                isolated=isolated, full=True)  # fmt: skip
        assert run.check("tests").status == "fail", (isolated, run.checks)


def test_the_record_is_plain_json(tmp_path):
    task = load_task(make_task(tmp_path, "golden", workspace=WORKSPACE, hidden=TESTS, reference=REFERENCE))
    probe_isolation(task, "bwrap")
    assert json.loads((task.dir / "isolation.json").read_text())["inputs"] == ["data/squares.txt"]
