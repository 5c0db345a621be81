"""The filter ablation's result as the figure and table a paper would show:
per arm and round, what the filter kept and what the checkpoint then prefers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402

from touchstone.evaluate.plots import interval_line  # noqa: E402
from touchstone.evaluate.schema import Interval  # noqa: E402

COLORS = {"naive": "tab:red", "touchstone": "tab:blue", "matched": "tab:orange"}


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
        "| valid tool calls | hack attempts / traj | pass@1 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
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
            f"{_fmt(r['pass_at_1'], '.2f')} |"
        )
    return "\n".join(lines) + "\n" + split_table(result)


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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
