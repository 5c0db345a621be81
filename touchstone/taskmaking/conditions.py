"""The conditions validation runs tests under: exactly grading's (the harness's
run plan: hash seed and test order of run i, on the backend rounds grade with),
plus extra runs grading never makes, so a test that reads its conditions gains
nothing: randomized plan indices (other hash seeds and shuffles), a shifted
wall clock, the other sandbox backend, and more of all of these when the
reference or the tests touch the clock or unseeded randomness.

A condition is a `Condition` record; `run_condition` runs the hidden tests of
a task on workspace + overlay files under one and returns a `RunRecord`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

from pydantic import BaseModel

from touchstone.tasks.environment import task_environment
from touchstone.harness import run_hidden_tests, run_plan
from touchstone.harness.grading import faketime_library
from touchstone.sandbox import available_backends, resolve_backend
from touchstone.tasks.mutate import changed_source
from touchstone.tasks.schema import Task


# reads of the clock or of unseeded randomness: such a task gets more runs
_NONDETERMINISM = re.compile(
    r"\b(time\.(time|time_ns|monotonic|perf_counter|localtime|gmtime|ctime|strftime)|datetime\.(now|today|utcnow)"
    r"|date\.today|os\.urandom|os\.getrandom|uuid\.uuid[14]|secrets\.|SystemRandom|random\.\w+\(|from random import"
    r"|import random|hash\()"
)


class Condition(BaseModel):
    """One way to run the tests: a plan index (hash seed and order), a backend,
    and a clock offset in seconds (0: the real clock)."""

    run: int
    backend: str
    clock_offset_s: int = 0
    grading: bool = False  # exactly a condition grading uses

    @property
    def seed(self) -> int:
        return run_plan(self.run)[0]

    @property
    def order(self) -> str:
        return run_plan(self.run)[1]

    def label(self) -> str:
        extra = f", clock {self.clock_offset_s:+d}s" if self.clock_offset_s else ""
        return f"run {self.run} (seed {self.seed}, {self.order}, {self.backend}{extra})"


class RunRecord(BaseModel):
    """What one run showed; part of a validation's evidence."""

    role: str  # start | reference | mutant | baseline | leak_probe | flag_probe | solver | unguarded
    what: str = ""
    condition: Condition
    passed: int = 0
    failed: dict[str, str] = {}  # node id -> failure message (first lines; after 10, the first line only)
    raised_at: dict[str, str] = {}  # node id -> "path:line" its exception was raised at (innermost frame)
    timed_out: bool = False
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.timed_out and self.passed > 0


def grading_backend(configured: str) -> str:
    """The backend grading uses for `configured` ("auto": Docker when it is up)."""
    return resolve_backend(configured)


def other_backend(backend: str) -> str | None:
    others = [b for b in available_backends() if b != backend]
    return others[0] if others else None


def _random_run() -> int:
    return 3 + secrets.randbelow(2**31)  # never one of grading's plan indices; unpredictable to the task


def _clock_offset() -> int:
    """Somewhere between a day and a year and a half ahead, at a random second."""
    return 86_400 + secrets.randbelow(500 * 86_400)


def touches_nondeterminism(task: Task) -> list[str]:
    """Where the reference's change or the hidden tests read the clock or unseeded
    randomness. Of the reference, only what it changed counts (`mutate.changed_source`:
    the functions its changed lines sit in, all of a new file): the code around the
    change is the same in the starting workspace's runs and in every reference run,
    and a real library's module almost always reads the clock or calls `hash(`
    somewhere (a 6,400-line module gave an imported instance seven more runs)."""
    found = []
    for label, text in _scanned(task):
        if _NONDETERMINISM.search(text) and not (
            "random" in text
            and re.search(r"\bseed\(\s*\d", text)
            and not re.search(r"time\.|datetime|urandom|uuid|secrets", text)
        ):
            found.append(label)
    return found


def _scanned(task: Task) -> Iterator[tuple[str, str]]:
    """(label, text to scan) of the reference's changed code and every hidden test file."""
    for root, label in ((task.reference_dir, "reference"), (task.hidden_tests_dir, "hidden_tests")):
        for p in sorted(root.rglob("*.py")) if root else []:
            rel = p.relative_to(root).as_posix()
            text = p.read_text(errors="replace")
            if label == "reference":
                current = task.workspace_dir / rel
                text = changed_source(text, current.read_text(errors="replace") if current.is_file() else None)
            yield f"{label}/{rel}", text


def reference_conditions(
    backend: str, *, k: int, extra: int, clock_runs: int, cross_backend: bool, nondeterministic: bool, more: int
) -> list[Condition]:
    """Grading's runs 0..k-1 first (the verifier grades run 0 and re-runs 1, 2;
    solving uses run 0), then the extra ones."""
    conds = [Condition(run=i, backend=backend, grading=True) for i in range(k)]
    n_extra = extra + (more if nondeterministic else 0)
    n_clock = clock_runs * (2 if nondeterministic else 1) if faketime_library() else 0
    conds += [Condition(run=_random_run(), backend=backend) for _ in range(n_extra)]
    conds += [Condition(run=_random_run(), backend=backend, clock_offset_s=_clock_offset()) for _ in range(n_clock)]
    other = other_backend(backend) if cross_backend else None
    if other:
        conds.append(Condition(run=_random_run(), backend=other))
    return conds


def start_conditions(backend: str) -> list[Condition]:
    """Grading's run 0 (what a solver's attempt is graded with) and one unpredictable one."""
    return [Condition(run=0, backend=backend, grading=True), Condition(run=_random_run(), backend=backend)]


def run_condition(
    task: Task,
    cond: Condition,
    *,
    role: str,
    what: str = "",
    files: dict[str, str | bytes] | None = None,
    with_reference: bool = False,
    timeout: float | None = None,
    patch: str | None = None,
) -> RunRecord:
    """The hidden tests on workspace (+ reference) + files (+ patch) under `cond`."""
    overlays = [task.reference_dir] if with_reference and task.reference_dir else []
    run = run_hidden_tests(task, required=task.required_tests, environment=task_environment(task), overlays=overlays,
                           files=files, patch=patch, run=cond.run, timeout=timeout, backend=cond.backend,
                           clock_offset_s=cond.clock_offset_s)  # fmt: skip
    return RunRecord(
        role=role,
        what=what,
        condition=cond,
        passed=len(run.passed),
        failed={
            k: v[:300] if i < 10 else v.strip()[:120].split("\n")[0] for i, (k, v) in enumerate(run.messages.items())
        },
        raised_at=run.raised_at,
        timed_out=run.timed_out,
        wall_s=round(run.wall_s, 3),
    )
