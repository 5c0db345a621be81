"""The episode loop on a real sandbox: every malformed-output case is recorded, not
raised, and every exit reason is reachable.

The policy here replays fixed raw model texts through the hf policy's own
tool-call parser, i.e. exactly the path a model's output takes."""

from __future__ import annotations

import functools
import json

import pytest

from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import Episode, Policy, PolicyError, PolicyTurn
from touchstone.agent.policies.hf import parse_completion
from touchstone.episode.tools import NO_TOOL_CALL, NOT_EXECUTED, execute_tool_call
from touchstone.episode.trajectory import Sampling, executed_tool_calls
from touchstone.sandbox import open_sandbox


@functools.cache
def _tokenizer():
    """The default model's tokenizer: scripted turns are parsed as a model's would be."""
    from transformers import AutoTokenizer

    from training.model_init import default_model

    return AutoTokenizer.from_pretrained(default_model())


class _Replay(Episode):
    def __init__(self, texts, tokens_per_turn):
        self.texts, self.turn, self.tokens = list(texts), 0, tokens_per_turn

    def act(self, messages, tools):
        if self.turn >= len(self.texts):
            raise PolicyError("script exhausted")
        text = self.texts[self.turn]
        self.turn += 1
        tok = _tokenizer()
        ids = tok.encode(text, add_special_tokens=False)
        return PolicyTurn(message=parse_completion(tok, ids, [], tools, self.turn - 1), completion_tokens=self.tokens)


class ScriptedPolicy(Policy):
    def __init__(self, texts, tokens_per_turn=10):
        super().__init__("scripted", Sampling())
        self.texts, self.tokens = texts, tokens_per_turn

    def episode(self, seed, max_turns):
        return _Replay(self.texts, self.tokens)


def tc(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


MALFORMED = [
    "I think the bug is in clamp.",  # no tool call
    '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}\n</tool_call>',  # bad JSON
    tc("delete_everything", path="."),  # unknown tool
    tc("read_file"),  # missing argument
    "Two at once " + tc("bash", command="echo first") + tc("bash", command="echo second"),
    tc("bash", command="seq 1 100000"),  # huge output
    '<tool_call>{"name": "bash", "arguments": {"command": "ec',  # cut off by max_tokens
    tc("str_replace", path="minilib/core.py", old="if x <= hi:", new="if x > hi:"),
    tc("submit"),
]


def test_malformed_outputs_are_recorded_and_the_episode_goes_on(simple_task):
    traj = run_episode(simple_task, ScriptedPolicy(MALFORMED), backend="bwrap", limits=EpisodeLimits(max_output=2000))
    assert traj.exit_reason == "submitted" and traj.error is None
    obs = [m["content"] for m in traj.messages[2:] if m["role"] != "assistant"]
    assert obs[0] == NO_TOOL_CALL
    assert obs[1].startswith("error: unknown tool ''")  # the parser could not read the call: kept, nameless
    assert obs[2].startswith("error: unknown tool 'delete_everything'")
    assert obs[3] == "error: read_file is missing required argument(s): path"
    assert obs[4:6] == ["exit code: 0\nstdout:\nfirst\n", NOT_EXECUTED]
    assert "[... truncated " in obs[6] and len(obs[6]) < 2100
    assert obs[7].startswith("error: unknown tool ''")
    assert obs[8:] == ["replaced 1 occurrence in minilib/core.py", "submitted"]
    assert len(traj.turns) == len(MALFORMED)
    assert [s.turn for s in traj.steps] == [1, 2, 3, 4, 5, 6, 7, 8]  # turn 0 had no call
    assert [s.ok for s in traj.steps] == [False, False, False, True, True, False, True, True]
    assert traj.steps[-1].ended and traj.diff.modified == ["minilib/core.py"]
    assert "+    if x > hi:" in traj.diff.patch


def test_recorded_observations_replay_identically(simple_task):
    traj = run_episode(simple_task, ScriptedPolicy(MALFORMED), backend="bwrap", limits=EpisodeLimits(max_output=2000))
    with open_sandbox(simple_task.workspace_dir, backend="bwrap") as sb:
        for c in executed_tool_calls(traj.messages):
            assert execute_tool_call(sb, c.name, c.arguments, max_output=2000).content == c.recorded_output
        assert sb.diff().patch == traj.diff.patch
    assert [c.step for c in executed_tool_calls(traj.messages)] == [s.step for s in traj.steps]


@pytest.mark.parametrize(
    "texts, limits, reason, error",
    [
        ([tc("bash", command="true")] * 5, EpisodeLimits(max_turns=3), "max_turns", None),
        ([tc("bash", command="true")] * 5, EpisodeLimits(max_total_tokens=25), "max_tokens", None),
        ([tc("bash", command="sleep 0.3")] * 5, EpisodeLimits(time_budget_s=0.2), "timeout", None),
        ([tc("bash", command="true")], EpisodeLimits(), "policy_error", "policy error: script exhausted"),
    ],
)
def test_exit_reasons(simple_task, texts, limits, reason, error):
    traj = run_episode(simple_task, ScriptedPolicy(texts), backend="bwrap", limits=limits)
    assert (traj.exit_reason, traj.error) == (reason, error)


def test_sandbox_failure_is_an_exit_reason(simple_task):
    # An action log inside the workspace would be visible to the agent: the sandbox refuses it.
    traj = run_episode(
        simple_task, ScriptedPolicy([tc("submit")]), backend="bwrap", action_log=simple_task.workspace_dir / "log.jsonl"
    )
    assert traj.exit_reason == "sandbox_error" and "action log" in traj.error
    assert traj.messages[-1]["role"] == "user"
