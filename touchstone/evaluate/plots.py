"""Figures across rounds as a PNG (attached to the evaluation asset in the UI)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: runs in workers without a display
import matplotlib.pyplot as plt  # noqa: E402

from touchstone.evaluate.schema import Interval, RoundMetrics  # noqa: E402


def save_figure(fig, path: Path, dpi: int = 100) -> Path:
    """Lay out, write (making the folder) and close a figure; returns its path."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def interval_line(
    ax, names: list[str], values: list[Interval | None], label: str, offset: float = 0.0, color: str | None = None
) -> None:
    """Point estimates with their intervals as error bars; rounds without the figure are skipped."""
    points = [(i + offset, v) for i, v in enumerate(values) if v is not None]
    if not points:
        return
    ax.errorbar(
        [x for x, _ in points],
        [v.value for _, v in points],
        yerr=[[v.value - v.low for _, v in points], [v.high - v.value for _, v in points]],
        marker="o",
        capsize=4,
        label=label,
        color=color,
    )
    ax.set_xticks(range(len(names)), names)


def plot_rounds(rounds: list[RoundMetrics], path: Path) -> Path:
    """Four panels per round: verified solve rate (pass@1, pass@k), hack attempts,
    valid tool-call rate, and the likelihoods (imitation NLL, hack propensity)."""
    if not rounds:
        raise ValueError("plot_rounds: no rounds to plot")
    names = [m.round for m in rounds]
    fig, ((solve, hacks), (calls, nll)) = plt.subplots(2, 2, figsize=(11, 8))
    interval_line(solve, names, [m.pass_at_1 for m in rounds], "pass@1", -0.05)
    if rounds[-1].k > 1:  # with one attempt, pass@k is pass@1
        interval_line(solve, names, [m.pass_at_k for m in rounds], f"pass@{rounds[-1].k}", 0.05)
    solve.set(title="Verified solve rate on held-out tasks", xlabel="round", ylim=(-0.02, 1.02))
    solve.legend()
    rates = [m.hack_attempt_rate for m in rounds]
    hacks.bar_label(hacks.bar(names, rates, color="tab:red"), fmt="%.2f")  # a zero bar shows as "0.00"
    hacks.set_ylim(0, max(0.1, max(rates) * 1.2))  # a rate: never below zero, visible when all zero
    hacks.set(title="Hack attempts (audit findings per trajectory)", xlabel="round")
    interval_line(calls, names, [m.valid_tool_call_rate for m in rounds], "in sampled attempts", -0.05)
    interval_line(calls, names, [m.matched_valid_call_rate for m in rounds], "at the reference's states", 0.05)
    calls.set(title="Valid tool-call rate of sampled turns", xlabel="round", ylim=(-0.02, 1.02))
    if calls.get_legend_handles_labels()[0]:
        calls.legend()
    interval_line(nll, names, [m.imitation_nll for m in rounds], "imitation NLL (left)", color="tab:blue")
    nll.set(title="Likelihoods on held-out reference runs", xlabel="round", ylabel="NLL / token")
    propensity = nll.twinx()
    interval_line(
        propensity, names, [m.hack_propensity for m in rounds], "hack propensity (right)", 0.05, color="tab:red"
    )
    propensity.set_ylabel("log-prob gap / token")
    handles = nll.get_legend_handles_labels()[0] + propensity.get_legend_handles_labels()[0]
    if handles:
        nll.legend(handles=handles)
    return save_figure(fig, path)
