"""The openai policy against a real OpenAI-compatible server: `transformers serve`
on a loopback port, serving the default tiny checkpoint."""

from __future__ import annotations

import pytest

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import make_policy
from touchstone.agent.policies.openai import OpenAIPolicy
from touchstone.episode.trajectory import Sampling

from tests.serving import free_port, transformers_serve


@pytest.fixture(scope="module")
def server():
    from training.model_init import default_model

    model = default_model()
    with transformers_serve(model) as base_url:
        yield base_url, str(model)


@pytest.mark.slow
def test_openai_policy_drives_transformers_serve(simple_task, server):
    base_url, model = server
    policy = make_policy(
        PolicySpec.parse(f"openai:{base_url}#{model}"), Sampling(temperature=1.0, max_tokens=12, seed=2)
    )
    traj = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=2))
    assert traj.error is None and traj.exit_reason in ("max_turns", "submitted")
    assert len(traj.turns) >= 1
    for turn in traj.turns:
        assert turn.prompt_tokens > 500  # system prompt + tool schemas
        assert 0 < turn.completion_tokens <= 12 and turn.finish_reason in ("stop", "length", "tool_calls")
        if turn.logprobs is not None:  # recorded only when the server returns them
            assert len(turn.logprobs) == turn.completion_tokens
    assert policy.ask_token_ids is False  # transformers serve refuses vLLM's extension; we fell back


def test_unreachable_server_is_a_policy_error(simple_task):
    port = free_port()  # nothing listens there
    policy = OpenAIPolicy(PolicySpec.parse(f"openai:http://127.0.0.1:{port}/v1#m"), Sampling(), max_retries=1)
    traj = run_episode(simple_task, policy, backend="bwrap")
    assert traj.exit_reason == "policy_error" and "APIConnectionError" in traj.error


@pytest.mark.parametrize("spec", ["openai:", "openai:http://x/v1", "openai:#m", "openai:localhost:8000#m"])
def test_bad_openai_specs_are_refused(spec):
    with pytest.raises(ValueError, match="openai:BASE_URL#MODEL|needs an argument"):
        PolicySpec.parse(spec)
