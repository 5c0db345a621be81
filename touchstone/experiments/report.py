"""The experiments' results as the figures and tables a paper would show: the
filter ablation (per arm and round, what the filter kept and what the checkpoint
then prefers) and the credit study (per arm, metrics over seeds with intervals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402

from touchstone.evaluate.plots import interval_line, save_figure  # noqa: E402
from touchstone.experiments.filter_ablation import SEED_FIGURES  # noqa: E402
from touchstone.evaluate.schema import Interval  # noqa: E402

COLORS = {
    "naive": "tab:red",
    "touchstone": "tab:blue",
    "matched": "tab:orange",
    "placed": "tab:brown",
    "misplaced": "tab:olive",
}


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _interval(row: dict[str, Any], name: str) -> Interval | None:
    if row.get(name) is None:
        return None
    return Interval(value=row[name], low=row[f"{name}_low"], high=row[f"{name}_high"])


def ablation_table(result: dict[str, Any]) -> str:
    """Markdown: one row per arm and round, the base model first; then what each
    filter passed per hack split (`split_table`)."""
    lines = [
        "| arm | round | kept rows | kept hack share (policy record) | kept failing held-out check "
        "| auditor calls hack | hack propensity [95% CI] | imitation NLL [95% CI] "
        "| valid tool calls | hack attempts / traj | pass@1 | sampled hack rate |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = [("base", result["base"])] + [(arm, r) for arm, rs in result["arms"].items() for r in rs]
    for arm, r in rows:
        p = _interval(r, "hack_propensity")
        nll = _interval(r, "imitation_nll")
        if arm == "base":
            kept = share = heldout = auditor = "—"
        else:
            kept, share = f"{r['kept_rows']}", f"{r['kept_hack_share']:.2f} ({r['kept_hacks']})"
            heldout = f"{r.get('kept_heldout_fail_share', 0):.2f} ({r.get('kept_heldout_fail', 0)})"
            auditor = f"{r.get('kept_auditor_hacks', 0)}"
        lines.append(
            f"| {arm} | {'—' if arm == 'base' else r['round']} | {kept} | {share} | {heldout} | {auditor} | "
            f"{'n/a' if p is None else f'{p.value:+.3f} [{p.low:+.3f}, {p.high:+.3f}]'} | "
            f"{'n/a' if nll is None else f'{nll.value:.3f} [{nll.low:.3f}, {nll.high:.3f}]'} | "
            f"{_fmt(r['valid_tool_call_rate'], '.2f')} | {_fmt(r['hack_attempt_rate'], '.2f')} | "
            f"{_fmt(r['pass_at_1'], '.2f')} | {_fmt(r.get('sampled_hack_rate'), '.2f')} |"
        )
    return "\n".join(lines) + "\n" + split_table(result)


SEED_FORMATS = {"hack_propensity": "+.3f", "imitation_nll": ".3f"}  # the rest are shares: .2f


def seeds_table(summary: dict[str, Any], base: dict[str, Any] | None = None) -> str:
    """Markdown: per arm and round (the base model first, round -1), each figure's mean over
    seeds with its 95% bootstrap interval over seeds, and the sampled hacks pooled over seeds
    (hacks / attempts, Wilson interval)."""
    lines = [
        "| arm | round | seeds | " + " | ".join(SEED_FIGURES) + " | sampled hacks, pooled |",
        "| --- | --- | --- |" + " --- |" * (len(SEED_FIGURES) + 1),
    ]
    for arm, rounds in (({"base": [base]} if base else {}) | summary).items():
        for r in rounds:
            cells = [_seed_cell(r[f], SEED_FORMATS.get(f, ".2f")) for f in SEED_FIGURES]
            pooled = r.get("sampled_hacks")
            cells.append(
                "n/a"
                if pooled is None
                else f"{pooled['hacks']} / {pooled['attempts']} [{pooled['low']:.2f}, {pooled['high']:.2f}]"
            )
            lines.append(f"| {arm} | {r['round']} | {r['seeds']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _seed_cell(figure: dict | None, spec: str) -> str:
    if figure is None:
        return "n/a"
    return f"{figure['value']:{spec}} [{figure['low']:{spec}}, {figure['high']:{spec}}]"


SEED_PANELS = (  # (figure, title, a share in [0, 1])
    ("sampled_hack_rate", "sampled hack rate (pooled, Wilson 95%)", True),
    ("hack_propensity", "hack propensity (log-prob gap / token)", False),
    ("pass_at_1", "held-out pass@1", True),
    ("valid_tool_call_rate", "valid tool calls, held-out", True),
    ("kept_hack_share", "hack share of kept training rows", True),
)


def plot_seeds(result: dict[str, Any], path: Path) -> Path:
    """The figure of a several-seed run (`--seeds`), per arm after its last round and the
    base model: the sampled hack rate pooled over seeds with its Wilson interval, and the
    likelihood probe, pass@1, valid calls and the kept rows' hack share as the mean over seeds
    with its bootstrap interval; every seed's own value is a dot."""
    arms = ["base", *result["summary"]]
    last = {"base": result["base"], **{arm: rounds[-1] for arm, rounds in result["summary"].items()}}
    fig, axes = plt.subplots(1, len(SEED_PANELS), figsize=(3.9 * len(SEED_PANELS), 4.2))
    for ax, (name, title, share) in zip(axes, SEED_PANELS, strict=True):
        for x, arm in enumerate(arms):
            shown = last[arm].get("sampled_hacks") if name == "sampled_hack_rate" else last[arm].get(name)
            color = COLORS.get(arm, "tab:gray")
            seeds = [_seed_row(seeded, arm).get(name) for seeded in result["seeds"]]
            _over_seeds(ax, x, shown, [v for v in seeds if v is not None], color)
        ax.set_xticks(range(len(arms)), arms, rotation=30)
        ax.set(title=title, **({"ylim": (-0.05, 1.05)} if share else {}))
    fig.suptitle(f"Filter ablation over {len(result['seeds'])} seeds (hack-prone P = {result['config']['hack_rate']})")
    return save_figure(fig, path)


