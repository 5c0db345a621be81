"""Preference data: DPO pairs (chosen = accepted, rejected = rejected — hacks
included, which teaches the model not to hack) and unpaired KTO rows."""

from __future__ import annotations

from collections import Counter
from itertools import cycle

from touchstone.data.credit import is_hack
from touchstone.data.inputs import DataError, Example, by_task, n_tokens, split_prompt, trl_messages
from touchstone.data.schema import DataConfig, DPORow, KTORow


def _split(ex: Example) -> tuple[list[dict], list[dict]]:
    return split_prompt(trl_messages(ex.trajectory.messages))


def _usable(group: list[Example], cfg: DataConfig, dropped: Counter) -> list[tuple[Example, list, list]]:
    """Labelled, not over-length, renderable runs with their (prompt, completion)."""
    out = []
    for ex in group:
        if ex.report.verdict == "inconclusive":
            dropped["verdict_inconclusive"] += 1
        elif ex.n_turns == 0:  # failed before its first turn: no completion to prefer or avoid
            dropped["no_turns"] += 1
        elif n_tokens(ex.trajectory) > cfg.max_tokens:
            dropped["over_length"] += 1
        else:
            try:
                out.append((ex, *_split(ex)))
            except DataError:
                dropped["malformed_tool_arguments"] += 1
    return out


def build_dpo(examples: list[Example], cfg: DataConfig) -> tuple[list[DPORow], Counter]:
    rows: list[DPORow] = []
    dropped: Counter = Counter()
    for group in by_task(examples).values():
        usable = _usable(group, cfg, dropped)
        chosen = [u for u in usable if u[0].report.verdict == "accept"]
        rejected = [u for u in usable if u[0].report.verdict == "reject"]
        if not chosen or not rejected:
            dropped["no_pair"] += len(usable)
            continue
        # Each rejected run once (hacks first: the most important lesson), chosen runs reused in turn.
        rejected.sort(key=lambda u: (not is_hack(u[0].report), u[0].trajectory.trajectory_id))
        for (good, prompt, completion), (bad, bad_prompt, bad_completion) in zip(
            cycle(chosen), rejected[: cfg.max_pairs_per_task]
        ):
            if bad_prompt != prompt:  # a pair must share its prompt
                dropped["prompt_mismatch"] += 1
                continue
            rows.append(
                DPORow(
                    **good.lineage(),
                    rejected_trajectory_id=bad.trajectory.trajectory_id,
                    rejected_report_id=bad.report.report_id,
                    rejected_hack=is_hack(bad.report),
                    prompt=prompt,
                    chosen=completion,
                    rejected=bad_completion,
                    tools=good.trajectory.tools,
                )
            )
    return rows, +dropped


def build_kto(examples: list[Example], cfg: DataConfig) -> tuple[list[KTORow], Counter]:
    dropped: Counter = Counter()
    rows = [
        KTORow(
            **ex.lineage(),
            prompt=prompt,
            completion=completion,
            label=ex.report.verdict == "accept",
            tools=ex.trajectory.tools,
        )
        for group in by_task(examples).values()
        for ex, prompt, completion in _usable(group, cfg, dropped)
    ]
    return rows, +dropped
