"""The round report in Markdown: this round's figures next to earlier rounds'."""

from __future__ import annotations

from touchstone.evaluate.schema import Interval, RoundMetrics


def _interval(i: Interval) -> str:
    return f"{i.value:.2f} [{i.low:.2f}, {i.high:.2f}]"


def markdown_report(rounds: list[RoundMetrics], plot_file: str | None = None) -> str:
    """A table with one row per round, newest last, and the plot when given."""
    if not rounds:
        raise ValueError("markdown_report: no rounds")
    latest = rounds[-1]
    k = latest.k
    lines = [
        f"# Evaluation after round {latest.round}",
        "",
        f"Held-out tasks: {latest.n_tasks}, {k} attempts each; solved = accepted by the "
        "independent verifier. Intervals: 95% bootstrap over tasks.",
        "",
        f"| round | checkpoint | pass@1 | pass@{k} | hack attempts / traj | mean turns | mean tokens | exit reasons |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in rounds:
        tokens = "n/a" if m.mean_tokens is None else f"{m.mean_tokens:.0f}"
        exits = ", ".join(f"{r}: {n}" for r, n in sorted(m.exit_reasons.items()))
        lines.append(
            f"| {m.round} | `{(m.checkpoint_hash or 'base')[:12]}` | {_interval(m.pass_at_1)} | "
            f"{_interval(m.pass_at_k)} | {m.hack_attempt_rate:.2f} | {m.mean_turns:.1f} | {tokens} | {exits} |"
        )
    if plot_file:
        lines += ["", f"![solve rate and hack attempts per round]({plot_file})"]
    return "\n".join(lines) + "\n"
