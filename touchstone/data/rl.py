"""RL dataset: every labelled run with its outcome reward, group-relative
advantage and per-turn advantages, plus the recorded token ids so the trainer
never re-tokenizes. Groups without reward variance carry no signal: dropped."""

from __future__ import annotations

import json
from collections import Counter

from touchstone.data.credit import credit_group
from touchstone.data.inputs import Example, by_task, n_tokens, trl_messages
from touchstone.data.schema import DataConfig, RLRow


def build_rl(examples: list[Example], cfg: DataConfig) -> tuple[list[RLRow], Counter]:
    rows: list[RLRow] = []
    dropped: Counter = Counter()
    for group in by_task(examples).values():
        kept = []
        for ex in group:
            if n_tokens(ex.trajectory) > cfg.max_tokens:
                dropped["over_length"] += 1
            else:
                kept.append(ex)
        credits = credit_group({e.trajectory.trajectory_id: (e.n_turns, e.report) for e in kept}, cfg.credit)
        dropped["verdict_inconclusive"] += len(kept) - len(credits)
        if len({c.reward for c in credits.values()}) < 2:
            dropped["no_signal_group"] += len(credits)
            continue
        for ex in kept:
            traj = ex.trajectory
            credit = credits.get(traj.trajectory_id)
            if credit is None:
                continue
            has_ids = bool(traj.turns) and all(
                t.prompt_ids is not None and t.completion_ids is not None for t in traj.turns
            )
            rows.append(
                RLRow(
                    **ex.lineage(),
                    messages=trl_messages(traj.messages, strict=False),
                    tools=traj.tools,
                    turns=json.dumps([t.model_dump() for t in traj.turns]),
                    has_token_ids=has_ids,
                    reward=credit.reward,
                    group_advantage=credit.group_advantage,
                    turn_advantages=credit.advantages,
                    n_turns=ex.n_turns,
                    n_tokens=n_tokens(traj),
                )
            )
    return rows, +dropped
