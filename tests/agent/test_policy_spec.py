"""A policy spec is parsed once, keeps its text form, and trajectory ids name
the policy by content: the same checkpoint under two data roots gives the same ids."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import make_policy
from touchstone.agent.policies.spec import TEACHER, PolicySpec, PolicySpecError
from touchstone.agent.rollout import plan_attempts
from touchstone.episode.trajectory import Sampling

TEXTS = [
    "teacher",
    "hf:/data/rounds/r001/checkpoint",
    "openai:http://127.0.0.1:8000/v1#my-model",
    "replay:/tmp/outputs.json",
    "corrected:hf:/data/ckpt",
    "corrected:openai:http://vllm:8000/v1#abc",
    "hack-prone:0.25",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_text_form_round_trips(text):
    spec = PolicySpec.parse(text)
    assert str(spec) == text and PolicySpec.parse(str(spec)) == spec


def test_parts_are_read_from_the_spec_not_from_strings():
    assert PolicySpec.parse("hf:/a/b").path == Path("/a/b")
    assert PolicySpec.parse("openai:http://s/v1#m").endpoint == ("http://s/v1", "m")
    assert PolicySpec.parse("corrected:hf:/a").learner == PolicySpec("hf", "/a")
    assert PolicySpec("hf", "/a").corrected() == PolicySpec.parse("corrected:hf:/a")
    assert PolicySpec.parse("hack-prone:0.5").hack_rate == 0.5 and PolicySpec.parse("teacher") == TEACHER


@pytest.mark.parametrize(
    "text, why",
    [
        ("hf-typo:x", "unknown policy spec"),
        ("teacher:x", "takes no argument"),
        ("hf:", "needs an argument"),
        ("openai:localhost:8000#m", "openai:BASE_URL#MODEL"),
        ("corrected:corrected:teacher", "cannot itself be corrected"),
        ("corrected:nope", "unknown policy spec 'nope'"),
        ("hack-prone:2", "0 <= P <= 1"),
    ],
)
def test_a_bad_spec_is_named(text, why):
    with pytest.raises(PolicySpecError, match=why):
        PolicySpec.parse(text)


def test_make_policy_takes_a_parsed_spec():
    with pytest.raises(TypeError, match="PolicySpec.parse"):
        make_policy("teacher")


def test_the_same_checkpoint_under_two_data_roots_gives_the_same_trajectory_ids(simple_task, tmp_path):
    from training.model_init import default_model

    sampling = Sampling(temperature=1.0, max_tokens=12, seed=5)
    trajectories, planned = [], []
    for root in ("root-a", "elsewhere/root-b"):
        ckpt = tmp_path / root / "rounds" / "r001" / "checkpoint"
        shutil.copytree(default_model(), ckpt)
        policy = make_policy(PolicySpec("hf", str(ckpt)), sampling)
        planned.append([a.trajectory_id for a in plan_attempts([simple_task], policy, 2)])
        trajectories.append(
            run_episode(simple_task, policy, attempt=1, backend="bwrap", limits=EpisodeLimits(max_turns=1))
        )
        policy.close()
    a, b = trajectories
    assert a.trajectory_id == b.trajectory_id == planned[0][1] and planned[0] == planned[1]
    assert a.checkpoint_hash == b.checkpoint_hash
    # the record still says, readably, which directory ran: the text form, as before
    assert a.policy != b.policy and PolicySpec.parse(a.policy) == PolicySpec(
        "hf", str(tmp_path / "root-a/rounds/r001/checkpoint")
    )
