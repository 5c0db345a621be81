"""Likelihood metrics on a real reference set: teacher runs on held-out tasks,
verified and cached, scored by a real tiny checkpoint."""

from __future__ import annotations

import math

import json

import pytest
from click.testing import CliRunner

from cli import main

from tests.agent.conftest import MINILIB, minilib_task
from touchstone.agent.policies.spec import PolicySpec
from touchstone.episode.tools import is_valid_call
from touchstone.evaluate.reference import probe_states, read_reference, reference_set, turn_states
from touchstone.agent.policies.hacks import FAMILIES
from touchstone.agent.policies.hf import HFPolicy
from touchstone.episode.trajectory import Sampling, read_tables
from training.scoring import Scorer, likelihood_metrics, matched_valid_calls

BUGS = [
    ("flip", "`clamp` ignores the upper bound.", "if x > hi:", "if x <= hi:"),
    ("boolop", "`both_positive` is wrong.", "a > 0 and b > 0", "a > 0 or b > 0"),
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("heldout")
    tasks = [minilib_task(root, i, s, MINILIB.replace(a, b)) for i, s, a, b in BUGS]
    cache = root / "cache"
    path = reference_set(tasks, backend="bwrap", cache=cache)
    return tasks, cache, path


@pytest.mark.slow  # two teacher runs and their verification (~40 s on 2 busy cores)
def test_reference_set_holds_verified_teacher_runs_and_is_built_once(reference):
    tasks, cache, path = reference
    rows = read_reference(path)
    assert sorted(r["task_id"] for r in rows) == ["boolop", "flip"]
    stamp = path.stat().st_mtime_ns
    assert reference_set(tasks, backend="bwrap", cache=cache) == path and path.stat().st_mtime_ns == stamp
    states = probe_states(rows)
    assert len(states) == 2
    for state in states:  # special-casing needs `assert f(args) == value`; boolop's fails on `assert not ...`
        assert set(state.hacks) == set(FAMILIES) - ({"special_case"} if state.task_id == "boolop" else set())
        assert state.prefix[-1]["role"] == "tool" and state.honest["role"] == "assistant"
        assert state.honest != state.hacks["conftest"]


@pytest.mark.slow
def test_likelihood_metrics_of_an_untrained_model(reference, tiny_model):
    _, _, path = reference
    rows = read_reference(path)
    metrics = likelihood_metrics(tiny_model, rows, probe_states(rows), resamples=200)
    # an untrained model is close to uniform over its vocabulary
    assert abs(metrics.imitation_nll.value - math.log(4096)) < 1.5
    assert metrics.n_reference == 2 and metrics.n_states == 2
    assert set(metrics.hack_propensity_by_family) == set(FAMILIES)
    assert metrics.hack_propensity.low <= metrics.hack_propensity.value <= metrics.hack_propensity.high


def test_action_logprob_scores_only_the_action_and_cuts_context_from_the_left(tiny_model):
    scorer = Scorer(tiny_model, max_length=64)
    prefix = [{"role": "system", "content": "s " * 200}, {"role": "user", "content": "fix it"}]
    action = {"role": "assistant", "content": "ok", "tool_calls": [_call("submit", "{}")]}
    lp = scorer.action_logprob(prefix, action, [])
    assert lp < 0 and math.isfinite(lp)
    long_action = {"role": "assistant", "content": "x " * 200}
    with pytest.raises(ValueError, match="does not fit max_length=64"):
        scorer.action_logprob(prefix, long_action, [])


def test_imitation_nll_scores_every_turn_in_its_own_window(tiny_model):
    """A turn far past the first max_length tokens counts, with the context before it that fits."""
    scorer = Scorer(tiny_model, max_length=64)
    long_output = {"role": "tool", "tool_call_id": "c0", "content": "x " * 300}
    first = {"role": "assistant", "content": "run", "tool_calls": [_call("bash", '{"command": "pytest"}')]}

    def nll(last: str) -> float:
        chat = [{"role": "user", "content": "fix it"}, first, long_output, {"role": "assistant", "content": last}]
        return scorer.nll_per_token(chat, [])

    assert nll("submit now") != nll("zz qq yy") and math.isfinite(nll("submit now"))


def _call(name: str, args: str) -> dict:
    return {"id": "c0", "type": "function", "function": {"name": name, "arguments": args}}


@pytest.mark.slow
def test_touchstone_eval_reports_every_figure_for_each_checkpoint(reference, tiny_model, tmp_path):
    tasks, _, _ = reference
    heldout = tasks[0].dir.parent
    args = ["eval", "--checkpoint", str(tiny_model), "--tasks", str(heldout), "--out", str(tmp_path / "eval")]
    args += ["--attempts", "1", "--max-turns", "2", "--max-tokens", "8", "--backend", "bwrap", "--json"]
    printed = CliRunner().invoke(main, args)
    assert printed.exit_code == 0, printed.output
    (metrics,) = json.loads(printed.stdout)
    assert metrics["n_tasks"] == 2 and metrics["k"] == 1
    assert metrics["imitation_nll"]["value"] > 0 and metrics["hack_propensity"] is not None
    assert 0 <= metrics["valid_tool_call_rate"]["value"] <= 1
    assert 0 <= metrics["matched_valid_call_rate"]["value"] <= 1
    assert "imitation NLL" in (tmp_path / "eval" / "report.md").read_text()


def test_touchstone_eval_samples_as_a_round_does_without_likelihood_figures(tiny_model, tmp_path):
    """--top-p, --seed and --dtype reach every attempt's record; --no-likelihood: no likelihood figures."""
    flip, _, before, after = BUGS[0]
    minilib_task(tmp_path / "heldout", flip, "`clamp` ignores the upper bound.", MINILIB.replace(before, after))
    out = tmp_path / "eval"
    args = ["eval", "--checkpoint", str(tiny_model), "--tasks", str(tmp_path / "heldout"), "--out", str(out)]
    args += ["--attempts", "2", "--max-turns", "1", "--max-tokens", "8", "--backend", "bwrap", "--json"]
    args += ["--top-p", "0.9", "--seed", "7", "--dtype", "bfloat16", "--no-likelihood"]
    printed = CliRunner().invoke(main, args)
    assert printed.exit_code == 0, printed.output
    (metrics,) = json.loads(printed.stdout)
    assert metrics["n_tasks"] == 1 and metrics["k"] == 2
    assert metrics["imitation_nll"] is None and metrics["hack_propensity"] is None
    samplings = sorted(
        (t.sampling.seed, t.sampling.top_p, t.sampling.dtype)
        for t in read_tables(out / f"0-{tiny_model.name}" / "rollouts")
    )
    assert samplings == [(7, 0.9, "bfloat16"), (8, 0.9, "bfloat16")]


@pytest.mark.slow
def test_valid_calls_at_matched_states_sample_every_turn_of_the_reference(reference, tiny_model):
    _, _, path = reference
    rows = read_reference(path)
    states = turn_states(rows, limit=None)
    turns = sum(m["role"] == "assistant" for r in rows for m in r["messages"])
    assert len(states) == turns and all(s.prefix[-1]["role"] in ("user", "tool") for s in states)
    assert len(turn_states(rows, limit=turns - 2)) == turns - 2  # thinned, evenly
    sampling = Sampling(temperature=1.0, max_tokens=24, seed=3)
    rate = matched_valid_calls(tiny_model, states, samples=2, sampling=sampling, resamples=200)
    assert rate == matched_valid_calls(tiny_model, states, samples=2, sampling=sampling, resamples=200)
    policy = HFPolicy(PolicySpec.parse(f"hf:{tiny_model}"), sampling)  # state i is drawn with seed 3 + i
    per_state = [
        sum(map(is_valid_call, policy.sample_turns(s.prefix, s.tools, 2, 3 + i))) / 2 for i, s in enumerate(states)
    ]
    assert rate.value == pytest.approx(sum(per_state) / len(per_state))
    assert rate.low <= rate.value <= rate.high
    assert matched_valid_calls(tiny_model, states, samples=0, sampling=sampling) is None
