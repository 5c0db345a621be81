"""The `corrected:` policy: the teacher acts; a learner's malformed turns stay in
the trajectory and change nothing the sandbox or the grade sees."""

from __future__ import annotations

import json

import pytest

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.plan import episode_limits
from touchstone.agent.policies import make_policy
from touchstone.episode.tools import is_valid_call

from .conftest import MINILIB, minilib_task

# What the tiny model writes when it loses the format: a call cut off mid-way.
CUT_OFF = '<tool_call>\n{"name": "bash", "arguments": {"command": "grep -rn --exclude'


@pytest.fixture
def task(tmp_path):
    return minilib_task(
        tmp_path, "flip", "`clamp` ignores the upper bound.", MINILIB.replace("if x > hi:", "if x <= hi:")
    )


def assistant(traj):
    return [m for m in traj.messages if m["role"] == "assistant"]


def test_a_learners_mistakes_stay_and_the_teacher_acts_after_each(task, tmp_path):
    outputs = tmp_path / "learner.json"
    outputs.write_text(json.dumps([CUT_OFF]))
    alone = run_episode(
        task, make_policy(PolicySpec.parse("teacher")), backend="bwrap", limits=EpisodeLimits(max_turns=16)
    )
    spec = PolicySpec.parse(f"corrected:replay:{outputs}")
    limits = episode_limits(spec, max_turns=6, teacher_max_turns=16, time_budget_s=300)
    corrected = run_episode(task, make_policy(spec), backend="bwrap", limits=limits)
    assert corrected.exit_reason == "submitted" and alone.exit_reason == "submitted"
    turns = assistant(corrected)
    # Every teacher action follows one learner mistake, answered by the loop's error observation.
    assert [is_valid_call(m) for m in turns] == [False, True] * len(assistant(alone))
    assert all(m["content"] == CUT_OFF for m in turns[::2])
    assert [m["content"] for m in turns[1::2]] == [m["content"] for m in assistant(alone)]
    # Nothing the learner wrote ran: the same commands, the same edits, the same final diff.
    assert [(s.tool, s.arguments) for s in corrected.steps] == [(s.tool, s.arguments) for s in alone.steps]
    assert corrected.diff.patch == alone.diff.patch and "+    if x > hi:" in alone.diff.patch


def test_a_learner_that_is_right_leaves_the_teachers_run(task):
    """A well-formed learner turn is dropped: the teacher's action takes its place."""
    alone = run_episode(
        task, make_policy(PolicySpec.parse("teacher")), backend="bwrap", limits=EpisodeLimits(max_turns=16)
    )
    corrected = run_episode(
        task, make_policy(PolicySpec.parse("corrected:teacher")), backend="bwrap", limits=EpisodeLimits(max_turns=32)
    )
    assert assistant(corrected) == assistant(alone)


def test_bad_specs_are_named():
    with pytest.raises(ValueError, match="cannot itself be corrected"):
        PolicySpec.parse("corrected:corrected:teacher")
    with pytest.raises(ValueError, match="not a checkpoint directory"):
        make_policy(PolicySpec.parse("corrected:hf:/nonexistent"))
