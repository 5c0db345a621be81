"""Replay compares each replayed observation with the recorded one; run times
differ honestly between the two and must not count as divergence, while any
other difference must."""

import json

from touchstone.tasks.schema import load_task
from touchstone.verify.replay import replay

from tests.verify.test_pipeline import _hand_written_task


def _run_tests(recorded: str) -> list[dict]:
    call = {
        "id": "c0",
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": "echo '1 passed in 0.01s'"})},
    }
    return [
        {"role": "user", "content": "fix"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": recorded},
    ]


def _divergent(task, recorded: str) -> list[int]:
    return replay(task.workspace_dir, _run_tests(recorded), backend="bwrap").divergent_steps


def test_timings_are_not_divergence_but_other_changes_are(tmp_path):
    task = load_task(_hand_written_task(tmp_path))
    assert _divergent(task, "exit code: 0\nstdout:\n1 passed in 0.73s\n") == []
    assert _divergent(task, "exit code: 0\nstdout:\n1 failed in 0.01s\n") == [0]
    # Recorded before the tools dropped pytest's run time, or by another harness: still the same.
    assert _divergent(task, "exit code: 0\nstdout:\n1 passed\n") == []
