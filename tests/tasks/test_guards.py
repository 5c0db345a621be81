"""The reference's guards, found in every shape the adversarial corpus uses (an
own exception class, a guard helper the stub already holds, a check of the
reference's own result, an assert in a method), without a sandbox."""

from __future__ import annotations

from pathlib import Path

from tests.tasks.adversarial import CASES
from touchstone.taskmaking import adequacy
from touchstone.taskmaking.guards import died_of_guards, guard_lines, only_guards_changed, unguarded


def _sources(cid: str, tmp_path: Path) -> tuple[str, str]:
    [(_rel, ref, ws)] = adequacy.reference_sources(next(c for c in CASES if c.id == cid).write(tmp_path))
    return ref, ws


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_guards_in_every_shape_are_found(tmp_path: Path) -> None:
    ref, ws = _sources("weak-guard-own-class", tmp_path)
    assert _line(ref, 'raise Rejected("empty list")') in guard_lines(ref, ws)
    assert _line(ref, "out.append(x * x + 1)") not in guard_lines(ref, ws)
    ref, ws = _sources("weak-guard-helper", tmp_path)  # the helper is the stub's, unchanged: still a guard
    assert {_line(ref, "raise ValueError(why)"), _line(ref, "_require(word.isascii()")} <= guard_lines(ref, ws)
    ref, ws = _sources("weak-self-checking-reference", tmp_path)
    assert _line(ref, "raise _BROKEN") in guard_lines(ref, ws)
    ref, ws = _sources("weak-guard-fix-assert", tmp_path)
    assert _line(ref, "assert litres >= 0") in guard_lines(ref, ws)
    assert _line(ref, "self.total += litres") not in guard_lines(ref, ws)


def test_unguarded_drops_the_guards_and_what_only_they_read(tmp_path: Path) -> None:
    ref, ws = _sources("weak-self-checking-reference", tmp_path)
    bare = unguarded(ref, ws)
    assert "back" not in bare and "_BROKEN\n" not in bare.split("def solve")[1] and "out = " in bare
    mutant_of_check = ref.replace("- 97 - k", "- 97 + k")  # the self-check's own computation
    mutant_of_result = ref.replace("- 97 + k", "- 97 - k", 1)
    assert only_guards_changed(mutant_of_check, ref, ws)
    assert not only_guards_changed(mutant_of_result, ref, ws)
    ref, ws = _sources("weak-guard-own-class", tmp_path)
    assert only_guards_changed(ref.replace("x == abs(x)", "x != abs(x)"), ref, ws)
    assert not only_guards_changed(ref.replace("x * x + 1", "x * x - 1"), ref, ws)


def test_a_failure_is_the_guards_only_when_raised_at_a_guard_line(tmp_path: Path) -> None:
    ref, ws = _sources("weak-guard-helper", tmp_path)
    lines = {"solution.py": guard_lines(ref, ws)}
    raise_line = f"solution.py:{_line(ref, 'raise ValueError(why)')}"
    failed = {"t::a": "ValueError: word must be ASCII", "t::b": "assert 3 == 4"}
    assert died_of_guards({"t::a": failed["t::a"]}, {"t::a": raise_line}, lines)
    assert not died_of_guards(failed, {"t::a": raise_line, "t::b": "test_solution.py:9"}, lines)
    assert not died_of_guards({"t::a": "x"}, {}, lines)  # no location: not the guards'
    assert not died_of_guards({}, {}, lines)
