"""Task validation: a task is kept only if, in the sandbox,

- the workspace leaks no answer (static, checked first)              -> `leak`
- the starting workspace fails at least one required hidden test     -> `already_solved`
  (and every declared fail_to_pass test fails there)                  -> `bad_fail_to_pass`
- the reference passes every required test k times, each with its
  own PYTHONHASHSEED and test order                                   -> `flaky` / `reference_fails`
- every run finishes within the task's time budget                    -> `too_slow`
- the hidden tests kill mutants of the reference's changed code at a
  rate >= threshold                                                   -> `weak_tests`

Cheapest checks run first; the first failing one decides the reason.
"""

from __future__ import annotations

import itertools
import math
import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from touchstone.envs.task import task_environment
from touchstone.harness import HiddenSuite, TestRunResult
from touchstone.sandbox import available_backends
from touchstone.tasks.leak import find_leaks
from touchstone.tasks.mutate import changed_functions, compile_error, module_name, mutations
from touchstone.tasks.schema import Task, TaskError, load_task


def default_backend() -> str:
    """bubblewrap when usable: validation runs only trusted code (the task's own
    reference and tests), and a bwrap start costs milliseconds, a container ~1 s."""
    return "bwrap" if "bwrap" in available_backends() else "auto"


class ValidationConfig(BaseModel):
    k: int = Field(default=3, ge=1)  # reference runs (hash seed and order differ per run: harness.run_plan)
    threshold: float = Field(default=0.6, ge=0, le=1)  # minimum mutation score
    max_mutants: int = Field(default=5, ge=1)
    backend: str = Field(default_factory=default_backend)


class Validation(BaseModel):
    """The verdict on one task; one row of the task-set index."""

    task_id: str
    kept: bool
    reason: str | None = None
    detail: str = ""
    n_fail_to_pass: int = 0
    n_pass_to_pass: int = 0
    mutation_score: float | None = None
    mutants: int = 0
    ref_seconds: float | None = None
    difficulty: float | None = None
    validated_at: str = ""


