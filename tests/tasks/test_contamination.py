"""Contamination: a benchmark problem with renamed identifiers and a reworded
statement is found in a JSONL benchmark and in a held-out task set; unrelated
tasks are not, and the nearest match is reported either way."""

from __future__ import annotations

from pathlib import Path

from tests.tasks.adversarial import BENCHMARK, CASES
from touchstone.tasks.contamination import nearest

CONTAM = next(c for c in CASES if c.id == "contam-renamed")
HONEST = next(c for c in CASES if c.id == "honest-runs")


def test_renamed_benchmark_problem_is_found(tmp_path: Path) -> None:
    match, n = nearest(CONTAM.write(tmp_path), [BENCHMARK])
    assert n == 3 and match is not None
    assert match.contaminated and match.id == "HumanEval/0" and match.code_similarity >= 0.6


def test_unrelated_task_reports_its_nearest_without_a_match(tmp_path: Path) -> None:
    match, n = nearest(HONEST.write(tmp_path), [BENCHMARK])
    assert n == 3 and match is not None and not match.contaminated and match.score < 0.4


def test_held_out_task_set_counts_and_the_task_itself_is_skipped(tmp_path: Path) -> None:
    held = tmp_path / "heldout"
    original = HONEST.write(held, "held-1")
    copy = HONEST.write(tmp_path / "new", "candidate")
    # the same task, re-proposed under a new id with a reworded statement
    copy.model_copy(update={"statement": "Encode runs: turn a string into (char, run length) tuples."}).write(copy.dir)
    match, _ = nearest(copy, [held])
    assert match.contaminated and match.id == "held-1" and match.same_ast
    match, n = nearest(original, [held])
    assert n == 0 and match is None
