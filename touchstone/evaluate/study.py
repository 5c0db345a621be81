"""A study: several runs of one recipe (seeds), each in its own data root, side by side.

For each run, the held-out figures from where the rounds started (`base_evaluation`) through
every round (a round that made no update keeps its starting weights, so it carries their
figures, marked) to its control arms; then, per stage, the mean over the runs with the
lowest and highest run; then, paired over the held-out tasks, per run and over all runs, the
last round minus the base (what the rounds gained) and the loop minus its control arm (what
the later rounds' own runs gained over more steps on the first round's). What `touchstone
round study HOME...` prints, writes and plots.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from pydantic import BaseModel

from touchstone.evaluate.metrics import paired_interval, per_task_difference
from touchstone.evaluate.plots import plt, save_figure
from touchstone.evaluate.report import interval_text
from touchstone.evaluate.schema import Interval, RoundMetrics
from touchstone.paths import Asset


class StudyPoint(BaseModel):
    """One run's held-out figures at one stage (`base`, a round key, or `control rNNN`)."""

    run: str
    stage: str
    updated: bool = True  # False: a round that trained nothing (the figures of the weights it kept)
    k: int
    pass_at_1: Interval
    pass_at_k: Interval
    own_row_share: float | None = None


class StageSummary(BaseModel):
    """A stage over the runs that reached it: the mean point estimate, the lowest and highest."""

    stage: str
    runs: int
    pass_at_1: Interval  # value: the mean over runs; low / high: the lowest / highest run
    pass_at_k: Interval


class PairedGap(BaseModel):
    """One evaluation minus another on the same held-out tasks (paired bootstrap over tasks):
    a round minus its control arm (`versus` "control"), or a run's last round minus the weights
    its rounds started from (`versus` "base"). `run` "all runs" pools every run's last such
    pair: per task, the mean of the runs' differences, so a task counts once however many
    seeds answered it."""

    run: str
    round: str
    versus: str
    k: int
    tasks: int
    difference_at_1: Interval
    difference_at_k: Interval


def read_run(home: Path, run: str) -> list[StudyPoint]:
    """The stages a data root holds, in order: base, rounds, control arms."""
    points = []
    base = home / Asset.BASE_EVALUATION / "metrics.parquet"
    if base.is_file():
        points.append(_point(run, "base", base))
    rounds = sorted(p for p in (home / "rounds").glob("r*") if p.is_dir())
    for round_dir in rounds:
        metrics = round_dir / Asset.ROUND_EVALUATION / "metrics.parquet"
        if metrics.is_file():
            points.append(_point(run, round_dir.name, metrics))
        elif (round_dir / Asset.CHECKPOINT / "NO_UPDATE.json").is_file() and points:
            points.append(points[-1].model_copy(update={"stage": round_dir.name, "updated": False}))
    for round_dir in rounds:
        metrics = round_dir / Asset.CONTROL_EVALUATION / "metrics.parquet"
        if metrics.is_file():
            points.append(_point(run, f"control {round_dir.name}", metrics))
    return points


def _point(run: str, stage: str, path: Path) -> StudyPoint:
    m = RoundMetrics.from_flat(pl.read_parquet(path).row(0, named=True))
    return StudyPoint(
        run=run, stage=stage, k=m.k, pass_at_1=m.pass_at_1, pass_at_k=m.pass_at_k, own_row_share=m.own_row_share
    )


def control_gaps(homes: list[Path]) -> list[PairedGap]:
    """Per run, every round with a control arm; then, with two or more runs, all runs pooled."""
    gaps, last = [], []
    for home in homes:
        found = sorted(d.parents[1] for d in home.glob(f"rounds/r*/{Asset.CONTROL_EVALUATION}/attempts.parquet"))
        for round_dir in found:
            diff = _difference(round_dir / Asset.ROUND_EVALUATION, round_dir / Asset.CONTROL_EVALUATION)
            gaps.append(_gap(home.name, round_dir.name, "control", diff))
        if found:
            last.append(diff)
    return gaps + _pooled(last, "last controlled", "control")


