"""The proposer's data: each self-proposal's reward from the round's VERIFIED
solver outcomes, and the proposer episodes as RL rows and DPO pairs next to the
solver's (role `proposer`; docs/formats/datasets.md, "Proposer rows").

Reward (Absolute Zero's learnability, docs/CREDIT.md):
- a proposal that did not become a kept task (malformed, duplicate,
  contaminated, leaking, weak tests, revoked, excluded as held-out, ...) gets
  `invalid_penalty`;
- a kept task gets `1 - solve rate` when the rate is strictly between 0 and 1,
  else 0, the rate being the share of accepted verdicts among the decisive
  (accept or reject) verified attempts of the proposing weights on it (same
  checkpoint hash or same spec; all policies' attempts when those made none,
  e.g. round 0, where the teacher alone solves; `solvers` says which);
- a kept task no attempt decided carries no reward and no row (`unattempted`).

RL rows: the proposal prompt plus the assistant's answer, reward, and the
advantage against the mean reward of the round's proposals of the same kind
(a group baseline); a round whose proposals all earned the same reward teaches
nothing and gives no row. DPO pairs: within a prompt group, a learnable
proposal (reward > 0) over an invalid or trivial (always solved) one.
A proposal rejected as contaminated (or sharing a held-out unit) keeps its
penalty in the rewards file but gives no row: its text is a held-out problem's.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import cycle
from pathlib import Path
from statistics import fmean

import polars as pl

from pydantic import BaseModel

from touchstone import atomic
from touchstone.data.inputs import Example
from touchstone.data.schema import DPORow, TrlMessage, ProposerConfig, RLRow
from touchstone.taskmaking.index import IndexRow
from touchstone.taskmaking.proposers.llm import learnability_reward
from touchstone.taskmaking.proposers.selfplay import ProposalRecord

# training data's table of ProposerReward rows (docs/formats/datasets.md); a task set's file of the
# same name is the LLM proposer's per-candidate record (touchstone.taskmaking.index.REWARDS_FILE)
PROPOSER_REWARDS_FILE = "proposer_rewards.parquet"
# a proposal rejected for these reasons holds a held-out (or benchmark) problem's
# text: it gets its penalty in proposer_rewards.parquet but never a training row
CONTAMINATION_REASONS = ("contaminated", "heldout")


class ProposerReward(BaseModel):
    """One proposal's outcome and reward (one row of proposer_rewards.parquet)."""

    proposal_id: str
    round: str | None
    kind: str
    group: int
    policy: str
    checkpoint_hash: str | None
    status: str  # the task's final index status: kept | rejected | revoked
    reason: str | None
    outcome: str  # learnable | trivial (always solved) | unsolved (never solved) | unattempted | invalid
    attempts: int  # decisive verified attempts counted
    solved: int
    solve_rate: float | None
    solvers: list[str]  # policies whose attempts were counted
    reward: float | None  # None: unattempted (no signal, no row)
    advantage: float | None
    report_ids: list[str]
    verifier_version: str


def _counted(p: ProposalRecord, examples: list[Example]) -> list[Example]:
    """The decisive verified attempts on the proposal's task by the proposing
    weights (same checkpoint hash: a served checkpoint's spec names a port that
    changes between steps) or spec; every policy's when those made none."""
    decisive = [e for e in examples if e.report.task_id == p.proposal_id and e.report.verdict != "inconclusive"]
    own = [
        e
        for e in decisive
        if e.trajectory.policy == p.policy or (p.checkpoint_hash and e.trajectory.checkpoint_hash == p.checkpoint_hash)
    ]
    return own or decisive


def _outcome(row: IndexRow | None, rate: float | None) -> str:
    if row is None or row.status != "kept":
        return "invalid"
    if rate is None:
        return "unattempted"
    return "trivial" if rate == 1.0 else "unsolved" if rate == 0.0 else "learnable"


def proposer_rewards(
    proposals: list[ProposalRecord], index: list[IndexRow], examples: list[Example], cfg: ProposerConfig
) -> list[ProposerReward]:
    """Rewards from verified outcomes, with the per-kind group advantage."""
    rows = {r.id: r for r in index}
    out = []
    for p in proposals:
        row = rows.get(p.proposal_id)
        counted = _counted(p, examples) if row is not None and row.status == "kept" else []
        solved = sum(e.report.verdict == "accept" for e in counted)
        rate = solved / len(counted) if counted else None
        outcome = _outcome(row, rate)
        reward = {"invalid": cfg.invalid_penalty, "unattempted": None}.get(outcome, learnability_reward(rate))
        out.append(
            ProposerReward(
                proposal_id=p.proposal_id,
                round=p.round,
                kind=p.kind,
                group=p.group,
                policy=p.policy,
                checkpoint_hash=p.checkpoint_hash,
                status=row.status if row else "rejected",
                reason=row.reason if row else p.reason,
                outcome=outcome,
                attempts=len(counted),
                solved=solved,
                solve_rate=rate,
                solvers=sorted({e.trajectory.policy for e in counted}),
                reward=reward,
                advantage=None,
                report_ids=sorted(e.report.report_id for e in counted),
                verifier_version=counted[0].report.verifier_version if counted else "",
            )
        )
    baselines = defaultdict(list)
    for r in out:
        if r.reward is not None:
            baselines[r.kind].append(r.reward)
    return [
        r.model_copy(update={"advantage": r.reward - fmean(baselines[r.kind])}) if r.reward is not None else r
        for r in out
    ]


def _messages(p: ProposalRecord) -> tuple[list[dict], dict]:
    return json.loads(p.prompt), {"role": "assistant", "content": p.output}


