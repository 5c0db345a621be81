"""The hf policy end to end on the default tiny checkpoint (training/model_init.py):
token-in-token-out records that re-decode to the recorded messages."""

from __future__ import annotations

import json

import pytest
import torch

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import make_policy
from touchstone.agent.policies.hf import parse_completion, template_messages
from touchstone.episode.tools import TOOL_SCHEMAS
from touchstone.episode.trajectory import Sampling


@pytest.fixture(scope="module")
def checkpoint():
    from training.model_init import default_model

    return default_model()


def test_hf_episode_records_exact_tokens(simple_task, checkpoint):
    from touchstone.checkpoint import checkpoint_hash

    policy = make_policy(
        PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=1.0, top_p=0.95, max_tokens=24, seed=3)
    )
    traj = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=3))
    assert traj.exit_reason in ("max_turns", "submitted") and traj.checkpoint_hash == checkpoint_hash(checkpoint)
    tok = policy.tokenizer
    first_prompt = tok.apply_chat_template(
        template_messages(traj.messages[:2]), tools=TOOL_SCHEMAS, add_generation_prompt=True, tokenize=False
    )
    assert tok.decode(traj.turns[0].prompt_ids) == first_prompt
    assistants = [m for m in traj.messages if m["role"] == "assistant"]
    for turn, msg in zip(traj.turns, assistants):
        assert len(turn.logprobs) == len(turn.completion_ids) == turn.completion_tokens > 0
        assert all(lp <= 0 for lp in turn.logprobs)
        # the message is exactly what the tokens say
        assert parse_completion(tok, turn.completion_ids, turn.prompt_ids, TOOL_SCHEMAS, turn.turn) == msg
    for prev, nxt in zip(traj.turns, traj.turns[1:]):  # own tokens are never re-tokenized
        assert (
            nxt.prompt_ids[: len(prev.prompt_ids) + len(prev.completion_ids)] == prev.prompt_ids + prev.completion_ids
        )


def test_hf_sampling_is_seeded(simple_task, checkpoint):
    def completions(seed):
        policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=1.0, max_tokens=12, seed=seed))
        traj = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=1))
        return traj.turns[0].completion_ids

    assert completions(5) == completions(5) != completions(6)


def _parse(tok, text, turn=4):
    return parse_completion(tok, tok.encode(text, add_special_tokens=False), [], TOOL_SCHEMAS, turn)


def test_tool_calls_are_parsed_by_the_tokenizers_response_parser(checkpoint):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(checkpoint)
    msg = _parse(
        tok,
        'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call><|im_end|>',
    )
    assert msg["content"] == "Let me look."
    assert [c["function"] for c in msg["tool_calls"]] == [
        {"name": "bash", "arguments": json.dumps({"command": "ls"})},
        {"name": "submit", "arguments": "{}"},
    ]
    assert [c["id"] for c in msg["tool_calls"]] == ["call_4_0", "call_4_1"]
    assert _parse(tok, "just text<|im_end|>", 0) == {"role": "assistant", "content": "just text"}
    # A malformed call is kept (nameless, raw text) so the loop answers it with an error observation.
    bad = _parse(tok, '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"\n</tool_call>')
    assert (
        bad["tool_calls"][0]["function"]["name"] == ""
        and '"path": "a.py"' in bad["tool_calls"][0]["function"]["arguments"]
    )
    assert _parse(tok, '<tool_call>\n{"name": 3}\n</tool_call>')["tool_calls"][0]["function"]["name"] == ""


def test_a_tokenizer_without_response_parser_is_a_clear_error(checkpoint, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoint, ckpt)
    tok = AutoTokenizer.from_pretrained(ckpt)
    tok.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"  # a template nobody can parse
    tok.response_template = None
    tok.save_pretrained(ckpt)
    with pytest.raises(ValueError, match="no response template"):
        make_policy(PolicySpec.parse(f"hf:{ckpt}"))


def test_hf_spec_must_name_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="not a checkpoint directory"):
        make_policy(PolicySpec.parse(f"hf:{tmp_path}"))


def test_turns_sampled_at_a_state_are_seeded_and_rendered_as_an_episode_renders_them(simple_task, checkpoint):
    greedy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=0, max_tokens=16))
    traj = run_episode(simple_task, greedy, backend="bwrap", limits=EpisodeLimits(max_turns=1))
    at_start = greedy.sample_turns(traj.messages[:2], TOOL_SCHEMAS, 2, seed=0)
    assert at_start == [traj.messages[2]] * 2  # the state the episode saw, the turn it took
    policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=1.0, max_tokens=16))
    first = policy.sample_turns(traj.messages[:2], TOOL_SCHEMAS, 4, seed=7)
    assert len(first) == 4 and all(m["role"] == "assistant" for m in first)
    assert policy.sample_turns(traj.messages[:2], TOOL_SCHEMAS, 4, seed=7) == first
    assert policy.sample_turns(traj.messages[:2], TOOL_SCHEMAS, 4, seed=8) != first


