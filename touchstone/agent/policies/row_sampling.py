"""Sampling several rows of one batch, each from its own seed.

`model.generate` samples every row of a batch from the one global generator, so a
row's tokens would depend on which other rows shared its batch. `RowSampler` is a
logits processor that does the sampling itself (temperature, top-p, then one draw
from the row's own `torch.Generator`) and hands `generate` a distribution with all
its mass on the drawn token, which greedy decoding then takes. A row's sample is
thus fixed by its seed whether it was drawn alone or beside others (up to the float
rounding of batched arithmetic), and the log probability of each drawn token under
the distribution it was drawn from is recorded per row, as RL needs it.
"""

from __future__ import annotations

import torch

from touchstone.episode.trajectory import Sampling


class RowSampler:
    """A `LogitsProcessor`: row i of the batch draws from `Generator(seeds[i])`."""

    def __init__(self, seeds: list[int], sampling: Sampling, device: str = "cpu"):
        self.sampling = sampling
        self.generators = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]
        self.logprobs: list[list[float]] = [[] for _ in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        logits = scores.float()
        if self.sampling.temperature <= 0:
            logp = torch.log_softmax(logits, dim=-1)
            tokens = logp.argmax(dim=-1)
        else:
            logp = torch.log_softmax(_top_p(logits / self.sampling.temperature, self.sampling.top_p), dim=-1)
            probs = logp.exp()
            tokens = torch.cat([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)])
        chosen = logp.gather(1, tokens[:, None])[:, 0].tolist()
        for row, value in zip(self.logprobs, chosen):
            row.append(value)
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, tokens[:, None], 0.0)
        return out


def _top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """The logits with every token outside the nucleus set to -inf: the most likely tokens
    whose probabilities reach `top_p` (the most likely one always stays)."""
    if top_p >= 1.0:
        return logits
    ordered, order = logits.sort(dim=-1, descending=True)
    probs = ordered.softmax(dim=-1)
    outside = probs.cumsum(dim=-1) - probs >= top_p  # the likelier tokens already reach top_p
    return logits.masked_fill(torch.zeros_like(outside).scatter(1, order, outside), float("-inf"))