def _lineage(r: ProposerReward, task_hash: str | None) -> dict:
    return dict(
        trajectory_id=r.proposal_id,
        task_id=r.proposal_id,
        task_hash=task_hash or "",
        round=r.round,
        policy=r.policy,
        checkpoint_hash=r.checkpoint_hash,
        verifier_version=r.verifier_version,
        report_id=",".join(r.report_ids),
        role="proposer",
    )


def build_proposer_rl(
    rewards: list[ProposerReward], proposals: list[ProposalRecord], index: list[IndexRow]
) -> tuple[list[RLRow], Counter]:
    by_id, hashes = {p.proposal_id: p for p in proposals}, {r.id: r.content_hash for r in index}
    dropped: Counter = Counter()
    rows = []
    for r in rewards:
        if r.reason in CONTAMINATION_REASONS:
            dropped["contaminated"] += 1
            continue
        if r.reward is None:
            dropped["unattempted"] += 1
            continue
        if not r.advantage:
            dropped["no_signal_group"] += 1
            continue
        p = by_id[r.proposal_id]
        prompt, answer = _messages(p)
        turn = json.loads(p.turn)
        has_ids = bool(turn.get("prompt_ids")) and bool(turn.get("completion_ids"))
        n_tokens = len(turn.get("prompt_ids") or []) + len(turn.get("completion_ids") or [])
        rows.append(
            RLRow(
                **_lineage(r, hashes.get(r.proposal_id)),
                messages=[TrlMessage(**m) for m in [*prompt, answer]],
                tools=[],
                turns=json.dumps([turn] if has_ids else []),
                has_token_ids=has_ids,
                reward=r.reward,
                group_advantage=r.advantage,
                turn_advantages=[r.advantage],
                n_turns=1,
                n_tokens=n_tokens or (len(p.prompt) + len(p.output)) // 4 + 1,
            )
        )
    return rows, dropped


def build_proposer_dpo(
    rewards: list[ProposerReward], proposals: list[ProposalRecord], index: list[IndexRow], max_pairs: int
) -> tuple[list[DPORow], Counter]:
    by_id, hashes = {p.proposal_id: p for p in proposals}, {r.id: r.content_hash for r in index}
    groups: dict[tuple, list[ProposerReward]] = defaultdict(list)
    for r in rewards:
        groups[(r.round, r.group)].append(r)
    dropped: Counter = Counter()
    rows = []
    for members in groups.values():
        chosen = [r for r in members if r.reward is not None and r.reward > 0]
        worse = [r for r in members if r.outcome in ("invalid", "trivial") and r.reason not in CONTAMINATION_REASONS]
        if not chosen or not worse:
            dropped["no_pair"] += len(members)
            continue
        for good, bad in zip(cycle(chosen), worse[:max_pairs]):
            prompt, good_answer = _messages(by_id[good.proposal_id])
            _, bad_answer = _messages(by_id[bad.proposal_id])
            rows.append(
                DPORow(
                    **_lineage(good, hashes.get(good.proposal_id)),
                    rejected_trajectory_id=bad.proposal_id,
                    rejected_report_id=",".join(bad.report_ids),
                    rejected_hack=False,
                    prompt=[TrlMessage(**m) for m in prompt],
                    chosen=[TrlMessage(**good_answer)],
                    rejected=[TrlMessage(**bad_answer)],
                    tools=[],
                )
            )
    return rows, dropped


def write_rewards(rewards: list[ProposerReward], path: Path) -> None:
    schema = {
        "group": pl.Int64,
        "attempts": pl.Int64,
        "solved": pl.Int64,
        "solve_rate": pl.Float64,
        "reward": pl.Float64,
        "advantage": pl.Float64,
        "solvers": pl.List(pl.Utf8),
        "report_ids": pl.List(pl.Utf8),
    }
    schema = {name: schema.get(name, pl.Utf8) for name in ProposerReward.model_fields}
    atomic.write_parquet(pl.DataFrame([r.model_dump() for r in rewards], schema=schema), path)


def reported_rate(report_ids: str, verdicts: dict[str, tuple[str, str]], task_id: str) -> float | None | str:
    """The accepted share of the reports a proposer row names (None: it names
    none), or a string saying why the names do not hold (unknown report, a
    report of another task, an undecided verdict)."""
    ids = [i for i in report_ids.split(",") if i]
    if not ids:
        return None
    found = [verdicts.get(i) for i in ids]
    if any(f is None or f[0] != task_id or f[1] == "inconclusive" for f in found):
        return f"names reports that are not decisive reports of task {task_id}"
    return sum(f[1] == "accept" for f in found) / len(found)


def proposer_row_problems(rl: list[dict], dpo: list[dict], verdicts: dict[str, tuple[str, str]]) -> dict[str, list]:
    """What breaks "the proposer is rewarded from verified outcomes only": an RL
    row whose reward is not the learnability of the reports it names (or, naming
    none, is positive), a DPO pair whose chosen proposal is not learnable by its
    reports. `verdicts`: report id -> (task id, verdict) of the round."""
    problems: dict[str, list] = defaultdict(list)
    for row in rl:
        rate = reported_rate(row["report_id"], verdicts, row["task_id"])
        if isinstance(rate, str):
            problems["proposer_rl_unverified"].append(f"{row['trajectory_id']}: {rate}")
        elif (rate is None and row["reward"] > 0) or (
            rate is not None and abs(row["reward"] - learnability_reward(rate)) > 1e-9
        ):
            problems["proposer_rl_reward_mismatch"].append(row["trajectory_id"])
    for row in dpo:
        rate = reported_rate(row["report_id"], verdicts, row["task_id"])
        if not isinstance(rate, float) or learnability_reward(rate) <= 0:
            problems["proposer_dpo_chosen_not_learnable"].append(row["trajectory_id"])
    return {k: v[:5] for k, v in problems.items()}