def test_a_context_window_keeps_the_conversations_latest_tokens(simple_task, checkpoint):
    sampling = Sampling(temperature=0, max_tokens=16, context_window=128)
    policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), sampling)
    traj = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=2))
    tok = policy.tokenizer
    whole = tok.apply_chat_template(
        template_messages(traj.messages[:2]), tools=TOOL_SCHEMAS, add_generation_prompt=True, tokenize=False
    )
    whole_ids = tok.encode(whole, add_special_tokens=False)
    assert len(whole_ids) > 128  # the system prompt and tools alone do not fit
    assert traj.turns[0].prompt_ids == whole_ids[-112:]  # 128 less the completion's 16
    assert all(t.prompt_tokens == len(t.prompt_ids) <= 112 for t in traj.turns)
    # the matched-state sampler sees the same window the episode saw
    assert policy.sample_turns(traj.messages[:2], TOOL_SCHEMAS, 1, seed=0) == [traj.messages[2]]


def test_reused_kv_caches_sample_what_a_fresh_prefill_samples(simple_task, checkpoint):
    """An episode feeds only its new tokens each turn (its own cache, the shared system message's
    on turn 0): greedy, every turn's completion is the one a full prefill of its prompt gives."""
    policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), Sampling(temperature=0.0, max_tokens=16, seed=1))
    traj = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=3))
    assert len(traj.turns) >= 2 and len(policy._system_caches) == 1
    for turn in traj.turns:  # transformers' own greedy decoding of the whole prompt, no cache given
        ids = torch.tensor([turn.prompt_ids])
        fresh = policy.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=16,
                                      eos_token_id=policy.eos_id, pad_token_id=policy.tokenizer.pad_token_id)  # fmt: skip
        assert fresh[0, len(turn.prompt_ids) :].tolist() == turn.completion_ids
    # and the caches are used: what the model is fed first in each turn is only what no cache holds
    fed = []
    hook = policy.model.register_forward_pre_hook(
        lambda _m, _a, kw: fed.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        again = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=3))
    finally:
        hook.remove()
    system = len(next(iter(policy._system_caches)))
    first, second = again.turns[0], again.turns[1]
    # a turn feeds its prompt less the last token (prefill), then the last token, then each sampled token
    # but the last; turn 1 on the system message's cache, turn 2 on its own conversation's
    c = len(first.completion_ids)
    assert fed[0] + fed[1] == first.prompt_tokens - system and fed[1] == 1
    assert fed[c + 1] + fed[c + 2] == second.prompt_tokens - first.prompt_tokens - c + 1 and fed[c + 2] == 1


def test_hf_policy_samples_in_the_precision_it_is_given_and_records_it(simple_task, checkpoint, tmp_path):
    from touchstone.episode.trajectory import read_tables, write_tables

    sampling = Sampling(temperature=1.0, max_tokens=12, seed=5, dtype="bfloat16")
    policy = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), sampling)
    assert {p.dtype for p in policy.model.parameters()} == {torch.bfloat16}  # the checkpoint's own is float32
    traj = run_episode(simple_task, policy, backend="bwrap", limits=EpisodeLimits(max_turns=2))
    turn = traj.turns[0]
    assert len(turn.logprobs) == len(turn.completion_ids) > 0 and all(-1e9 < lp <= 0 for lp in turn.logprobs)
    write_tables([traj], tmp_path)
    assert read_tables(tmp_path)[0].sampling.dtype == "bfloat16"  # provenance: a seed samples differently per dtype
    float32 = make_policy(PolicySpec.parse(f"hf:{checkpoint}"), sampling.model_copy(update={"dtype": "float32"}))
    assert {p.dtype for p in float32.model.parameters()} == {torch.float32}


def test_auto_precision_is_bfloat16_only_where_the_machine_computes_it_natively():
    from touchstone.episode.precision import native_bfloat16

    xeon = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    epyc = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni\n"
    assert native_bfloat16(xeon, cuda=False) and not native_bfloat16(epyc, cuda=False)
    assert native_bfloat16(epyc, cuda=True) and not native_bfloat16("", cuda=False)
    # a Sampling resolves "auto" when it is made: every record names the precision it sampled in
    resolved = Sampling(dtype="auto").dtype
    assert resolved == ("bfloat16" if native_bfloat16() else "float32")
    assert Sampling.model_validate(Sampling(dtype="auto").model_dump()).dtype == resolved
