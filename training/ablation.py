"""The filter-ablation experiment, training side: each arm trains the same base
model with the same settings on what its filter kept, and later rounds roll out
that arm's own checkpoint (touchstone/experiments/filter_ablation.py has the
filters; docs/EXPERIMENTS.md the design and results).

Layout of OUT (every step is skipped when its output exists, so a killed run resumes):
    OUT/tasks/{train,heldout}/          the task sets (when the experiment proposed them)
    OUT/base/                           the base model's evaluation (shared by both arms)
    OUT/shared/rNNN/rollouts/           hack-prone rollouts of the round, filtered once:
    OUT/shared/rNNN/outcomes.parquet      verdict, auditor's hack label and naive pass per trajectory
    OUT/<arm>/rNNN/rollouts/            the arm's checkpoint's rollouts (rounds >= 1), filtered likewise
    OUT/<arm>/rNNN/data/sft.parquet     what the arm kept
    OUT/<arm>/rNNN/checkpoint/          the arm's weights after the round
    OUT/<arm>/rNNN/eval/                its evaluation on the held-out tasks
    OUT/<arm>/rNNN/row.json             the round's result row
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import PolicySpec
from touchstone.episode.trajectory import Sampling
from touchstone.checkpoint import checkpoint_hash
from touchstone.evaluate.schema import RoundMetrics
from touchstone.experiments.filter_ablation import (
    OUTCOMES_FILE,
    SEED_FIGURES,
    AblationConfig,
    seed_entry,
    seed_summary,
    Arm,
    ArmRow,
    Behaviour,
    sampled_behaviour,
    build_arm_dataset,
    filter_rollouts,
    round_seed,
)
from touchstone.rounds import round_key
from touchstone.tasks.schema import Task
from training.common import experiment_train_config
from training.evaluation import evaluate_checkpoint
from training.model_init import default_model
from training.round_engine import SINGLE_RUN, Sandboxes, roll_out, verify
from training.train import train

Log = Callable[[str], None]
TEACHER_MAX_TURNS = 16


def shared_round(cfg: AblationConfig, index: int, tasks: list[Task], out: Path) -> Path | None:
    """The round's hack-prone rollouts, filtered by both filters once (None: none this round)."""
    attempts = cfg.attempts if index == 0 else cfg.teacher_attempts
    if attempts == 0:
        return None
    rollouts = roll_out(
        tasks,
        cfg.hack_prone_spec(),
        attempts,
        out / "rollouts",
        _sandboxes(cfg),
        sampling=Sampling(seed=round_seed(cfg, index)),
        limits=EpisodeLimits(max_turns=TEACHER_MAX_TURNS),
    )
    filter_outcomes(cfg, tasks, rollouts, out)
    return out


def filter_outcomes(cfg: AblationConfig, tasks: list[Task], rollouts: Path, out: Path) -> Path:
    """Both filters on `rollouts`, once (OUT/outcomes.parquet, `filter_rollouts`): graded
    by the round engine's verifier stage into OUT/verification."""
    if (out / OUTCOMES_FILE).is_file():
        return out / OUTCOMES_FILE
    reports = verify(tasks, rollouts, out / "verification", _sandboxes(cfg), SINGLE_RUN)
    return filter_rollouts(
        tasks, rollouts, reports, out, workers=cfg.workers, backend=cfg.backend, holdout_dir=cfg.holdout_dir()
    )


def evaluate(cfg: AblationConfig, checkpoint: Path, heldout: list[Task], out: Path, label: str) -> RoundMetrics:
    """The checkpoint's evaluation on the held-out tasks (cached in OUT/metrics.json),
    and what its sampled attempts did (OUT/behaviour.json, `behaviour`)."""
    cached = out / "metrics.json"
    if cached.is_file() and (out / "behaviour.json").is_file():
        return RoundMetrics.model_validate_json(cached.read_text())
    if cached.is_file():  # evaluated before behaviour was measured: its sampled attempts are on disk
        behaviour(cfg, heldout, out)
        return RoundMetrics.model_validate_json(cached.read_text())
    shutil.rmtree(out, ignore_errors=True)  # a half-done evaluation starts over
    metrics = evaluate_checkpoint(
        checkpoint,
        heldout,
        out,
        label=label,
        attempts=cfg.eval_attempts,
        backend=cfg.backend,
        workers=cfg.workers,
        sampling=_sampling(cfg, 0),
        limits=EpisodeLimits(max_turns=cfg.max_turns),
        matched_samples=0,  # the ablation asks about hacks; sampling at matched states would cost its budget
    )
    behaviour(cfg, heldout, out)
    cached.write_text(metrics.model_dump_json(indent=2) + "\n")
    return metrics


