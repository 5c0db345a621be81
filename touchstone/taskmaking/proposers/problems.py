"""Problems importer: HumanEval/MBPP-style JSONL (`prompt`, `canonical_solution`,
`test`, `entry_point`, optional `task_id`) into tasks. The workspace holds a stub
(`solution.py`: the prompt's signature and docstring, body `raise
NotImplementedError`), the hidden test calls the problem's `check` on the entry
point, and the reference is prompt + canonical solution."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from touchstone.taskmaking.proposers.common import (
    SOLUTION,
    SOLUTION_TESTS,
    Candidate,
    finalize,
    reject,
    run_candidates,
    slug,
    write_solution_task,
)
from touchstone.harness import TestRunResult
from touchstone.tasks.schema import EntryPoint, Task, TaskSource
from touchstone.taskmaking.validate import Validation, ValidationConfig


class Problem(BaseModel):
    model_config = ConfigDict(extra="ignore")  # HumanEval/MBPP dumps carry extra fields

    task_id: str | None = None
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str


@dataclass
class ProblemsResult:
    out: Path
    index: Path
    kept: int
    rejected: int


def _indent(body: str) -> str:
    for line in body.splitlines():
        if line.strip():
            return line[: len(line) - len(line.lstrip())] or "    "
    return "    "


def stub_for(p: Problem) -> str:
    prompt = p.prompt if p.prompt.endswith("\n") else p.prompt + "\n"
    return f"{prompt}{_indent(p.canonical_solution)}raise NotImplementedError\n"


def reference_for(p: Problem) -> str:
    prompt = p.prompt if p.prompt.endswith("\n") else p.prompt + "\n"
    return prompt + p.canonical_solution.rstrip() + "\n"


def test_for(p: Problem) -> str:
    return (
        f"from solution import {p.entry_point}\n\n{p.test.rstrip()}\n\n\n"
        f"def test_{p.entry_point}():\n    check({p.entry_point})\n"
    )


def statement_for(p: Problem) -> str:
    return (
        f"Implement the function `{p.entry_point}` in `{SOLUTION}` (currently a stub that raises "
        f"NotImplementedError) so that it does what its docstring describes:\n\n```python\n{p.prompt.strip()}\n```"
    )


def write_problem_task(task_dir: Path, task_id: str, p: Problem, origin: str) -> tuple[Task, TestRunResult | None]:
    meta = Task(
        id=task_id,
        statement=statement_for(p),
        timeout_s=30,
        entry_points=[EntryPoint(module="solution", function=p.entry_point)],
        fail_to_pass=[f"{SOLUTION_TESTS}::test_{p.entry_point}"],
        pass_to_pass=[],
        source=TaskSource(proposer="problems", origin=origin, unit=p.task_id or task_id),
    )
    return write_solution_task(task_dir, meta, stub=stub_for(p), reference=reference_for(p), tests=test_for(p)), None


def read_problems(path: Path) -> Iterator[tuple[str, Problem | Validation]]:
    """(task id, problem or a `malformed` verdict naming the line) per JSONL line."""
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fallback = f"{slug(path.stem)}-{lineno}"
        try:
            problem = Problem.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            detail = f"{path}:{lineno}: " + (
                exc.msg
                if isinstance(exc, json.JSONDecodeError)
                else "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            )
            yield fallback, reject(fallback, "malformed", detail)
            continue
        if not problem.entry_point.isidentifier():
            yield (
                fallback,
                reject(fallback, "malformed", f"{path}:{lineno}: entry_point {problem.entry_point!r} is not a name"),
            )
            continue
        yield (slug(problem.task_id) if problem.task_id else fallback), problem


def candidates(path: Path) -> Iterator[Candidate]:
    origin = path.name
    seen: set[str] = set()
    for task_id, item in read_problems(path):
        while task_id in seen:  # duplicate ids in a dump must not overwrite each other
            task_id += "-dup"
        seen.add(task_id)
        unit = item.task_id or task_id if isinstance(item, Problem) else task_id
        source = TaskSource(proposer="problems", origin=origin, unit=unit)
        if isinstance(item, Validation):
            yield Candidate(task_id, source, lambda _d, v=item: v)
        else:
            yield Candidate(task_id, source, lambda d, i=task_id, p=item: write_problem_task(d, i, p, origin))


def import_problems(jsonl: Path, out: Path, *, workers: int = 2, cfg: ValidationConfig | None = None) -> ProblemsResult:
    rows, kept = run_candidates(
        candidates(jsonl), out, n=None, workers=workers, cfg=cfg or ValidationConfig(), desc="problem tasks"
    )
    index = finalize(out, rows)
    return ProblemsResult(out, index, len(kept), len(rows) - len(kept))
