"""Per-row seeded sampling (touchstone.agent.policies.row_sampling) and the `hf:` policy's
first turns sampled together for a task's attempts: a seed fixes its sample alone or in a
batch, the attempts of a task are prefilled once, and a grouped rollout records what
ungrouped attempts record."""

from __future__ import annotations

import math

import pytest
import torch

from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import make_policy
from touchstone.agent.policies.row_sampling import RowSampler, _top_p
from touchstone.agent.policies.spec import PolicySpec
from touchstone.episode.trajectory import Sampling


@pytest.fixture(scope="module")
def checkpoint():
    from training.model_init import default_model

    return default_model()


def test_top_p_keeps_the_likeliest_tokens_that_reach_the_mass_and_never_none():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.9, 0.03, 0.02]]))
    kept = torch.isfinite(_top_p(logits, 0.75))
    assert kept.tolist() == [[True, True, False, False], [False, True, False, False]]
    assert torch.isfinite(_top_p(logits, 0.01)).sum(dim=1).tolist() == [1, 1]  # the likeliest always stays
    assert torch.equal(_top_p(logits, 1.0), logits)


def test_each_row_draws_from_its_own_seed_and_records_the_log_probability_it_drew_with():
    logits = torch.zeros(3, 50)  # uniform: any draw is equally likely, so only the seed decides
    sampling = Sampling(temperature=1.0)
    together = RowSampler([11, 12, 11], sampling)
    out = together(torch.zeros(3, 1, dtype=torch.long), logits)
    tokens = out.argmax(dim=-1).tolist()
    alone = RowSampler([12], sampling)(torch.zeros(1, 1, dtype=torch.long), logits[:1]).argmax(dim=-1).tolist()
    assert tokens[0] == tokens[2] and alone == [tokens[1]]  # a seed's draw, whatever its neighbours
    assert all(math.isclose(lp[0], math.log(1 / 50), rel_tol=1e-5) for lp in together.logprobs)
    assert torch.isinf(out).sum().item() == 3 * 49  # all the mass on the drawn token: greedy takes it
    greedy = RowSampler([0], Sampling(temperature=0))
    assert greedy(torch.zeros(1, 1, dtype=torch.long), torch.tensor([[0.0, 3.0, 1.0]])).argmax().item() == 1


def test_a_seed_samples_the_same_completion_alone_or_in_a_batch(checkpoint):
    policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=1.0, max_tokens=12))
    prompt = policy.tokenizer.encode("def add(a, b):\n    return", add_special_tokens=False)
    batch = policy._sample(prompt, [5, 6, 7])
    assert [row[0] for row in batch] != [batch[0][0]] * 3  # different seeds, different samples
    for seed, (completion, logprobs, cache) in zip([5, 6, 7], batch):
        alone, alone_logprobs, alone_cache = policy._sample(prompt, [seed])[0]
        assert completion == alone and len(logprobs) == len(completion)
        assert logprobs == pytest.approx(alone_logprobs, abs=1e-4)
        # each row's cache is its own conversation, cut to its own length
        assert cache.ids == alone_cache.ids == tuple(prompt + completion)[: len(prompt) + len(completion) - 1]
        assert cache.cache.get_seq_length() == len(cache.ids)