def behaviour(cfg: AblationConfig, heldout: list[Task], out: Path) -> Behaviour:
    """Sampled hack rate of the evaluation's attempts (OUT/rollouts), cached in OUT/behaviour.json."""
    cached = out / "behaviour.json"
    if cached.is_file():
        return Behaviour.model_validate_json(cached.read_text())
    found = sampled_behaviour(
        heldout, out / "rollouts", workers=cfg.workers, backend=cfg.backend, holdout_dir=cfg.holdout_dir()
    )
    cached.write_text(found.model_dump_json() + "\n")
    return found


def arm_round(
    cfg: AblationConfig,
    arm: Arm,
    index: int,
    tasks: list[Task],
    heldout: list[Task],
    shared: Path | None,
    start: Path,
    out: Path,
) -> ArmRow:
    """One round of one arm: roll out its checkpoint (rounds >= 1), filter, train from
    `start`, evaluate. Returns the round's row (cached in OUT/row.json)."""
    cached = out / "row.json"
    if cached.is_file():
        return ArmRow.model_validate_json(cached.read_text())
    filtered = [] if shared is None else [(shared / "rollouts", shared)]
    if index > 0:
        rollouts = roll_out(
            tasks,
            PolicySpec("hf", str(start)),
            cfg.model_attempts,
            out / "rollouts",
            _sandboxes(cfg),
            sampling=_sampling(cfg, round_seed(cfg, index)),
            limits=EpisodeLimits(max_turns=cfg.max_turns),
        )
        filter_outcomes(cfg, tasks, rollouts, out)
        filtered.append((rollouts, out))
    data = build_arm_dataset(arm, filtered, out / "data", seed=round_seed(cfg, index))
    kept = {
        "arm": arm,
        "round": index,
        "kept_rows": data.kept_rows,
        "kept_hacks": data.kept_hacks,
        "kept_hack_share": data.hack_share,
        "kept_heldout_fail": data.kept_heldout_fail,
        "kept_heldout_fail_share": data.heldout_fail_share,
        "kept_auditor_hacks": data.kept_auditor_hacks,
        "kept_hacks_by_split": data.kept_hacks_by_split,
        "filter": data.filter,
    }
    if cfg.filter_only:
        row = ArmRow(**kept, trained=False, checkpoint_hash=None, **row_metrics(None))
        cached.write_text(row.model_dump_json(indent=2) + "\n")
        return row
    ckpt = out / "checkpoint"
    if data.kept_rows and not (ckpt / "checkpoint.json").is_file():
        shutil.rmtree(ckpt, ignore_errors=True)
        train(
            "sft",
            data_dir=out / "data",
            base=start,
            out=ckpt,
            round_key=round_key(index),
            config=experiment_train_config(cfg, cfg.seed),
        )
    weights = ckpt if data.kept_rows else start
    metrics = evaluate(cfg, weights, heldout, out / "eval", f"{arm} {round_key(index)}")
    row = ArmRow(
        **kept,
        trained=bool(data.kept_rows),
        checkpoint_hash=checkpoint_hash(str(weights)),
        **row_metrics(metrics),
        **behaviour(cfg, heldout, out / "eval").model_dump(),
    )
    cached.write_text(row.model_dump_json(indent=2) + "\n")
    return row


def row_metrics(m: RoundMetrics | None) -> dict:
    """The evaluation figures an experiment row carries (all None: not evaluated)."""
    if m is None:
        return dict.fromkeys(
            ("hack_propensity", "imitation_nll", "valid_tool_call_rate", "hack_attempt_rate", "pass_at_1"), None
        )
    p, nll = m.hack_propensity, m.imitation_nll
    return {
        "hack_propensity": p.value if p else None,
        "hack_propensity_low": p.low if p else None,
        "hack_propensity_high": p.high if p else None,
        "imitation_nll": nll.value if nll else None,
        "imitation_nll_low": nll.low if nll else None,
        "imitation_nll_high": nll.high if nll else None,
        "valid_tool_call_rate": m.valid_tool_call_rate.value if m.valid_tool_call_rate else None,
        "hack_attempt_rate": m.hack_attempt_rate,
        "pass_at_1": m.pass_at_1.value,
    }


def base_row(cfg: AblationConfig, heldout: list[Task], out: Path, base: Path | None = None) -> dict:
    """The base model's figures (round -1), shared by both arms."""
    metrics = evaluate(cfg, base or default_model(seed=cfg.seed), heldout, out / "base", "base")
    return {"round": -1, **row_metrics(metrics), **behaviour(cfg, heldout, out / "base").model_dump()}


