"""Figures across rounds as a PNG (attached to the evaluation asset in the UI)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: runs in workers without a display
import matplotlib.pyplot as plt  # noqa: E402

from touchstone.evaluate.schema import RoundMetrics  # noqa: E402


def plot_rounds(rounds: list[RoundMetrics], path: Path) -> Path:
    """Verified solve rate (pass@1, pass@k with 95% intervals) and hack-attempt
    rate per round, side by side."""
    if not rounds:
        raise ValueError("plot_rounds: no rounds to plot")
    names = [m.round for m in rounds]
    x = range(len(rounds))
    fig, (solve, hacks) = plt.subplots(1, 2, figsize=(10, 4))
    for offset, attr, label in ((-0.05, "pass_at_1", "pass@1"), (0.05, "pass_at_k", f"pass@{rounds[-1].k}")):
        values = [getattr(m, attr) for m in rounds]
        solve.errorbar(
            [i + offset for i in x],
            [v.value for v in values],
            yerr=[[v.value - v.low for v in values], [v.high - v.value for v in values]],
            marker="o",
            capsize=4,
            label=label,
        )
    solve.set(title="Verified solve rate on held-out tasks", xlabel="round", ylim=(-0.02, 1.02))
    solve.set_xticks(list(x), names)
    solve.legend()
    rates = [m.hack_attempt_rate for m in rounds]
    hacks.bar(names, rates, color="tab:red")
    hacks.set_ylim(0, max(0.1, max(rates) * 1.2))  # a rate: never below zero, visible when all zero
    hacks.set(title="Hack attempts (audit findings per trajectory)", xlabel="round")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
