"""The `openai:BASE_URL#MODEL` policy: any OpenAI-compatible chat endpoint with
native tool calling (vLLM, SGLang, `transformers serve`, hosted APIs).

Transient failures (connection errors, 408/409/429/5xx) are retried with
exponential backoff by the `openai` client itself. Usage is recorded; token ids
and logprobs are recorded when the server returns them: logprobs are asked for
always, token ids with vLLM's `return_token_ids` extension, which is dropped
for the rest of the run once a server refuses it.
"""

from __future__ import annotations

import os
import re
from typing import Any

from touchstone.agent.policies import Episode, Policy, PolicyError, PolicyTurn
from touchstone.agent.policies.spec import PolicySpec
from touchstone.episode.trajectory import Sampling, turn_seed

DEFAULT_MAX_RETRIES = 5
DEFAULT_TIMEOUT_S = 300.0
# A served model name that is a sha256 is a checkpoint content hash: the name
# `touchstone.agent.serving` serves a checkpoint under, checked against /v1/models.
_CONTENT_HASH = re.compile(r"[0-9a-f]{64}")


def _request_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the API takes them (no null content; our extra keys dropped)."""
    keep = ("role", "content", "tool_calls", "tool_call_id")
    return [{k: (v if k != "content" else v or "") for k, v in m.items() if k in keep} for m in messages]


class _OpenAIEpisode(Episode):
    def __init__(self, policy: "OpenAIPolicy", seed: int):
        self.policy, self.seed, self.turn = policy, seed, 0

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        resp = self.policy.complete(_request_messages(messages), tools, seed=turn_seed(self.seed, self.turn))
        self.turn += 1
        if not resp.choices:
            raise PolicyError("the server returned no choices")
        choice = resp.choices[0]
        msg = choice.message
        message: dict[str, Any] = {"role": "assistant", "content": msg.content or ""}
        if msg.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in msg.tool_calls
            ]
        content_lp = getattr(choice.logprobs, "content", None) if choice.logprobs else None
        usage = resp.usage
        return PolicyTurn(
            message=message,
            prompt_ids=getattr(resp, "prompt_token_ids", None) or getattr(choice, "prompt_token_ids", None),
            completion_ids=getattr(choice, "token_ids", None),
            logprobs=[lp.logprob for lp in content_lp] if content_lp else None,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            finish_reason=choice.finish_reason,
        )


class OpenAIPolicy(Policy):
    def __init__(self, spec: PolicySpec, sampling: Sampling, max_retries: int = DEFAULT_MAX_RETRIES):
        super().__init__(spec, sampling)
        import openai

        self.base_url, self.model = spec.endpoint
        if _CONTENT_HASH.fullmatch(self.model):
            self.checkpoint_hash = self.model
        self._openai = openai
        self.client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"),  # local servers ignore it
            max_retries=max_retries,
            timeout=DEFAULT_TIMEOUT_S,
        )
        self.ask_token_ids = True

    def episode(self, seed: int, max_turns: int) -> Episode:
        return _OpenAIEpisode(self, seed)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], seed: int) -> Any:
        s = self.sampling
        kwargs = dict(
            model=self.model,
            messages=messages,
            tools=tools,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            seed=seed,
            logprobs=True,
        )
        try:
            if self.ask_token_ids:
                try:
                    return self.client.chat.completions.create(**kwargs, extra_body={"return_token_ids": True})
                except (self._openai.BadRequestError, self._openai.UnprocessableEntityError) as exc:
                    if "return_token_ids" not in exc.response.text:
                        raise
                    self.ask_token_ids = False  # this server does not know the extension
            return self.client.chat.completions.create(**kwargs)
        except self._openai.OpenAIError as exc:
            raise PolicyError(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self.client.close()
