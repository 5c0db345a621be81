"""The round report's self-play section: what the policy proposed, what became
of it, and what the round's verified solver runs say about it (written by
`build_datasets` as `summary.json["self_play"]` and `selfplay.md`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from statistics import median

from pydantic import BaseModel

from touchstone.data.inputs import Example
from touchstone.data.proposer import CONTAMINATION_REASONS, ProposerReward
from touchstone.taskmaking.contamination import solution_code
from touchstone.taskmaking.index import IndexRow
from touchstone.tasks.schema import TaskError, load_task
from touchstone.taskmaking.similarity import normalized_ast_hash
from touchstone.taskmaking.sources import SOURCES, source_of


class SelfPlayReport(BaseModel):
    proposals: int
    valid: int  # proposals that are kept tasks at the end of the round
    valid_share: float | None
    rejection_reasons: dict[str, int]
    contamination_hits: int  # rejected as a held-out or benchmark problem, or sharing a held-out unit
    outcomes: dict[str, int]  # learnable / trivial / unsolved / unattempted / invalid
    learnability: dict[str, float] | None  # min / median / mean / max reward of the attempted valid proposals
    solve_rate: dict[str, float | None]  # source -> accepted share of decisive verified attempts
    attempts: dict[str, int]  # source -> decisive verified attempts
    distinct_entry_points: int
    distinct_ast_shapes: int
    note: str


def _solve_rates(index: list[IndexRow], examples: list[Example]) -> tuple[dict[str, float | None], dict[str, int]]:
    source = {r.id: source_of(r) for r in index if r.status == "kept"}  # a revoked task's runs say nothing
    tried, won = Counter(), Counter()
    for e in examples:
        if e.report.verdict == "inconclusive" or e.report.task_id not in source:
            continue
        tried[source[e.report.task_id]] += 1
        won[source[e.report.task_id]] += e.report.verdict == "accept"
    return {s: (won[s] / tried[s] if tried[s] else None) for s in SOURCES}, {s: tried[s] for s in SOURCES}


def _diversity(task_dir: Path, valid: list[str]) -> tuple[int, int]:
    entries, shapes = set(), set()
    for task_id in valid:
        try:
            task = load_task(task_dir / task_id)
        except TaskError:
            continue
        entries |= {e.function for e in task.entry_points}
        try:
            shapes.add(normalized_ast_hash(solution_code(task)))
        except SyntaxError:
            continue
    return len(entries), len(shapes)


def selfplay_report(
    rewards: list[ProposerReward], index: list[IndexRow], examples: list[Example], task_dir: Path
) -> SelfPlayReport:
    valid = [r.proposal_id for r in rewards if r.status == "kept"]
    reasons = Counter(r.reason or r.status for r in rewards if r.status != "kept")
    attempted = [r.reward for r in rewards if r.status == "kept" and r.reward is not None]
    rates, attempts = _solve_rates(index, examples)
    entries, shapes = _diversity(task_dir, valid)
    n = len(rewards)
    if not n:
        note = "self-proposal was off this round"
    elif not valid:
        note = f"0 of {n} self-proposals were valid: the round trained on its other sources"
    else:
        note = f"{len(valid)} of {n} self-proposals were valid; {sum(a > 0 for a in attempted)} learnable"
    return SelfPlayReport(
        proposals=n,
        valid=len(valid),
        valid_share=len(valid) / n if n else None,
        rejection_reasons=dict(reasons.most_common()),
        contamination_hits=sum(reasons[r] for r in CONTAMINATION_REASONS),
        outcomes=dict(Counter(r.outcome for r in rewards).most_common()),
        learnability=(
            {
                "min": min(attempted),
                "median": median(attempted),
                "mean": sum(attempted) / len(attempted),
                "max": max(attempted),
            }
            if attempted
            else None
        ),  # fmt: skip
        solve_rate=rates,
        attempts=attempts,
        distinct_entry_points=entries,
        distinct_ast_shapes=shapes,
        note=note,
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def markdown(report: SelfPlayReport) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in report.rejection_reasons.items()) or "none"
    learn = report.learnability
    rows = "\n".join(
        f"| {s} | {_pct(report.solve_rate[s])} | {report.attempts[s]} |" for s in SOURCES if report.attempts[s]
    )
    return (
        "## Self-play\n\n"
        f"**{report.note}.**\n\n"
        f"- proposals made: {report.proposals}; valid: {report.valid} ({_pct(report.valid_share)})\n"
        f"- rejection reasons: {reasons}\n"
        f"- contamination hits (held-out or benchmark problems): {report.contamination_hits}\n"
        f"- outcomes: {', '.join(f'{k} {v}' for k, v in report.outcomes.items()) or 'none'}\n"
        f"- learnability of valid proposals: "
        + (
            f"min {learn['min']:.2f}, median {learn['median']:.2f}, mean {learn['mean']:.2f}, max {learn['max']:.2f}"
            if learn
            else "none attempted"
        )
        + f"\n- diversity of valid proposals: {report.distinct_entry_points} distinct entry points, "
        f"{report.distinct_ast_shapes} distinct solution shapes (normalized AST)\n\n"
        "| source | verified solve rate | decisive attempts |\n| --- | --- | --- |\n"
        f"{rows}\n"
    )