def rises(homes: list[Path]) -> list[PairedGap]:
    """Per run, its last evaluated round minus the weights its rounds started from
    (`base_evaluation`): what the rounds gained in all; then, with two or more runs, pooled."""
    gaps, diffs = [], []
    for home in homes:
        found = sorted(d.parents[1] for d in home.glob(f"rounds/r*/{Asset.ROUND_EVALUATION}/attempts.parquet"))
        base = home / Asset.BASE_EVALUATION
        if found and (base / "attempts.parquet").is_file():
            diffs.append(_difference(found[-1] / Asset.ROUND_EVALUATION, base))
            gaps.append(_gap(home.name, found[-1].name, "base", diffs[-1]))
    return gaps + _pooled(diffs, "last evaluated", "base")


def _difference(first: Path, second: Path) -> tuple[int, pl.DataFrame]:
    """Per task, the evaluation in `first` minus the one in `second`, at `first`'s k."""
    k = RoundMetrics.from_flat(pl.read_parquet(first / "metrics.parquet").row(0, named=True)).k
    return k, per_task_difference(pl.read_parquet(first / "attempts.parquet"),
                                  pl.read_parquet(second / "attempts.parquet"), k)  # fmt: skip


def _pooled(diffs: list[tuple[int, pl.DataFrame]], round_key: str, versus: str) -> list[PairedGap]:
    if len(diffs) < 2:
        return []
    # sorted: group_by's order varies from call to call, and with it the bootstrap's resamples
    pooled = pl.concat([d for _, d in diffs]).group_by("task_id").mean().sort("task_id")
    return [_gap("all runs", round_key, versus, (diffs[-1][0], pooled))]


def _gap(run: str, round_key: str, versus: str, diff: tuple[int, pl.DataFrame]) -> PairedGap:
    k, table = diff
    at_1, at_k = paired_interval(table)
    return PairedGap(run=run, round=round_key, versus=versus, k=k, tasks=table.height, difference_at_1=at_1,
                     difference_at_k=at_k)  # fmt: skip


def summarize(points: list[StudyPoint]) -> list[StageSummary]:
    """Per stage: the base, the rounds, the control arms."""
    stages = sorted({p.stage for p in points}, key=lambda stage: (stage != "base", stage.startswith("control"), stage))
    return [_summary(stage, [p for p in points if p.stage == stage]) for stage in stages]


def _summary(stage: str, points: list[StudyPoint]) -> StageSummary:
    def spread(values: list[float]) -> Interval:
        return Interval(value=sum(values) / len(values), low=min(values), high=max(values))

    return StageSummary(
        stage=stage,
        runs=len(points),
        pass_at_1=spread([p.pass_at_1.value for p in points]),
        pass_at_k=spread([p.pass_at_k.value for p in points]),
    )


