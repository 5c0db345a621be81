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
The k attempts of a task share their first prompt: their first turns are one prefill and one
batch of k rows, each row drawing from its own seed (`row_sampling`), so batching changes
nothing an attempt samples either (up to the float rounding of batched arithmetic). Later turns
of episodes that run at once (rollout workers) are sampled together too: each row prefilled on
its own conversation's cache, the caches left-padded into one batch (`_sample_each`).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from touchstone.agent.policies import Episode, Policy, PolicyError, PolicyTurn
from touchstone.agent.policies.row_sampling import RowSampler
from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.protocol import CALL_END, parse_reply, shown_functions, speaks_text_protocol
from touchstone.checkpoint import checkpoint_hash
from touchstone.episode.trajectory import Sampling, turn_seed


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


@dataclass
class _TurnRequest:
    """A later turn waiting to be sampled with the other episodes' (`HFPolicy.generate`)."""

    prompt: list[int]
    seed: int
    cache: KVPrefix | None
    result: tuple[list[int], list[float], KVPrefix] | Exception | None = field(default=None)

    def outcome(self) -> tuple[list[int], list[float], KVPrefix]:
        if isinstance(self.result, Exception):
            raise self.result
        assert self.result is not None  # set under the policy's lock before any reader gets it
        return self.result


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
            if self.turn == 0:  # the same prompt as the task's other attempts: sampled with them
                completion, logprobs, self.cache = self.policy.first_turn(prompt, self.seed, self.cache)
            else:
                completion, logprobs, self.cache = self.policy.generate(
                    prompt, turn_seed(self.seed, self.turn), self.cache
                )
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
    lock. Each sampled row draws from its own seed (`row_sampling`), so a seed
    fixes its sample whether it was drawn alone or in a batch. The attempts of a
    task share their first prompt: their first turns are sampled together, one
    prefill and one batch (`group_attempts`); the later turns of concurrent episodes
    are sampled in one batch with whichever others asked meanwhile (`generate`)."""

    # how long a later turn waits at most for the other concurrent episodes' turns to join its
    # batch (they come back from the sandbox within this on a one-site task), and at most this
    # share of the last generation's time, so a lone episode or a fast model loses little
    JOIN_WAIT_S = 0.3
    JOIN_WAIT_SHARE = 0.1

    def __init__(self, spec: PolicySpec, sampling: Sampling):
        super().__init__(spec, sampling)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = spec.path
        if not (path / "config.json").is_file():
            raise ValueError(f"policy spec {str(spec)!r}: {path} is not a checkpoint directory (no config.json)")
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        dtype = getattr(torch, sampling.dtype)  # the sampling precision (Sampling.dtype), not the checkpoint's
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(self.device).eval()
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
        self._lock = threading.RLock()  # one model call at a time
        self._attempts = 1  # attempts per task that share their first prompt (group_attempts)
        self._concurrent = 1  # episodes acting at once (group_attempts): later turns batch up to this
        self._queued = threading.Condition()  # guards _queue
        self._queue: list[_TurnRequest] = []  # later turns not yet sampled
        self._last_decode_s = 0.0  # how long the last generation took (_decode)
        # first turns sampled with a sibling attempt, waiting for that attempt: (prompt, episode seed) -> sample
        self._first_turns: dict[tuple[tuple[int, ...], int], tuple[list[int], list[float], KVPrefix]] = {}

    def ends_call(self, completion: list[int]) -> bool:
        return bool(self.stop_strings) and self.tokenizer.decode(completion[-8:]).rstrip().endswith(CALL_END)

    def episode(self, seed: int, max_turns: int) -> Episode:
        return _HFEpisode(self, seed)

    def group_attempts(self, attempts: int, concurrent: int = 1) -> None:
        self._attempts, self._concurrent = attempts, concurrent

    def first_turn(
        self, prompt: list[int], seed: int, cache: KVPrefix | None = None
    ) -> tuple[list[int], list[float], KVPrefix]:
        """Turn 0 of the attempt seeded `seed`: with `group_attempts(k)`, the first turns of
        all k attempts at this prompt are sampled in one batch (each from its own turn seed,
        so what an attempt samples does not depend on whether or when its siblings run), and
        kept for the siblings to collect. An attempt whose siblings never come (a resumed run
        that already has them) only costs the memory of their samples, up to a bound."""
        seeds = [self.sampling.attempt_seed(i) for i in range(self._attempts)]
        if len(seeds) < 2 or seed not in seeds:
            return self.generate(prompt, turn_seed(seed, 0), cache)
        key = (tuple(prompt), seed)
        with self._lock:
            if key not in self._first_turns:
                rows = self._sample(prompt, [turn_seed(s, 0) for s in seeds], cache)
                self._first_turns.update({(key[0], s): row for s, row in zip(seeds, rows)})
                while len(self._first_turns) > 4 * len(seeds):  # oldest first: dicts keep insertion order
                    self._first_turns.pop(next(iter(self._first_turns)))
            return self._first_turns.pop(key)

    def sample_turns(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], n: int, seed: int
    ) -> list[dict]:
        """`n` assistant messages sampled at one conversation state in one batch (the
        matched-state evaluation): the same state and seed give the same samples."""
        text = self.tokenizer.apply_chat_template(
            template_messages(messages), tools=tools, add_generation_prompt=True, tokenize=False
        )
        prompt = self.windowed(self.tokenizer.encode(text, add_special_tokens=False))
        greedy = self.sampling.temperature <= 0  # one draw, n times
        rows = self._sample(prompt, [turn_seed(seed, i) for i in range(1 if greedy else n)])
        return [parse_completion(self.tokenizer, row[0], prompt, tools, 0, messages) for row in rows] * (
            n if greedy else 1
        )

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
        (pass it back with the next turn's prompt: only the tokens it lacks are prefilled).
        With concurrent episodes the request joins a queue; whoever gets the model next
        samples every queued request in one batch (waiting a little for the other episodes:
        JOIN_WAIT_S, JOIN_WAIT_SHARE), so each caller finds its result done or serves the queue
        itself."""
        if self._concurrent < 2:
            return self._sample(prompt, [seed], cache)[0]
        request = _TurnRequest(prompt, seed, cache)
        with self._queued:
            self._queue.append(request)
            self._queued.notify_all()
        with self._lock:
            if request.result is None:
                self._serve_queue()
        return request.outcome()

    def _serve_queue(self) -> None:
        """Sample every queued later turn in one batch. Called under the lock."""
        wait = min(self.JOIN_WAIT_S, self.JOIN_WAIT_SHARE * self._last_decode_s)
        with self._queued:
            self._queued.wait_for(lambda: len(self._queue) >= self._concurrent, timeout=wait)
            batch, self._queue = self._queue, []
        try:
            rows: list = self._sample_each([(r.prompt, r.seed, r.cache) for r in batch])
        except Exception as exc:  # noqa: BLE001 - every waiting episode's turn failed with it; each raises it
            rows = [exc] * len(batch)
        for request, row in zip(batch, rows):
            request.result = row

    def _sample(
        self, prompt: list[int], seeds: list[int], cache: KVPrefix | None = None
    ) -> list[tuple[list[int], list[float], KVPrefix]]:
        """One completion of `prompt` per seed, in one batch after one prefill: `generate`'s
        triple for each row (the rows' caches cut to their own lengths)."""
        import torch

        n = len(seeds)
        with self._lock, torch.no_grad():
            past = self._prefilled(prompt, cache)
            if past is not None and n > 1:
                past.batch_repeat_interleave(n)
            return self._decode([prompt] * n, [0] * n, seeds, past)

    def _sample_each(
        self, requests: list[tuple[list[int], int, KVPrefix | None]]
    ) -> list[tuple[list[int], list[float], KVPrefix]]:
        """One completion per (prompt, seed, cache), in one batch: each prompt prefilled on its
        own cache, the caches left-padded to the longest (padding masked out, positions counted
        from each row's first real token, so a row computes what it computes alone)."""
        import torch

        if len(requests) == 1 or any(len(prompt) < 2 for prompt, _, _ in requests):
            return [self._sample(prompt, [seed], cache)[0] for prompt, seed, cache in requests]
        with self._lock, torch.no_grad():
            pasts = [self._prefilled(prompt, cache) for prompt, _, cache in requests]
            width = max(len(prompt) for prompt, _, _ in requests)
            pads = [width - len(prompt) for prompt, _, _ in requests]
            layers = [past.layers for past in pasts]
            for i, layer in enumerate(layers[0]):  # the first row's cache becomes the batch's
                for name in ("keys", "values"):
                    rows = [getattr(row[i], name) for row in layers]
                    padded = [torch.nn.functional.pad(t, (0, 0, pad, 0)) for t, pad in zip(rows, pads)]
                    setattr(layer, name, torch.cat(padded))
            return self._decode([p for p, _, _ in requests], pads, [seed for _, seed, _ in requests], pasts[0])

    def _decode(
        self, prompts: list[list[int]], pads: list[int], seeds: list[int], past: Any
    ) -> list[tuple[list[int], list[float], KVPrefix]]:
        """Sample one completion per row of `prompts` (left-padded by `pads` to one width),
        `past` holding the KV cache of every row but its last token. Called under the lock."""
        import torch
        from transformers import LogitsProcessorList

        s, n = self.sampling, len(prompts)
        sampler = RowSampler(seeds, s, self.device)
        ids = [[self.eos_id] * pad + prompt for prompt, pad in zip(prompts, pads)]
        mask = [[0] * pad + [1] * len(prompt) for prompt, pad in zip(prompts, pads)]
        width, start = len(ids[0]), time.perf_counter()
        out = self.model.generate(
            torch.tensor(ids, device=self.device), attention_mask=torch.tensor(mask, device=self.device),
            cache=past, do_sample=False, temperature=None, top_p=None, top_k=None,
            logits_processor=LogitsProcessorList([sampler]), max_new_tokens=s.max_tokens,
            eos_token_id=self.eos_id, pad_token_id=self.tokenizer.pad_token_id, return_dict_in_generate=True,
            stop_strings=self.stop_strings, tokenizer=self.tokenizer if self.stop_strings else None,
        )  # fmt: skip
        self._last_decode_s = time.perf_counter() - start
        rows = []
        for i, (row, prompt, pad) in enumerate(zip(out.sequences[:, width:].tolist(), prompts, pads)):
            completion = row[: self._row_end(row)]
            kept = len(prompt) + len(completion) - 1  # the cache holds all but the last sampled token
            row_cache = out.cache if n == 1 else copy.deepcopy(out.cache)
            if n > 1:
                row_cache.batch_select_indices(torch.tensor([i], device=self.device))
            if pad:
                for layer in row_cache.layers:  # the row's own positions only
                    layer.keys, layer.values = layer.keys[:, :, pad:], layer.values[:, :, pad:]
            if row_cache.get_seq_length() > kept:  # transformers 5: a negative count drops that many tokens
                row_cache.crop(kept - row_cache.get_seq_length())
            rows.append(
                (
                    completion,
                    sampler.logprobs[i][: len(completion)],
                    KVPrefix(tuple(prompt + completion)[:kept], row_cache),
                )
            )
        return rows

    def _row_end(self, row: list[int]) -> int:
        """Where a batch row's completion ends (generation pads a finished row while others go on)."""
        for j, token in enumerate(row):
            if token == self.eos_id or (self.stop_strings and self.ends_call(row[: j + 1])):
                return j + 1
        return len(row)

    def _prefilled(self, prompt: list[int], cache: KVPrefix | None) -> Any:
        """A fresh KV cache of all of `prompt` but its last token (which generation feeds),
        starting from the longest cached prefix; None for a one-token prompt."""
        import torch

        start = self._reusable(prompt, cache)
        done = len(start.ids) if start else 0
        past = copy.deepcopy(start.cache) if start else None
        if done < len(prompt) - 1:
            ids = torch.tensor([prompt[done:-1]], device=self.device)
            past = self.model(input_ids=ids, cache=past, use_cache=True, logits_to_keep=1).cache
        return past

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
                out = self.model(input_ids=torch.tensor([system], device=self.device), use_cache=True, logits_to_keep=1)
            self._system_caches[system] = KVPrefix(system, out.cache)
        return self._system_caches[system]
