"""Round keys: r000, r001, ... (at least three digits). Every stage that names
a round (storage paths, Dagster partitions, proposer seeds, evaluation
history) parses and orders keys here. Also a round's laptop-CPU profile
(`CPU_ROUND`), the defaults a round changes on purpose."""

from __future__ import annotations

import re

_KEY = re.compile(r"^r(\d{3,})$")

# A round's laptop-CPU profile: where a round's default differs on purpose from
# the library's (the library models' fields, which the command line shows), so
# that a whole round finishes on a laptop CPU. Each value is named once, here;
# a round's Dagster config reads it (`orchestration/resources.py`, through
# `touchstone.config.field_of`), and so does `touchstone eval`, which measures a
# checkpoint as a round does. Every other default is the library's own.
CPU_ROUND = {
    # per assistant turn (library: Sampling.max_tokens; cluster: 4096); 192 fits 97% of the
    # teacher's turns with the tiny tokenizer (96: 60%), so a call copied from it is not cut off
    "max_tokens": 192,
    # per model episode (library: EpisodeLimits.max_turns; cluster: 50); 6, not 8: the demo's
    # time budget (docs/EXPERIMENTS.md), and a tiny model's later turns are rarely valid calls
    "max_turns": 6,
    # tokens per training window (TrainerResource.max_length) and per turn of an hf: policy
    # (PolicyResource.context_window; library: Sampling.context_window 0, the whole
    # conversation; cluster: the model's context): a model acts within the windows it was
    # trained on. Acting on whole conversations (held-out teacher runs reach 22k-37k tokens), the
    # demo's model wrote valid calls at 0.31 of later turns, at 0.65 within 1024
    # (docs/EXPERIMENTS.md)
    "context_window": 1024,
    "time_budget_s": 300.0,  # per episode (library: EpisodeLimits.time_budget_s)
    # per teacher episode in a round (library: WarmStartConfig.teacher_max_turns, 16); its turns
    # cost no generation. 10, not 16: over three demos (63 teacher runs) every accepted run took
    # 5-6 turns and the rejected ones spent 9-16 turns, each replayed twice by the verifier, for
    # nothing (docs/EXPERIMENTS.md). The price: a draw whose only repair takes longer makes no
    # update (the round tests' r001 did; they keep 16). Held-out reference runs keep 24.
    "teacher_max_turns": 10,
    # k: attempts per held-out task (library: training.evaluation.evaluate_checkpoint's 2; cluster: 8).
    # 6 on a laptop (~40 s a demo round more than 2): a round moves the tiny model's valid-call rate
    # by a few points, and 2 attempts per held-out task (48 turns) put r001 below r000 where 12
    # attempts put it above, in both halves of 6 (docs/EXPERIMENTS.md)
    "eval_attempts": 6,
    "replays": 2,  # grading runs per trajectory (library: DEFAULT_REPLAYS; cluster: 3)
    "workers": 2,  # parallel sandboxes (the CLI's solve and verify-batch: 1; cluster: 32+)
    "seeds": ["inflection", "toolz", "cachetools"],  # shipped seeds the teacher can repair (SeedsConfig)
    # kinds of bug of the held-out, warm-start and round tasks (library: every operator): over
    # three demos the teacher repaired every swapped-arguments task and none of 17 others
    # (negated conditions, flipped comparisons, removed statements, changed return values), so
    # those cost a round its proposal, rollout and grading time for no verified run
    # (docs/EXPERIMENTS.md). With a served model, set [] (every operator).
    "operators": ["swap_arguments"],
}


def round_key(index: int) -> str:
    if index < 0:
        raise ValueError(f"round index must be >= 0, got {index}")
    return f"r{index:03d}"


def round_index(key: str) -> int:
    match = _KEY.match(key)
    if match is None:
        raise ValueError(f"bad round key {key!r}: expected 'r' and at least three digits, e.g. r000")
    return int(match.group(1))


def previous_round(key: str) -> str | None:
    index = round_index(key)
    return round_key(index - 1) if index > 0 else None


def earlier_round_keys(keys, key: str, n: int) -> list[str]:
    """The last `n` of `keys` before `key`, oldest first."""
    before = sorted((k for k in keys if round_index(k) < round_index(key)), key=round_index)
    return before[len(before) - n :] if n > 0 else []