def study_markdown(points: list[StudyPoint], gaps: list[PairedGap] = ()) -> str:
    """Every run's stages with their bootstrap intervals over tasks, the mean over runs, then
    each run's last round minus its base and the loop minus its control arms."""
    if not points:
        raise ValueError("no evaluated stage in these data roots: run rounds first")
    k = points[-1].k
    lines = [
        f"| run | stage | pass@1 [95% CI] | pass@{k} [95% CI] | own rows |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in points:
        stage = p.stage if p.updated else f"{p.stage} (no update)"
        share = "" if p.own_row_share is None else f"{p.own_row_share:.2f}"
        lines.append(f"| {p.run} | {stage} | {interval_text(p.pass_at_1)} | {interval_text(p.pass_at_k)} | {share} |")
    lines += ["", f"| stage | runs | pass@1 mean (lowest, highest run) | pass@{k} mean (lowest, highest run) |"]
    lines.append("| --- | --- | --- | --- |")
    for s in summarize(points):
        lines.append(f"| {s.stage} | {s.runs} | {_spread_text(s.pass_at_1)} | {_spread_text(s.pass_at_k)} |")
    for versus, title in (("base", "last round minus base"), ("control", "loop minus control")):
        if chosen := [g for g in gaps if g.versus == versus]:
            lines += ["", f"| {title}, paired over tasks | round | tasks | pass@1 [95% CI] | pass@{k} [95% CI] |"]
            lines.append("| --- | --- | --- | --- | --- |")
            lines += [
                f"| {g.run} | {g.round} | {g.tasks} | {interval_text(g.difference_at_1)} "
                f"| {interval_text(g.difference_at_k)} |"
                for g in chosen
            ]
    return "\n".join(lines) + "\n"


def _spread_text(i: Interval) -> str:
    return f"{i.value:.2f} ({i.low:.2f}, {i.high:.2f})"


def plot_study(points: list[StudyPoint], path: Path) -> Path:
    """pass@k per stage: each run a thin line with its intervals, the mean over runs a thick one
    (at the stages every run reached); each control arm a hollow square in its run's colour beside
    the round it controls (one colour for every control hid which run it belonged to)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    draw_study(ax, points)
    return save_figure(fig, path, dpi=110)


def draw_study(ax, points: list[StudyPoint]) -> None:
    """`plot_study`'s figure on `ax`: per run its line, then its control arms (error bar containers in that order)."""
    loop = [p for p in points if not p.stage.startswith("control")]
    stages = sorted({p.stage for p in loop}, key=lambda stage: (stage != "base", stage))
    runs = list(dict.fromkeys(p.run for p in points))
    control_label = "control arm (its run's colour)"  # in the legend once, however many arms
    for n, run in enumerate(runs):
        mine = [p for p in loop if p.run == run]
        xs = [stages.index(p.stage) + (n - (len(runs) - 1) / 2) * 0.06 for p in mine]
        drawn = ax.errorbar(xs, [p.pass_at_k.value for p in mine],
                            yerr=[[p.pass_at_k.value - p.pass_at_k.low for p in mine],
                                  [p.pass_at_k.high - p.pass_at_k.value for p in mine]],
                            marker="o", capsize=3, linewidth=0.8, alpha=0.6, label=f"{run}")  # fmt: skip
        for c in (p for p in points if p.run == run and p.stage.startswith("control")):
            x = stages.index(c.stage.split()[-1]) + 0.25 + n * 0.06
            ax.errorbar([x], [c.pass_at_k.value], yerr=[[c.pass_at_k.value - c.pass_at_k.low],
                        [c.pass_at_k.high - c.pass_at_k.value]], marker="s", markerfacecolor="white",
                        capsize=3, color=drawn[0].get_color(), alpha=0.8,
                        label=control_label)  # fmt: skip
            control_label = None
    # the mean only where every run got to: beyond, one run's value would pass for everyone's
    reached = [(i, s) for i, s in enumerate(summarize(loop)) if s.runs == len(runs)]
    ax.plot([i for i, _ in reached], [s.pass_at_k.value for _, s in reached], color="black", linewidth=2.5,
            label=f"mean of {len(runs)} runs")  # fmt: skip
    ax.set_xticks(range(len(stages)), stages)
    ax.set(title=f"Held-out pass@{points[-1].k} per stage", xlabel="stage", ylabel="verified solve rate",
           ylim=(-0.02, 1.02))  # fmt: skip
    ax.legend(fontsize=8, loc="upper left")


def write_study(homes: list[Path], out: Path) -> str:
    """Read the runs (each named by its data root's directory) and write OUT/study.md,
    OUT/study.json (every point, for re-plotting), OUT/rises.json (each run's last round minus
    its base), OUT/controls.json (the loop minus its control arms) and OUT/study.png; returns
    study.md's text."""
    points = [p for home in homes for p in read_run(home, home.name)]
    gained, controlled = rises(homes), control_gaps(homes)
    text = study_markdown(points, gained + controlled)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.md").write_text(text)
    (out / "study.json").write_text(json.dumps([p.model_dump() for p in points], indent=1) + "\n")
    for name, gaps in (("rises.json", gained), ("controls.json", controlled)):
        (out / name).write_text(json.dumps([g.model_dump() for g in gaps], indent=1) + "\n")
    plot_study(points, out / "study.png")
    return text