class _Reject(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _slow(run: TestRunResult, task: Task, what: str) -> None:
    if run.timed_out or run.wall_s > task.timeout_s:
        raise _Reject("too_slow", f"{what} took {run.wall_s:.1f}s, budget {task.timeout_s:g}s")


def _check_start(task: Task, cfg: ValidationConfig, suite: HiddenSuite, start: TestRunResult | None) -> TestRunResult:
    start = start or suite.grade(backend=cfg.backend)
    _slow(start, task, "starting workspace")
    if start.ok:
        raise _Reject("already_solved", f"the starting workspace passes all {len(start.passed)} required tests")
    passing_f2p = sorted(set(task.fail_to_pass or []) & set(start.passed))
    if passing_f2p:
        raise _Reject("bad_fail_to_pass", f"declared fail_to_pass tests pass on the starting workspace: {passing_f2p[:5]}")
    return start


def _check_reference(task: Task, cfg: ValidationConfig, suite: HiddenSuite) -> list[TestRunResult]:
    # the verifier's own plan: run i has its hash seed and test order (`run_plan`)
    with tempfile.TemporaryDirectory(prefix="touchstone-validate-") as tmp:
        tree = suite.compose(Path(tmp), overlays=[task.reference_dir])
        runs = [suite.run(tree, i, backend=cfg.backend) for i in range(cfg.k)]
    for run in runs:
        _slow(run, task, "reference run")
    failing = [set(r.failed) for r in runs]
    if all(failing):
        always = set.intersection(*failing)
        if always:
            sample = sorted(always)[:3]
            raise _Reject("reference_fails", f"reference fails {len(always)} required tests on every run, e.g. "
                                             + "; ".join(f"{t}: {runs[0].messages[t][:200]}" for t in sample))
    if any(failing):
        unstable = sorted(set.union(*failing))
        raise _Reject("flaky", f"{len(unstable)} required tests pass on some of {cfg.k} reference runs "
                               f"(hash seeds and orders differ) and fail on others: {unstable[:5]}")
    return runs


def adequacy_mutants(task: Task, cfg: ValidationConfig) -> list[tuple[str, str]]:
    """(path, mutated text) of up to max_mutants mutants of the reference's changed
    functions, spread over operators, excluding the starting workspace itself."""
    ref = task.reference_dir
    rng = random.Random(task.id)
    pool: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(ref.rglob("*.py")) if ref else []:
        rel = path.relative_to(ref).as_posix()
        ref_text = path.read_text()
        current = task.workspace_dir / rel
        ws_text = current.read_text() if current.is_file() else None
        changed = changed_functions(ref_text, ws_text)
        # a shuffled sample is enough to spread over operators; rendering every site of a big function is not
        for m in itertools.islice(mutations(ref_text, rel, module_name(rel), only=changed, rng=rng),
                                  4 * cfg.max_mutants):
            if m.source != ws_text and compile_error(m.source, rel) is None:
                pool.setdefault(m.operator, []).append((rel, m.source))
    picked: list[tuple[str, str]] = []
    while len(picked) < cfg.max_mutants and any(pool.values()):
        for op in sorted(pool):  # round-robin over operators: one kind of mutant cannot dominate
            if pool[op] and len(picked) < cfg.max_mutants:
                picked.append(pool[op].pop(0))
    return picked


def _check_adequacy(task: Task, cfg: ValidationConfig, suite: HiddenSuite, ref_s: float) -> tuple[float, int]:
    mutants = adequacy_mutants(task, cfg)
    if not mutants:
        raise _Reject("weak_tests", "no mutant of the reference's changed code could be made to measure the tests")
    need = math.ceil(cfg.threshold * len(mutants))
    # a mutant that loops forever is killed by the timeout; no need to wait the full budget
    timeout = min(task.timeout_s, max(5.0, 5 * ref_s))
    killed = survived = 0
    for rel, text in mutants:
        run = suite.grade(overlays=[task.reference_dir], files={rel: text}, timeout=timeout, backend=cfg.backend)
        killed, survived = (killed + 1, survived) if not run.ok else (killed, survived + 1)
        if killed >= need or survived > len(mutants) - need:
            break  # decided
    score = killed / (killed + survived)
    if killed < need:
        raise _Reject("weak_tests", f"hidden tests killed {killed} of {killed + survived} mutants of the reference's "
                                    f"changed code (score {score:.2f} < {cfg.threshold})")
    return score, killed + survived


def validate_task(task: Task, cfg: ValidationConfig | None = None, start: TestRunResult | None = None) -> Validation:
    """Run every check; never raises for a bad task (the verdict says why). `start`:
    a run of the required tests on the starting workspace a proposer already made."""
    cfg = cfg or ValidationConfig()
    out = Validation(task_id=task.id, kept=False, validated_at=datetime.now(UTC).isoformat(timespec="seconds"),
                     n_fail_to_pass=len(task.fail_to_pass or []), n_pass_to_pass=len(task.pass_to_pass or []))
    try:
        leaks = find_leaks(task)
        if leaks:
            raise _Reject("leak", "; ".join(leaks[:5]))
        if task.reference_dir is None:
            raise _Reject("no_reference", "task has no reference/ to validate against")
        suite = HiddenSuite(task, task.required_tests, task_environment(task))
        start = _check_start(task, cfg, suite, start)
        if task.fail_to_pass is None:
            out.n_fail_to_pass, out.n_pass_to_pass = len(start.failed), len(start.passed)
        runs = _check_reference(task, cfg, suite)
        out.ref_seconds = round(max(r.wall_s for r in runs), 3)
        out.mutation_score, out.mutants = _check_adequacy(task, cfg, suite, out.ref_seconds)
    except _Reject as rej:
        out.reason, out.detail = rej.reason, rej.detail
        return out
    total = len(start.passed) + len(start.failed)
    out.kept = True
    out.difficulty = round(len(start.passed) / total, 3) if total else None  # subtler bug: more tests still pass
    out.detail = f"kept: reference passes {cfg.k}/{cfg.k} runs, mutation score {out.mutation_score:.2f}"
    return out


def validate_dir(task_dir: Path, cfg: ValidationConfig | None = None) -> Validation:
    """validate_task on a directory; a malformed directory is a `malformed` verdict."""
    try:
        task = load_task(task_dir)
    except TaskError as exc:
        return Validation(task_id=Path(task_dir).name, kept=False, reason="malformed", detail=str(exc),
                          validated_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return validate_task(task, cfg)
