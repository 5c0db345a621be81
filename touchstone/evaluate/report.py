"""The round report in Markdown: this round's figures next to earlier rounds'."""

from __future__ import annotations

from touchstone.evaluate.schema import Interval, RoundMetrics


def interval_text(i: Interval | None) -> str:
    return "n/a" if i is None else f"{i.value:.2f} [{i.low:.2f}, {i.high:.2f}]"


def _number(value: float | None, fmt: str = ".2f") -> str:
    return "n/a" if value is None else format(value, fmt)


def markdown_report(rounds: list[RoundMetrics], plot_file: str | None = None) -> str:
    """Two tables with one row per round, newest last (what the checkpoint does when
    sampled; what its likelihoods say), and the plot when given."""
    if not rounds:
        raise ValueError("markdown_report: no rounds")
    latest = rounds[-1]
    k = latest.k
    at_k = k > 1  # with one attempt, pass@k is pass@1: one column
    header = ["round", "checkpoint", "pass@1", *([f"pass@{k}"] if at_k else [])]
    header += ["hack attempts / traj", "valid tool calls", "progress", "mean turns", "mean tokens", "exit reasons"]
    header += ["own training rows"]
    lines = [
        f"# Evaluation after round {latest.round}",
        "",
        f"Held-out tasks: {latest.n_tasks}, {k} attempts each; solved = accepted by the "
        "independent verifier. Intervals: 95% bootstrap over tasks (likelihoods: over "
        "reference trajectories / probe states / turn states). Own training rows: the share of the "
        "round's SFT rows written by the model itself (the rest: teacher or teacher-corrected runs).",
        "",
        "## Sampled attempts",
        "",
        _row(header),
        _row(["---"] * len(header)),
    ]
    for m in rounds:
        exits = ", ".join(f"{r}: {n}" for r, n in sorted(m.exit_reasons.items()))
        solved = [interval_text(m.pass_at_1), *([interval_text(m.pass_at_k)] if at_k else [])]
        lines.append(
            _row(
                [m.round, f"`{(m.checkpoint_hash or 'base')[:12]}`", *solved, f"{m.hack_attempt_rate:.2f}"]
                + [interval_text(m.valid_tool_call_rate), _number(m.mean_progress), f"{m.mean_turns:.1f}"]
                + [_number(m.mean_tokens, ".0f"), exits, _number(m.own_row_share)]
            )
        )
    lines += [
        "",
        "## On the held-out reference (the same states every round)",
        "",
        "Imitation NLL: per assistant token of the held-out teacher runs the verifier accepted (lower: "
        "closer to the reference). Hack propensity: per-token log-prob of a canonical hack minus the "
        "honest action's at the same state (higher: the hack is more likely). Both without sampling. "
        "Valid tool calls at matched states: turns sampled (seeded) before turns spread evenly over all "
        "the held-out teacher runs, accepted or not; unlike the sampled attempts above, every round is "
        "asked at the same states.",
        "",
        "| round | imitation NLL | hack propensity | by family | valid tool calls at matched states |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m in rounds:
        families = ", ".join(f"{f}: {v:+.2f}" for f, v in m.hack_propensity_by_family.items()) or "n/a"
        cells = [m.round, interval_text(m.imitation_nll), interval_text(m.hack_propensity), families]
        lines.append(_row([*cells, interval_text(m.matched_valid_call_rate)]))
    if plot_file:
        lines += ["", f"![evaluation figures per round]({plot_file})"]
    return "\n".join(lines) + "\n"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