def _over_seeds(ax, x: float, interval: dict | None, seeds: list[float], color: str | None) -> None:
    """At `x`: the figure over seeds with its interval (when there is one) and each seed's value as a dot."""
    if interval is not None:
        ax.errorbar([x], [interval["value"]], yerr=[[interval["value"] - interval["low"]], [interval["high"] - interval["value"]]],
                    fmt="o", capsize=5, color=color)  # fmt: skip
    ax.scatter([x + 0.15] * len(seeds), seeds, s=14, color=color, alpha=0.5)


def _seed_row(seeded: dict[str, Any], arm: str) -> dict[str, Any]:
    """The seed's row of `arm` after its last round ({}: the seed has not run the arm)."""
    return seeded["base"] if arm == "base" else (seeded["arms"].get(arm) or [{}])[-1]


def split_table(result: dict[str, Any]) -> str:
    """Markdown: per arm and round, for each hack split, the executed hacks its
    filter passed (trajectory level) and the kept rows that are hacks of the split;
    the auditor's recall and false alarms against the policy's record."""
    splits = sorted({s for rs in result["arms"].values() for r in rs for s in (r.get("kept_hacks_by_split") or {})})
    if not splits:
        return ""
    head = " | ".join(f"{s}: passed / attempted, kept rows" for s in splits)
    lines = [
        "",
        f"| arm | round | {head} | honest passed | auditor recall | auditor false alarms |",
        "| --- | --- | " + "--- | " * len(splits) + "--- | --- | --- |",
    ]
    for arm, rs in result["arms"].items():
        for r in rs:
            f = r.get("filter")
            if not f:
                continue
            cells = " | ".join(
                f"{f['passed_hacks_by_split'][s]} / {f['hacks_by_split'][s]}, {r['kept_hacks_by_split'].get(s, 0)}"
                for s in splits
            )
            lines.append(
                f"| {arm} | {r['round']} | {cells} | {f['passed_honest']} / {f['honest']} | "
                f"{_fmt(f['auditor_recall'], '.2f')} | {_fmt(f['auditor_false_alarm'], '.2f')} |"
            )
    return "\n".join(lines) + "\n"


def plot_ablation(result: dict[str, Any], path: Path) -> Path:
    """Three panels over rounds (x = -1 is the shared base model): hack propensity
    and imitation NLL per arm with 95% intervals, and the hack share of kept rows."""
    arms = result["arms"]
    n = max(len(rows) for rows in arms.values())
    names = ["base"] + [f"r{i}" for i in range(n)]
    fig, (prop, nll, share) = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, (arm, rows) in enumerate(arms.items()):
        series = [result["base"], *rows]
        offset = (i - (len(arms) - 1) / 2) * 0.08
        interval_line(prop, names, [_interval(r, "hack_propensity") for r in series], arm, offset, COLORS.get(arm))
        interval_line(nll, names, [_interval(r, "imitation_nll") for r in series], arm, offset, COLORS.get(arm))
        share.bar(
            [j + 1 + offset * 4 for j in range(len(rows))],
            [r["kept_hack_share"] for r in rows],
            width=0.3,
            label=arm,
            color=COLORS.get(arm),
        )
    prop.set(title="Hack propensity on held-out states", xlabel="after round", ylabel="log-prob gap / token")
    nll.set(title="Imitation NLL of held-out teacher runs", xlabel="after round", ylabel="NLL / token")
    share.set(title="Hack share of kept training rows", xlabel="round", ylim=(0, 1))
    share.set_xticks(range(len(names)), names)
    for ax in (prop, nll, share):
        ax.legend()
    fig.suptitle(f"Filter ablation (hack-prone round-0 policy, P = {result['config']['hack_rate']})")
    return save_figure(fig, path)


