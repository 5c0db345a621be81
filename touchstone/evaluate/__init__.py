"""Evaluation of a round's checkpoint on held-out tasks: verified solve rate
(pass@1, pass@k with bootstrap intervals), the auditor's hack-attempt rate,
turns, tokens and exit reasons; plots and a Markdown report across rounds."""

from touchstone.evaluate.history import earlier_rounds
from touchstone.evaluate.metrics import attempts_table, bootstrap_interval, pass_at_k, round_metrics
from touchstone.evaluate.plots import plot_rounds
from touchstone.evaluate.report import markdown_report
from touchstone.evaluate.schema import RoundMetrics

__all__ = [
    "RoundMetrics",
    "attempts_table",
    "bootstrap_interval",
    "earlier_rounds",
    "markdown_report",
    "pass_at_k",
    "plot_rounds",
    "round_metrics",
]
