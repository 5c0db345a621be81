"""The credit-assignment study, training side: each arm trains the same base on
rows built from the same verified trajectories, once per seed, and is measured
on held-out tasks (touchstone/experiments/credit_study.py has the arms and
metrics; docs/EXPERIMENTS.md the design and results).

Layout of OUT (every step is skipped when its output exists, so a killed run resumes):
    OUT/tasks/{train,heldout}/          the task sets (when the study proposed them)
    OUT/data/rollouts/                  hack-prone rollouts on the training tasks
    OUT/data/verification/              their reports, WITH progress points
    OUT/reference/                      the teacher's held-out runs, verified with progress (fix turns)
    OUT/<arm>/sNNN/data/                the arm's rows (sft.parquet or rl.parquet)
    OUT/<arm>/sNNN/checkpoint/          its weights
    OUT/<arm>/sNNN/eval/                sampled held-out attempts, verified
    OUT/<arm>/sNNN/row.json             the arm's row for the seed
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import TEACHER, PolicySpec
from touchstone.episode.trajectory import Sampling
from touchstone.checkpoint import checkpoint_hash
from touchstone.data.inputs import Example, join, read_trajectories, reports_of
from touchstone.data.schema import RLRow, SFTRow, write_rows
from touchstone.evaluate.reference import TEACHER_MAX_TURNS, turn_states
from touchstone.experiments.credit_study import (
    CREDIT_ARMS,
    CreditRow,
    CreditStudyConfig,
    action_distribution,
    action_type,
    arm_rows,
    fix_turn,
    summarize,
    turn_phase,
    weight_stats,
)
from touchstone.tasks.schema import Task
from training.common import experiment_train_config
from training.evaluation import evaluate_checkpoint
from training.model_init import default_model
from training.round_engine import SINGLE_RUN, Sandboxes, roll_out, verify
from training.scoring import Scorer
from training.train import train

Log = Callable[[str], None]


def verified_examples(
    tasks: list[Task], policy: PolicySpec, attempts: int, out: Path, cfg: CreditStudyConfig
) -> list[Example]:
    """`policy`'s runs on `tasks`, verified with progress points (cached under OUT)."""
    sandboxes = Sandboxes(backend=cfg.backend, workers=cfg.workers)
    limits = EpisodeLimits(max_turns=TEACHER_MAX_TURNS)
    rollouts = roll_out(
        tasks, policy, attempts, out / "rollouts", sandboxes, sampling=Sampling(seed=cfg.seed), limits=limits
    )
    if not (out / "verification" / "reports.parquet").is_file():
        verify(tasks, rollouts, out / "verification", sandboxes, SINGLE_RUN, progress=True, progress_bar=False)
    return join(read_trajectories(rollouts), reports_of(out / "verification"), None)


def reference_runs(heldout: list[Task], out: Path, cfg: CreditStudyConfig) -> list[dict[str, Any]]:
    """The teacher's accepted held-out runs that reached a fix: messages, tools, fix turn."""
    runs = []
    for e in verified_examples(heldout, TEACHER, 1, out, cfg):
        fixed = fix_turn(e.report)
        if e.report.verdict == "accept" and fixed is not None:
            t = e.trajectory
            runs.append({"task_id": t.task_id, "messages": t.messages, "tools": t.tools, "fix_turn": fixed})
    return runs


def phase_nll(checkpoint: Path, reference: list[dict[str, Any]], max_length: int) -> dict[str, float | None]:
    """Mean NLL per token of the teacher's turns before / at / after its fix, each turn
    scored after its own prefix; averaged per run, then over runs."""
    if not reference:
        return {"before": None, "fix": None, "after": None}
    scorer = Scorer(checkpoint, max_length)
    per_run: dict[str, list[float]] = {"before": [], "fix": [], "after": []}
    try:
        for run in reference:
            msgs, turns = run["messages"], Counter()
            phases: dict[str, list[float]] = {"before": [], "fix": [], "after": []}
            for i, m in enumerate(msgs):
                if m["role"] != "assistant":
                    continue
                nll = -scorer.action_logprob(msgs[:i], m, run["tools"])
                phases[turn_phase(turns["n"], run["fix_turn"])].append(nll)
                turns["n"] += 1
            for phase, values in phases.items():
                if values:
                    per_run[phase].append(float(np.mean(values)))
    finally:
        scorer.close()
    return {phase: float(np.mean(v)) if v else None for phase, v in per_run.items()}


def matched_actions(
    checkpoint: Path, reference: list[dict[str, Any]], cfg: CreditStudyConfig, seed: int
) -> tuple[float | None, dict[str, int]]:
    """Action types sampled at matched held-out states (the reference runs up to a turn):
    the share that match the teacher's action type there, and the counts."""
    states = turn_states(reference, cfg.action_states)
    if not states:
        return None, {}
    from touchstone.agent.policies.hf import HFPolicy

    sampling = Sampling(temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=seed)
    policy = HFPolicy(PolicySpec("hf", str(checkpoint)), sampling)
    by_task = {r["task_id"]: r for r in reference}
    counts: Counter = Counter()
    agree = []
    try:
        for i, st in enumerate(states):
            teacher = action_type(by_task[st.task_id]["messages"][len(st.prefix)])
            sampled = [action_type(m) for m in policy.sample_turns(st.prefix, st.tools, cfg.action_samples, seed + i)]
            counts.update(sampled)
            agree.append(np.mean([s == teacher for s in sampled]))
    finally:
        policy.close()
    return float(np.mean(agree)), dict(counts)