def test_a_tasks_attempts_share_one_first_prefill_and_record_what_ungrouped_attempts_do(simple_task, checkpoint):
    sampling = Sampling(temperature=1.0, top_p=0.95, max_tokens=16, seed=3)
    limits = EpisodeLimits(max_turns=2)
    spec = PolicySpec.parse(f"hf:{checkpoint}")
    grouped = make_policy(spec, sampling)
    grouped.group_attempts(3)
    fed: list[tuple[int, int]] = []  # (rows, tokens) of every forward pass
    hook = grouped.model.register_forward_pre_hook(
        lambda _m, _a, kw: fed.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        runs = [run_episode(simple_task, grouped, attempt=i, backend="bwrap", limits=limits) for i in range(3)]
    finally:
        hook.remove()
    assert all(len(r.turns) == 2 for r in runs), [(r.exit_reason, r.error) for r in runs]
    first = runs[0].turns[0]
    # one prefill of the first prompt (beyond the shared system message) for all three attempts, then
    # decoding three rows at once; the siblings' first turns were waiting for them
    prefills = [shape for shape in fed if shape[1] > 1]
    system = len(next(iter(grouped._system_caches)))
    assert prefills[:2] == [(1, system), (1, first.prompt_tokens - system - 1)]
    assert (3, 1) in fed and not grouped._first_turns
    ungrouped = make_policy(spec, sampling)
    for i, run in enumerate(runs):
        alone = run_episode(simple_task, ungrouped, attempt=i, backend="bwrap", limits=limits)
        assert [t.completion_ids for t in run.turns] == [t.completion_ids for t in alone.turns]
        assert run.trajectory_id == alone.trajectory_id


def test_later_turns_of_different_conversations_sample_in_one_batch_what_they_sample_alone(checkpoint):
    policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=1.0, max_tokens=10))
    encode = lambda text: policy.tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    # two conversations of different lengths, each with the KV cache of its first turn
    starts = [
        encode("def add(a, b):\n    return"),
        encode("# a longer first prompt\nclass Stack:\n    def push(self, x):"),
    ]
    firsts = [policy._sample(prompt, [seed])[0] for prompt, seed in zip(starts, (1, 2))]
    seconds = [
        prompt + completion + encode(tail)
        for prompt, (completion, _, _), tail in zip(starts, firsts, ("\nok", "\nthe test failed: try again\n"))
    ]
    requests = [(prompt, seed, cache) for prompt, seed, (_, _, cache) in zip(seconds, (31, 32), firsts)]
    batch = policy._sample_each(requests)
    for (prompt, seed, cache), (completion, logprobs, kv) in zip(requests, batch):
        alone, alone_logprobs, alone_kv = policy._sample(prompt, [seed], cache)[0]
        assert completion == alone and logprobs == pytest.approx(alone_logprobs, abs=1e-4)
        assert kv.ids == alone_kv.ids and kv.cache.get_seq_length() == len(kv.ids)  # no padding left in the cache
        for mine, theirs in zip(kv.cache.layers, alone_kv.cache.layers):
            assert torch.allclose(mine.keys, theirs.keys, atol=1e-4)
            assert torch.allclose(mine.values, theirs.values, atol=1e-4)


def test_concurrent_episodes_batch_their_later_turns_and_record_what_they_record_alone(simple_task, checkpoint):
    from concurrent.futures import ThreadPoolExecutor

    sampling = Sampling(temperature=1.0, top_p=0.95, max_tokens=16, seed=3)
    limits = EpisodeLimits(max_turns=3)
    spec = PolicySpec.parse(f"hf:{checkpoint}")
    together = make_policy(spec, sampling)
    together.group_attempts(2, concurrent=2)
    # wait for the other episode however slow the sandbox is here (the tiny model's turns take
    # milliseconds, so the policy's own wait, a share of that, would leave batching to chance)
    together.JOIN_WAIT_S, together.JOIN_WAIT_SHARE = 10.0, 1e6
    batches: list[int] = []
    sample_each = together._sample_each

    def recorded(requests):
        batches.append(len(requests))
        return sample_each(requests)

    together._sample_each = recorded
    with ThreadPoolExecutor(2) as pool:
        runs = list(
            pool.map(lambda i: run_episode(simple_task, together, attempt=i, backend="bwrap", limits=limits), range(2))
        )
    assert all(len(r.turns) == 3 for r in runs), [(r.exit_reason, r.error) for r in runs]
    assert 2 in batches  # the two episodes' later turns were sampled together
    alone = make_policy(spec, sampling)
    for i, run in enumerate(runs):
        single = run_episode(simple_task, alone, attempt=i, backend="bwrap", limits=limits)
        assert [t.completion_ids for t in run.turns] == [t.completion_ids for t in single.turns]


def test_a_batch_of_later_turns_that_fails_fails_every_turn_in_it(checkpoint):
    from concurrent.futures import ThreadPoolExecutor

    policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=1.0, max_tokens=4))
    policy.group_attempts(1, concurrent=2)
    policy.JOIN_WAIT_S, policy._last_decode_s = 10.0, 100.0  # the first turn to come waits for the other
    good = policy.tokenizer.encode("def add(a, b):", add_special_tokens=False)
    bad = good + [policy.model.config.vocab_size + 5]  # no such token: the batch's forward pass fails
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(policy.generate, prompt, 1) for prompt in (good, bad)]
        errors = [f.exception(timeout=60) for f in futures]
    assert all(isinstance(e, IndexError) for e in errors), errors  # both raise the batch's error
    policy.group_attempts(1, concurrent=1)
    assert policy.generate(good, 1)[0]  # and the policy goes on