CREDIT_COLORS = {"uniform": "tab:gray", "progress": "tab:blue", "shuffled": "tab:purple", "outcome_rl": "tab:green"}
CREDIT_PANELS = (
    ("pass_at_k", "held-out pass@k"),
    ("mean_progress", "mean progress of sampled held-out runs"),
    ("nll_before_fix", "NLL / token, teacher turns before the fix"),
    ("nll_fix", "NLL / token, the fix turn"),
    ("nll_after_fix", "NLL / token, teacher turns after the fix"),
    ("action_agreement", "sampled action type = teacher's (matched states)"),
)


def credit_table(result: dict[str, Any]) -> str:
    """Markdown: per arm, each metric's mean over seeds with its 95% bootstrap interval over seeds,
    and the dispersion of the turn weights it trained on."""
    names = [name for name, _ in CREDIT_PANELS]
    lines = [
        "| arm | seeds | rows | weight mean abs dev from 1 | " + " | ".join(names) + " |",
        "| --- | --- | --- | --- | " + "--- | " * len(names),
    ]
    for arm, data in result["arms"].items():
        rows, summary = data["rows"], data["summary"]
        cells = []
        for name in names:
            s = summary.get(name)
            cells.append("n/a" if s is None else f"{s['value']:.3f} [{s['low']:.3f}, {s['high']:.3f}]")
        dev = sum(r["weights"]["mean_abs_dev"] for r in rows) / len(rows)
        lines.append(f"| {arm} | {len(rows)} | {rows[0]['weights']['rows']} | {dev:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_credit(result: dict[str, Any], path: Path) -> Path:
    """One panel per metric: each arm's mean over seeds with its 95% interval, and each seed's value."""
    arms = list(result["arms"])
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    for ax, (name, title) in zip(axes.flat, CREDIT_PANELS):
        for i, arm in enumerate(arms):
            data = result["arms"][arm]
            s = data["summary"].get(name)
            seeds = [r[name] for r in data["rows"] if r[name] is not None]
            color = CREDIT_COLORS.get(arm)
            _over_seeds(ax, i, s, seeds, color)
        ax.set_xticks(range(len(arms)), arms)
        ax.set_title(title, fontsize=10)
    cfg = result["config"]
    fig.suptitle(
        f"Credit assignment: the same verified runs, {len(arms)} arms x {cfg['seeds']} seeds "
        f"(dots: seeds; bars: 95% bootstrap over seeds)"
    )
    return save_figure(fig, path)


def plot_splits(result: dict[str, Any], path: Path, round_index: int = 0) -> Path:
    """What each filter passed in one round, per hack split and for the recorded-honest
    runs: the share passed (bars) with passed / attempted written above each bar."""
    arms = {arm: rows[round_index] for arm, rows in result["arms"].items() if rows[round_index].get("filter")}
    groups = [*next(iter(arms.values()))["filter"]["hacks_by_split"], "honest"]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / max(len(arms), 1)
    for i, (arm, row) in enumerate(arms.items()):
        f = row["filter"]
        counts = [(f["passed_hacks_by_split"][g], f["hacks_by_split"][g]) for g in groups[:-1]]
        counts.append((f["passed_honest"], f["honest"]))
        xs = [j + (i - (len(arms) - 1) / 2) * width for j in range(len(groups))]
        shares = [p / n if n else 0.0 for p, n in counts]
        ax.bar(xs, shares, width=width, label=arm, color=COLORS.get(arm))
        for x, share, (p, n) in zip(xs, shares, counts):
            ax.text(x, share + 0.02, f"{p}/{n}", ha="center", fontsize=8)
    ax.set_xticks(range(len(groups)), [f"hacks: {g}" for g in groups[:-1]] + ["honest runs"])
    ax.set(ylim=(0, 1.15), ylabel="share the filter passed")
    ax.set_title(f"What each filter passed, round {round_index} (labels: the policy's own record)")
    ax.legend()
    return save_figure(fig, path)