def arm_seed(
    cfg: CreditStudyConfig,
    arm: str,
    seed: int,
    examples: list[Example],
    heldout: list[Task],
    reference: list[dict[str, Any]],
    base: Path,
    out: Path,
) -> CreditRow:
    """Train `arm` with training seed `seed` and measure it (cached in OUT/row.json)."""
    cached = out / "row.json"
    if cached.is_file():
        return CreditRow.model_validate_json(cached.read_text())
    rows = arm_rows(arm, examples, seed)
    method = "rl" if arm == "outcome_rl" else "sft"
    if not rows:
        raise RuntimeError(f"credit study: arm {arm} has no training rows (did the verifier accept no run?)")
    (out / "data").mkdir(parents=True, exist_ok=True)
    write_rows(rows, RLRow if method == "rl" else SFTRow, out / "data" / f"{method}.parquet")
    ckpt = out / "checkpoint"
    if not (ckpt / "checkpoint.json").is_file():
        shutil.rmtree(ckpt, ignore_errors=True)
        train(
            method,
            data_dir=out / "data",
            base=base,
            out=ckpt,
            config=experiment_train_config(cfg, cfg.seed + seed),
        )
    shutil.rmtree(out / "eval", ignore_errors=True)  # a half-done evaluation starts over
    sampling = Sampling(temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=cfg.seed + 1000 * seed)
    metrics = evaluate_checkpoint(
        ckpt,
        heldout,
        out / "eval",
        label=f"{arm} s{seed}",
        attempts=cfg.eval_attempts,
        backend=cfg.backend,
        workers=cfg.workers,
        sampling=sampling,
        limits=EpisodeLimits(max_turns=cfg.max_turns),
        matched_samples=0,
        likelihood=False,  # the study's likelihoods are its own (phase_nll)
    )
    nll = phase_nll(ckpt, reference, cfg.max_length)
    agreement, types = matched_actions(ckpt, reference, cfg, cfg.seed + 1000 * seed)
    row = CreditRow(
        arm=arm,
        seed=seed,
        method=method,
        weights=weight_stats(rows),
        checkpoint_hash=checkpoint_hash(str(ckpt)),
        pass_at_1=metrics.pass_at_1.value,
        pass_at_k=metrics.pass_at_k.value,
        k=cfg.eval_attempts,
        mean_progress=metrics.mean_progress,
        nll_before_fix=nll["before"],
        nll_fix=nll["fix"],
        nll_after_fix=nll["after"],
        action_agreement=agreement,
        action_types=types,
    )
    cached.write_text(row.model_dump_json(indent=2) + "\n")
    return row


def study_inputs(
    cfg: CreditStudyConfig, tasks: list[Task], heldout: list[Task], out: Path
) -> tuple[list[Example], list[dict[str, Any]], dict[str, Any]]:
    """The verified training runs every arm shares, the held-out reference runs
    with their fix turns, and a summary of both (cached under OUT)."""
    examples = verified_examples(
        tasks, PolicySpec.parse(f"hack-prone:{cfg.hack_rate}"), cfg.attempts, out / "data", cfg
    )
    reference = reference_runs(heldout, out / "reference", cfg)
    summary = {
        "runs": len(examples),
        "verdicts": dict(Counter(e.report.verdict for e in examples)),
        "with_progress": sum(bool(e.report.progress) for e in examples),
        "reference_runs": len(reference),
    }
    return examples, reference, summary


def run_arm(
    cfg: CreditStudyConfig,
    arm: str,
    examples: list[Example],
    heldout: list[Task],
    reference: list[dict[str, Any]],
    base: Path,
    out: Path,
    log: Log = print,
) -> dict[str, Any]:
    """Every seed of one arm: {"rows": [ROW...], "summary": {metric: interval over seeds}, "action_shares"}."""
    rows = []
    for seed in range(cfg.seeds):
        row = arm_seed(cfg, arm, seed, examples, heldout, reference, base, out / arm / f"s{seed:03d}")
        log(f"{arm} seed {seed}: pass@{row.k} {row.pass_at_k:.2f}, NLL before/at/after fix "
            f"{row.nll_before_fix}/{row.nll_fix}/{row.nll_after_fix}, action agreement {row.action_agreement}")  # fmt: skip
        rows.append(row.model_dump())
    return {"rows": rows, "summary": summarize(rows), "action_shares": action_distribution(rows)}


def run_credit_study(
    cfg: CreditStudyConfig,
    tasks: list[Task],
    heldout: list[Task],
    out: Path,
    base: Path | None = None,
    arms: tuple[str, ...] = CREDIT_ARMS,
    log: Log = print,
) -> dict:
    """Every arm x seed. Returns {"config", "base", "data", "arms": {arm: {"rows": [ROW...], "summary": {...}}}}."""
    base = base or default_model(seed=cfg.seed)
    log(
        f"credit study: {len(tasks)} training tasks, {len(heldout)} held-out, arms {', '.join(arms)}, {cfg.seeds} seeds"
    )
    examples, reference, data = study_inputs(cfg, tasks, heldout, out)
    log(f"data: {data}")
    arms_out = {arm: run_arm(cfg, arm, examples, heldout, reference, base, out, log) for arm in arms}
    return {"config": cfg.model_dump(), "base": str(base), "data": data, "arms": arms_out}