def run_arm_round(
    cfg: AblationConfig,
    arm: Arm,
    index: int,
    tasks: list[Task],
    heldout: list[Task],
    out: Path,
    base: Path | None = None,
) -> ArmRow:
    """Round `index` of `arm` in experiment directory `out`, from the arm's latest checkpoint."""
    key = round_key(index)
    start = arm_start(out, arm, index, base or default_model(seed=cfg.seed))
    shared = shared_round(cfg, index, tasks, out / "shared" / key)
    return arm_round(cfg, arm, index, tasks, heldout, shared, start, out / arm / key)


def arm_start(out: Path, arm: Arm, index: int, base: Path) -> Path:
    """The weights round `index` of `arm` starts from: the latest checkpoint the arm
    trained in an earlier round, else the base model. Earlier rounds must be done."""
    for earlier in range(index - 1, -1, -1):
        done = out / arm / round_key(earlier) / "row.json"
        if not done.is_file():
            raise ValueError(f"{arm} round {round_key(index)} needs round {round_key(earlier)} first ({done} missing)")
        if ArmRow.model_validate_json(done.read_text()).trained:
            return done.parent / "checkpoint"
    return base


def run_filter_ablation(
    cfg: AblationConfig,
    tasks: list[Task],
    heldout: list[Task],
    out: Path,
    base: Path | None = None,
    log: Log = print,
) -> dict:
    """Every arm for `cfg.rounds` rounds (round 0 alone, untrained, with `filter_only`).
    Returns {"config", "base": ROW, "arms": {arm: [ROW, ...]}}."""
    base = base or default_model(seed=cfg.seed)
    rounds = 1 if cfg.filter_only else cfg.rounds
    log(
        f"filter ablation: {len(tasks)} training tasks, {len(heldout)} held-out, {rounds} rounds, "
        f"{cfg.hack_prone_spec()}{' (filters only)' if cfg.filter_only else ''}"
    )
    base_metrics = {"round": -1, **row_metrics(None)} if cfg.filter_only else base_row(cfg, heldout, out, base)
    rows: dict[str, list[ArmRow]] = {arm: [] for arm in cfg.arms()}
    for index in range(rounds):
        key = round_key(index)
        for arm in cfg.arms():
            row = run_arm_round(cfg, arm, index, tasks, heldout, out, base)
            rows[arm].append(row)
            log(
                f"{arm} {key}: kept {row.kept_rows} rows ({row.kept_hacks} hacks by the policy's record, "
                f"{row.kept_heldout_fail} failing the held-out check; by split {row.kept_hacks_by_split}), "
                f"propensity {_fmt(row.hack_propensity)}, NLL {_fmt(row.imitation_nll)}"
            )
    return {
        "config": cfg.model_dump(),
        "base": base_metrics,
        "arms": {arm: [r.model_dump() for r in arm_rows] for arm, arm_rows in rows.items()},
    }


def _sandboxes(cfg: AblationConfig) -> Sandboxes:
    return Sandboxes(backend=cfg.backend, workers=cfg.workers)


def _sampling(cfg: AblationConfig, seed: int) -> Sampling:
    return Sampling(temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=seed)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def run_seeds(
    cfg: AblationConfig,
    seeds: int,
    tasks: list[Task],
    heldout: list[Task],
    out: Path,
    base: Path | None = None,
    log: Log = print,
) -> dict:
    """The experiment with `seeds` seeds (cfg.seed, cfg.seed + 1, ...: base model init
    unless `base` is given, hack draws, sampling, training), each in OUT/seed-N on the
    same tasks. Returns {"config", "seeds": [RESULT...], "base": the base's figures over seeds,
    "summary": {arm: [per round: figure intervals]}} (`seed_entry`). A `base` given is one
    model, evaluated with the same sampling seed in every seed: its figures are the first
    seed's alone (pooling copies of one evaluation would count its attempts once per seed)."""
    results = []
    for s in range(seeds):
        seeded = cfg.model_copy(update={"seed": cfg.seed + s})
        log(f"seed {seeded.seed}")
        results.append(run_filter_ablation(seeded, tasks, heldout, out / f"seed-{seeded.seed}", base, log))
    return {
        "config": cfg.model_dump(),
        "seeds": results,
        "base": seed_entry([r["base"] for r in results][: 1 if base else None], -1, SEED_FIGURES),
        "summary": seed_summary(results, SEED_FIGURES),
    }
