"""SFT dataset: accepted runs only, TRL conversational tool format, per-turn
weights from credit assignment (0 for a malformed call: context, never a
label); limit-hitting and over-length runs dropped, duplicates removed, the
best k runs kept per task."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from touchstone.data.credit import credit_group, sft_weights
from touchstone.episode.tools import is_valid_call
from touchstone.data.inputs import Example, by_task, n_tokens, trl_messages
from touchstone.data.schema import DataConfig, SFTRow


def build_sft(examples: list[Example], cfg: DataConfig) -> tuple[list[SFTRow], Counter]:
    rows: list[SFTRow] = []
    dropped: Counter = Counter()
    for group in by_task(examples).values():
        # Credit uses the whole group (rejected attempts set the baseline).
        credits = credit_group({e.trajectory.trajectory_id: (e.n_turns, e.report) for e in group}, cfg.credit)
        candidates, seen = [], set()
        for ex in group:
            traj = ex.trajectory
            if ex.report.verdict != "accept":
                dropped[f"verdict_{ex.report.verdict}"] += 1
                continue
            if traj.exit_reason != "submitted":
                dropped["hit_limit"] += 1
                continue
            tokens = n_tokens(traj)
            if tokens > cfg.max_tokens:
                dropped["over_length"] += 1
                continue
            # A malformed call (a learner's turn the teacher corrected, touchstone.agent.policies.corrected)
            # stays as context, as the model wrote it, and is never trained on (weight 0 below).
            messages = trl_messages(traj.messages, strict=False)
            # Same actions = same training signal, whatever noise the observations carry (paths, timings).
            actions = [m for m in messages if m["role"] == "assistant"]
            digest = hashlib.sha256(json.dumps(actions, sort_keys=True).encode()).hexdigest()
            if digest in seen:
                dropped["duplicate"] += 1
                continue
            seen.add(digest)
            weights = sft_weights(credits[traj.trajectory_id].advantages, cfg.credit.sft_weight_floor)
            turns = [m for m in traj.messages if m["role"] == "assistant"]
            weights = [w if is_valid_call(m) else 0.0 for w, m in zip(weights, turns, strict=True)]
            candidates.append(
                SFTRow(
                    **ex.lineage(),
                    messages=messages,
                    tools=traj.tools,
                    turn_weights=weights,
                    n_turns=ex.n_turns,
                    n_tokens=tokens,
                )
            )
        # Best first: fewest turns (fewest detours), then shortest, then id for determinism.
        candidates.sort(key=lambda r: (r.n_turns, r.n_tokens, r.trajectory_id))
        rows += candidates[: cfg.keep_per_task]
        dropped["beyond_keep_per_task"] += max(0, len(candidates) - cfg.keep_per_task)
    return rows, +dropped
