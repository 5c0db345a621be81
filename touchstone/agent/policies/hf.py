"""The `hf:PATH` policy: a local transformers checkpoint, token in, token out.

The prompt of every turn is built from exact token ids: the previous turn's
prompt ids + the ids the model actually sampled + the tokens of the new
observation messages (rendered by the chat template as a text delta). The
model's own tokens are therefore never re-tokenized, and `prompt_ids`,
`completion_ids` and `logprobs` recorded per turn are exactly what RL needs.
With `Sampling.context_window` set, a prompt keeps its latest tokens that fit
(`prompt_ids` records what the model saw), as the trainer's windows did.
Tool calls are parsed by the tokenizer's response parser (transformers
`parse_response`), so any chat model with tool calling runs as `hf:`.

Prefill is most of a turn's cost on a CPU (a 600-token system prompt with the tool schemas,
then the whole conversation again every turn), so nothing is prefilled twice: an episode keeps
the KV cache of its conversation and feeds only the new observation tokens next turn, and the
policy keeps the KV cache of each system message it has seen (every episode of a run shares
it). A text-protocol model stops at the end of its tool call instead of running to the token
limit. Reuse changes only where the arithmetic happens (chunked prefill), not what is sampled.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass
from typing import Any

from touchstone.agent.policies import Episode, Policy, PolicyError, PolicyTurn
from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.protocol import CALL_END, parse_reply, shown_functions, speaks_text_protocol
from touchstone.checkpoint import checkpoint_hash
from touchstone.episode.trajectory import Sampling


def parse_completion(
    tokenizer,
    completion: list[int],
    prompt: list[int],
    tools: list[dict[str, Any]],
    turn: int,
    messages: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The assistant message the generated ids say, read by the tokenizer's own
    response parser (transformers `parse_response`, with the prompt as prefix
    and the tools' schemas): any chat model with a response template works.
    Ids the parser cannot read (a malformed tool call) still become a call —
    nameless, the decoded text as its arguments — so the loop records an error
    observation instead of silently dropping the attempt. A checkpoint whose chat template
    speaks the text tool protocol (SmolLM2 and other templates without tools) is read by that
    protocol's parser instead (`touchstone.agent.protocol`; `messages`, the conversation so far,
    says which functions a ```python block may redefine as an edit)."""
    if speaks_text_protocol(tokenizer):
        return parse_reply(
            tokenizer.decode(completion, skip_special_tokens=True), turn, shown_functions(messages or [])
        )
    try:
        parsed = tokenizer.parse_response(completion, prefix=prompt, tools=tools) or {}
    except (ValueError, TypeError):
        text = tokenizer.decode(completion, skip_special_tokens=True)
        parsed = {"content": "", "tool_calls": [{"function": {"name": "", "arguments": text}}]}
    content = str(parsed.get("content") or "")
    if tokenizer.eos_token:
        content = content.removesuffix(tokenizer.eos_token)
    message: dict[str, Any] = {"role": "assistant", "content": content.strip()}
    calls = []
    for i, call in enumerate(parsed.get("tool_calls") or []):
        fn = call.get("function") if isinstance(call, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        name, args = fn.get("name"), fn.get("arguments", {})
        calls.append(
            {
                "id": f"call_{turn}_{i}",
                "type": "function",
                "function": {
                    "name": name if isinstance(name, str) else "",
                    "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                },
            }
        )
    if calls:
        message["tool_calls"] = calls
    return message


def ensure_response_parser(tokenizer, where: str) -> None:
    """The tokenizer's shipped response template, or TRL's for the chat
    templates it knows, or the text tool protocol; otherwise a clear error naming what is missing."""
    if speaks_text_protocol(tokenizer):
        return
    if getattr(tokenizer, "response_template", None) or getattr(tokenizer, "response_schema", None):
        return
    from trl.chat_template_utils import add_response_schema

    try:
        add_response_schema(tokenizer)
    except ValueError:
        raise ValueError(
            f"{where}: the tokenizer has no response template for its chat template, so tool calls "
            "cannot be parsed; set `response_template` in its tokenizer_config.json"
        ) from None


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them: tool-call arguments as objects
    (templates JSON-encode them), kept as the raw string when not valid JSON."""
    out = []
    for msg in messages:
        if msg.get("tool_calls"):
            msg = dict(msg)
            calls = []
            for call in msg["tool_calls"]:
                try:
                    args: Any = json.loads(call["function"]["arguments"])
                except json.JSONDecodeError:
                    args = call["function"]["arguments"]
                calls.append({**call, "function": {**call["function"], "arguments": args}})
            msg["tool_calls"] = calls
        out.append(msg)
    return out


@dataclass(frozen=True)
class KVPrefix:
    """A KV cache and the exact token ids it was computed on."""

    ids: tuple[int, ...]
    cache: Any  # transformers DynamicCache; never mutated once stored (generate gets a copy)

    def covers(self, prompt: list[int]) -> bool:
        """Whether it is a strict prefix of `prompt` (at least one token left to feed)."""
        return len(self.ids) < len(prompt) and tuple(prompt[: len(self.ids)]) == self.ids


class _HFEpisode(Episode):
    def __init__(self, policy: "HFPolicy", seed: int):
        self.policy = policy
        self.seed = seed
        self.turn = 0
        self.ids: list[int] | None = None  # exact ids of the conversation so far
        self.rendered_upto = 0  # number of messages covered by `ids`
        self.cache: KVPrefix | None = None  # the KV cache of the conversation so far

    def _render(self, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
        return self.policy.tokenizer.apply_chat_template(
            template_messages(messages),
            tools=self.tools,
            add_generation_prompt=generation_prompt,
            tokenize=False,
        )

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        tok = self.policy.tokenizer
        full = self._render(messages, True)
        if self.ids is not None:
            before = self._render(messages[: self.rendered_upto], False)
            _, eos, tail = before.rpartition(self.policy.eos_text)
            if full.startswith(before) and eos and not tail.strip():  # the turn ended with end-of-turn + whitespace
                ids = list(self.ids)
                if not ids or ids[-1] != self.policy.eos_id:
                    ids.append(self.policy.eos_id)  # the model was cut off by max_tokens
                return ids + tok.encode(tail + full[len(before) :], add_special_tokens=False)
        return tok.encode(full, add_special_tokens=False)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        self.tools = tools
        prompt = self.policy.windowed(self.prompt_ids(messages))
        try:
            completion, logprobs, self.cache = self.policy.generate(prompt, self.seed * 100003 + self.turn, self.cache)
        except (RuntimeError, ValueError) as exc:
            raise PolicyError(f"generation failed: {exc}") from exc
        message = parse_completion(self.policy.tokenizer, completion, prompt, tools, self.turn, messages)
        stopped = bool(completion) and (completion[-1] == self.policy.eos_id or self.policy.ends_call(completion))
        self.ids = prompt + completion
        self.rendered_upto = len(messages) + 1
        self.turn += 1
        return PolicyTurn(
            message=message,
            prompt_ids=prompt,
            completion_ids=completion,
            logprobs=logprobs,
            prompt_tokens=len(prompt),
            completion_tokens=len(completion),
            finish_reason="stop" if stopped else "length",
        )


class HFPolicy(Policy):
    """One model shared by concurrent episodes; generation is serialized by a
    lock (so that the per-turn seed fully determines the sample)."""

    def __init__(self, spec: PolicySpec, sampling: Sampling):
        super().__init__(spec, sampling)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = spec.path
        if not (path / "config.json").is_file():
            raise ValueError(f"policy spec {str(spec)!r}: {path} is not a checkpoint directory (no config.json)")
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path).to(self.device).eval()
        self.checkpoint_hash = checkpoint_hash(path)
        ensure_response_parser(self.tokenizer, str(path))
        # The end-of-turn token: the model's own generation config says which it stops on.
        eos = self.model.generation_config.eos_token_id
        self.eos_id = (eos[0] if isinstance(eos, list) else eos) if eos is not None else self.tokenizer.eos_token_id
        if self.eos_id is None:
            raise ValueError(f"{path}: neither the generation config nor the tokenizer names an end-of-turn token")
        self.eos_text = self.tokenizer.convert_ids_to_tokens(self.eos_id)
        # A text-protocol reply is complete at the end of its tool call: stop there.
        self.stop_strings = [CALL_END] if speaks_text_protocol(self.tokenizer) else None
        self._system_caches: dict[tuple[int, ...], KVPrefix] = {}
        self._lock = threading.RLock()  # generate holds it around _generate: one model call at a time

    def ends_call(self, completion: list[int]) -> bool:
        return bool(self.stop_strings) and self.tokenizer.decode(completion[-8:]).rstrip().endswith(CALL_END)

    def episode(self, seed: int, max_turns: int) -> Episode:
        return _HFEpisode(self, seed)

    def sample_turns(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], n: int, seed: int
    ) -> list[dict]:
        """`n` assistant messages sampled at one conversation state in one batch (the
        matched-state evaluation): the same state and seed give the same samples."""
        text = self.tokenizer.apply_chat_template(
            template_messages(messages), tools=tools, add_generation_prompt=True, tokenize=False
        )
        prompt = self.windowed(self.tokenizer.encode(text, add_special_tokens=False))
        greedy = self.sampling.temperature <= 0  # one draw, n times: generate refuses several greedy sequences
        out = self._generate(prompt, seed, num_return_sequences=1 if greedy else n)
        rows = [row[len(prompt) :] for row in out.tolist()] * (n if greedy else 1)
        ends = [row.index(self.eos_id) + 1 if self.eos_id in row else len(row) for row in rows]  # then padding
        return [parse_completion(self.tokenizer, row[:end], prompt, tools, 0, messages) for row, end in zip(rows, ends)]

    def windowed(self, prompt: list[int]) -> list[int]:
        """The prompt's latest tokens that fit the sampling's context window (all when
        it has none): what the model was trained to act on (Sampling.context_window)."""
        keep = self.sampling.prompt_window()
        return prompt if keep is None else prompt[-keep:]

    def generate(
        self, prompt: list[int], seed: int, cache: KVPrefix | None = None
    ) -> tuple[list[int], list[float], KVPrefix]:
        """Sample a completion; returns its ids, the log probability of each sampled token
        under the distribution it was sampled from, and the KV cache of prompt + completion
        (pass it back with the next turn's prompt: only the tokens it lacks are prefilled)."""
        import torch

        with self._lock:
            start = self._reusable(prompt, cache)
            out = self._generate(
                prompt, seed, output_scores=True, return_dict_in_generate=True, stop_strings=self.stop_strings,
                tokenizer=self.tokenizer if self.stop_strings else None,
                cache=copy.deepcopy(start.cache) if start else None,
            )  # fmt: skip
        completion = out.sequences[0, len(prompt) :].tolist()
        logprobs = [
            torch.log_softmax(score[0].float(), dim=-1)[token].item() for score, token in zip(out.scores, completion)
        ]
        # The cache holds every token but the last sampled one (never fed back).
        return completion, logprobs, KVPrefix(tuple(prompt + completion)[: out.cache.get_seq_length()], out.cache)

    def _reusable(self, prompt: list[int], cache: KVPrefix | None) -> KVPrefix | None:
        """The longest cached prefix of `prompt`: the episode's own conversation, else the
        system message's (computed once per distinct system message). Called under the lock."""
        if cache is not None and cache.covers(prompt):
            return cache
        end = prompt.index(self.eos_id) + 1 if self.eos_id in prompt else 0
        system = tuple(prompt[:end])
        if not system or end >= len(prompt):
            return None
        if system not in self._system_caches:
            import torch

            with torch.no_grad():
                out = self.model(torch.tensor([system], device=self.device), use_cache=True, logits_to_keep=1)
            self._system_caches[system] = KVPrefix(system, out.cache)
        return self._system_caches[system]

    def _generate(self, prompt: list[int], seed: int, **options: Any) -> Any:
        """`model.generate` on one prompt with this policy's sampling, seeded, one call at a time."""
        import torch
        from transformers import set_seed

        s = self.sampling
        greedy = s.temperature <= 0
        with self._lock, torch.no_grad():
            set_seed(seed)
            return self.model.generate(
                torch.tensor([prompt], device=self.device),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long, device=self.device),
                do_sample=not greedy,
                temperature=None if greedy else s.temperature,
                top_p=None if greedy else s.top_p,
                top_k=None,
                max_new_tokens=s.max_tokens,
                eos_token_id=self.eos_id,
                pad_token_id=self.tokenizer.pad_token_id,
                **options,
            )
