"""Task validation, the gate a proposer rewarded for learnability must not be
able to game. A task is kept only when every check passes; the verdict
(`Validation`) lists every check with its evidence and every test run made.

Static checks (host side, always run, cheapest first):
  leak            the answer in any form, or the hidden test cases listed in the
                  statement (touchstone.taskmaking.leak)                               -> `leak`
  contamination   a held-out, configured benchmark or packaged public benchmark
                  (HumanEval) problem in disguise                                 -> `contaminated`
  audit           the verifier's static audit on the reference, the stub and
                  (for proposer-written tests) the hidden tests                    -> `cheating_reference`
  contract        the declared comparison semantics (source.meta.oracle) are
                  valid; `max_slowdown` only where the statement states a complexity bound or time limit  -> `bad_contract`
Sandbox checks (under grading's conditions, touchstone.taskmaking.conditions):
  start           the starting workspace fails a required test (a start that
                  times out is a failing start)                                   -> `already_solved` / `bad_fail_to_pass`
  reference       passes every required test under grading's runs and extra
                  randomized seeds, a shifted clock, the other backend, and more
                  runs when it touches the clock or randomness                    -> `reference_fails` / `flaky` / `too_slow`
  timing          the slowest grading-condition reference run uses at most
                  `max_budget_share` of the budget                                -> `too_slow`
  coverage        the hidden tests run every changed line of the reference (in
                  the functions they enter)                                       -> `weak_tests`
  leak_probe      the hidden tests fail on the stub with its module-level flags
                  flipped and with every other workspace definition of an entry
                  function swapped in                                             -> `leak`
  baselines       every trivial solution fails                                    -> `weak_tests`
  mutation        the hidden tests kill mutants of the changed functions (sampled
                  before rendering) at a rate >= threshold; a kill made only by
                  the reference's guards counts when the tests still notice the
                  mutant with the guards removed; mutants of guards alone are
                  left out (no mutation site: a warning); and every entry
                  function's result weakened at one site, shape kept, is noticed
                  (results the tests only drop, side effects, are no contract) -> `weak_tests`
A real project's own tests (HUMAN_TESTS: imported SWE-bench instances) get a
quality score from coverage, baselines and mutation instead of a rejection.
Optional:
  isolation       the isolation probe decides whether the tests run isolated
                  (hook; isolated / not_isolated are both kept)                   -> `isolation_fails`
  solver          a served model solves it from the statement alone              -> `needs_review`
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from touchstone.agent.loop import run_episode
from touchstone.agent.policies import make_policy
from touchstone.agent.policies.spec import PolicySpec
from touchstone.audit.policy import load_policy
from touchstone.audit.static_audit import audit_files
from touchstone.taskmaking import adequacy, change_coverage, conditions, contamination, guards, leak
from touchstone.taskmaking.conditions import Condition, RunRecord
from touchstone.tasks.isolation import probe_isolation
from touchstone.tasks.schema import Task, TaskError, load_task

VALIDATOR_VERSION = "2"
AUDIT_EXTRA = Path(__file__).with_name("validation_audit.yaml")
TRUSTED_PROPOSERS = {"mutation"}  # code outside the change comes from a pinned, pre-checked seed project
# the hidden tests are a real project's own, written by people: adequacy informs a quality score, and
# only tests that cannot tell the fix from no change (the `start` check) reject the task
HUMAN_TESTS = {"swebench"}

Status = Literal["pass", "fail", "warn", "skip", "not_run"]


class ValidationConfig(BaseModel):
    k: int = Field(default=3, ge=1)  # grading-plan reference runs (run i: harness plan i)
    extra_runs: int = Field(default=2, ge=0)  # reference runs at random plan indices
    clock_runs: int = Field(default=1, ge=0)  # reference runs with the clock shifted
    nondeterminism_runs: int = Field(default=6, ge=0)  # more runs when the clock/randomness is touched
    cross_backend: bool = True  # one reference run on the other backend when there is one
    threshold: float = Field(default=0.6, ge=0, le=1)  # minimum mutation score
    max_mutants: int = Field(default=40, ge=1)  # all sites up to this many, else a fixed-seed sample
    # tasks whose tests and code come from a pinned seed project (TRUSTED_PROPOSERS): no proposer wrote the
    # tests, so adequacy is spot-checked (fewer mutants, two baselines); the run conditions stay the same
    trusted_max_mutants: int = Field(default=12, ge=1)
    max_budget_share: float = Field(default=0.5, gt=0, le=1)  # slowest reference run / timeout_s
    min_coverage: float = Field(default=1.0, ge=0, le=1)  # share of changed lines the hidden tests must run
    backend: str = "auto"  # what grading uses: Docker when it is up, else bubblewrap
    parallel: int = Field(default=2, ge=1)  # sandbox runs at once
    contamination_sets: list[Path] = Field(default_factory=list)  # + $TOUCHSTONE_CONTAMINATION_SETS
    packaged_benchmarks: bool = True  # + public benchmarks shipped in installed packages (contamination.PACKAGED)
    solver: str | None = None  # policy spec of a served model (default: $TOUCHSTONE_VALIDATION_SOLVER)
    solver_attempts: int = Field(default=2, ge=1)
    isolation: bool = True  # call the isolation probe when it is installed


class ValidationCheck(BaseModel):
    """One validation check's outcome (the verifier's checks are `touchstone.verify.report.CheckResult`)."""

    name: str
    status: Status
    reason: str | None = None  # the rejection reason when status is fail
    detail: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    seconds: float = 0.0


class Validation(BaseModel):
    """The verdict on one task: one row of the task-set index, plus every check
    and run behind it (self-play feeds proposals through this record)."""

    task_id: str
    kept: bool
    reason: str | None = None
    detail: str = ""
    n_fail_to_pass: int = 0
    n_pass_to_pass: int = 0
    mutation_score: float | None = None
    mutants: int = 0
    ref_seconds: float | None = None
    budget_share: float | None = None
    difficulty: float | None = None
    validated_at: str = ""
    content_hash: str | None = None
    proposer: str | None = None
    needs_review: bool = False
    warnings: list[str] = Field(default_factory=list)
    checks: list[ValidationCheck] = Field(default_factory=list)
    runs: list[RunRecord] = Field(default_factory=list)
    nearest_match: contamination.NearestMatch | None = None
    validator_version: str = VALIDATOR_VERSION
    config: dict[str, Any] = Field(default_factory=dict)

    def check(self, name: str) -> ValidationCheck | None:
        return next((c for c in self.checks if c.name == name), None)


class _Fail(Exception):
    def __init__(self, reason: str, detail: str, **evidence: Any):
        super().__init__(detail)
        self.reason, self.detail, self.evidence = reason, detail, evidence


class _Run:
    """One validation in progress: the task, config, the runs made so far."""

    def __init__(self, task: Task, cfg: ValidationConfig):
        self.task, self.cfg = task, cfg
        self.backend = conditions.grading_backend(cfg.backend)
        self.trusted = task.source.proposer in TRUSTED_PROPOSERS
        self.human_tests = task.source.proposer in HUMAN_TESTS
        self.runs: list[RunRecord] = []
        self.warnings: list[str] = []
        self.out: dict[str, Any] = {}
        self.pool: ThreadPoolExecutor | None = None

    def many(self, jobs: Iterable[Callable[[], RunRecord]]) -> list[RunRecord]:
        return self.collect(self.start(jobs))

    def start(self, jobs: Iterable[Callable[[], RunRecord]]) -> list[Future]:
        """Queue sandbox runs on the validation's pool (`parallel` at once); `collect` records them."""
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.cfg.parallel)
        return [self.pool.submit(job) for job in jobs]

    def collect(self, futures: list[Future]) -> list[RunRecord]:
        done = [f.result() for f in futures]
        self.runs.extend(done)
        return done

    def close(self) -> None:
        """Drop what was queued and never collected (an earlier check rejected the task)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def run(self, cond: Condition, role: str, what: str = "", **kw: Any) -> Callable[[], RunRecord]:
        return lambda: conditions.run_condition(self.task, cond, role=role, what=what, **kw)


# -- static checks --------------------------------------------------------------------


def _check_leak(v: _Run) -> dict:
    found = leak.find_leaks(v.task)
    if found:
        raise _Fail("leak", "; ".join(found[:5]), findings=found)
    return {"findings": []}


def _check_contamination(v: _Run) -> dict:
    sets = contamination.configured_sets(v.cfg.contamination_sets)
    packaged = v.cfg.packaged_benchmarks
    match, n = contamination.nearest(v.task, sets, statements=not v.trusted, packaged=packaged)
    v.out["nearest_match"] = match
    missing = contamination.packaged_problems()[1] if packaged else ()
    v.warnings += [f"contamination: public benchmark {m} is not installed; not compared" for m in missing]
    evidence = {
        "sets": [str(s) for s in sets]
        + (sorted({p.source for p in contamination.packaged_problems()[0]}) if packaged else []),
        "compared": n,
        "statements_compared": not v.trusted,
        "nearest": match.model_dump() if match else None,
    }
    if match and match.contaminated:
        raise _Fail("contaminated", f"same problem as {match.id} in {match.source}: {match.why}", **evidence)
    if not n:
        v.warnings.append("contamination: no held-out or benchmark set configured; compared against nothing")
    return evidence


def _audit_files(task: Task) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(files to audit, their baselines, roles): reference files, the stubs they
    replace, and the hidden tests; for trusted seed projects and a real project's
    own fix and tests (HUMAN_TESTS) only what changed."""
    trusted = task.source.proposer in TRUSTED_PROPOSERS | HUMAN_TESTS
    files: dict[str, str] = {}
    base: dict[str, str] = {}
    roles: dict[str, str] = {}
    for rel, ref_text, ws_text in adequacy.reference_sources(task):
        files[f"reference/{rel}"], roles[f"reference/{rel}"] = ref_text, "reference"
        if ws_text is not None:
            files[f"workspace/{rel}"], roles[f"workspace/{rel}"] = ws_text, "stub"
            if trusted:
                base[f"reference/{rel}"], base[f"workspace/{rel}"] = ws_text, ref_text
    if not trusted:
        for p in sorted(task.hidden_tests_dir.rglob("*.py")):
            rel = f"hidden_tests/{p.relative_to(task.hidden_tests_dir).as_posix()}"
            files[rel], roles[rel] = p.read_text(errors="replace"), "hidden test"
    return files, base, roles


def _check_audit(v: _Run) -> dict:
    files, base, roles = _audit_files(v.task)
    # paths keep the file's own name, so the policy's test-file allowances apply to the tests only
    # rules the task allows (audit_allow, written by the proposer for what the reference
    # needs, never for rules that guard the judge) are allowed here as in the verifier
    allowed = set(v.task.source.meta.get("audit_allow", ()))
    findings = audit_files(files, load_policy(AUDIT_EXTRA).without(allowed), base)
    rejecting = [f for f in findings if f.severity == "reject"]
    flagged = [f.evidence for f in findings if f.severity != "reject"]
    evidence = {"files": {p: roles[p] for p in files}, "findings": [f.model_dump() for f in findings]}
    if flagged:
        v.warnings.extend(f"audit: {e}" for e in flagged[:5])
    if rejecting:
        raise _Fail("cheating_reference", "; ".join(f"{f.rule} {f.evidence}" for f in rejecting[:3]), **evidence)
    return evidence


# -- sandbox checks -------------------------------------------------------------------------


def _no_reference(v: _Run) -> dict:
    raise _Fail("no_reference", "task has no reference/ to validate against", task_dir=str(v.task.dir), reference=None)


def _check_start(v: _Run, given: RunRecord | None) -> dict:
    """The start must fail: under grading's run 0 and an unpredictable run. A run
    that times out is a failing start (a bug can make code hang)."""
    runs = ([given] if given else []) + v.collect(v.out.pop("start_queued"))
    evidence = {
        "runs": [r.condition.label() + (" timed out" if r.timed_out else f": {len(r.failed)} failing") for r in runs]
    }
    solved = [r for r in runs if r.ok]
    if solved:
        raise _Fail(
            "already_solved",
            f"the starting workspace passes all {solved[0].passed} required tests under {solved[0].condition.label()}",
            **evidence,
        )
    passing_f2p = sorted({t for r in runs if not r.timed_out for t in (v.task.fail_to_pass or []) if t not in r.failed})
    if passing_f2p:
        raise _Fail(
            "bad_fail_to_pass",
            f"declared fail_to_pass tests pass on the starting workspace: {passing_f2p[:5]}",
            passing_fail_to_pass=passing_f2p,
            **evidence,
        )
    first = runs[0]
    if v.task.fail_to_pass is None and not first.timed_out:
        v.out["f2p_p2p"] = (len(first.failed), first.passed)
    v.out["start"] = first
    return evidence


def _queue_reference(v: _Run) -> tuple[list[str], list[Condition], list[Future]]:
    nondet = conditions.touches_nondeterminism(v.task)
    conds = conditions.reference_conditions(
        v.backend,
        k=v.cfg.k,
        extra=v.cfg.extra_runs,
        clock_runs=v.cfg.clock_runs,
        cross_backend=v.cfg.cross_backend,
        nondeterministic=bool(nondet),
        more=v.cfg.nondeterminism_runs,
    )
    return nondet, conds, v.start(v.run(c, "reference", with_reference=True) for c in conds)


def _queue_early(v: _Run, given: RunRecord | None) -> None:
    """Queue at once the sandbox runs the checks from `start` on will collect: the start runs,
    the reference runs and the coverage trace, and for a project's own tests (no check after
    `reference` rejects those) the isolation probe and the mutants, so no sandbox slot idles
    between checks. A rejection cancels whatever has not started (`_Run.close`). The static
    checks run before: a static rejection costs no sandbox run; overlapping them with the runs
    gained nothing measurable (a thread parsing a big module holds the GIL for 5 ms slices,
    and each system call of the threads driving the sandboxes waits for one). The mutants are
    picked before any run starts for the same reason."""
    mutants = _pick_mutants(v) if v.human_tests else None
    v.out["start_queued"] = v.start(
        v.run(c, "start") for c in conditions.start_conditions(v.backend)[1 if given else 0 :]
    )
    if v.human_tests and v.cfg.isolation:
        v.out["isolation_queued"] = v.start([lambda: probe_isolation(v.task, v.backend)])[0]
    v.out["reference_queued"] = _queue_reference(v)
    # 3x the budget: tracing slows the run down
    v.out["coverage_queued"] = v.start(
        [lambda: change_coverage.measure(v.task, v.backend, timeout=3 * v.task.timeout_s)]
    )[0]
    if mutants:
        _queue_mutants(v, mutants, after=v.out["reference_queued"][2])


def _check_reference(v: _Run) -> dict:
    nondet, conds, futures = v.out.pop("reference_queued")
    runs = v.collect(futures)
    v.out["reference_runs"] = runs
    evidence = {
        "conditions": [c.label() for c in conds],
        "touches_nondeterminism": nondet,
        "results": [
            f"{r.condition.label()}: {r.passed} passed, {len(r.failed)} failed"
            + (" (timed out)" if r.timed_out else "")
            + f", {r.wall_s:.2f}s"
            for r in runs
        ],
    }
    # the other backend only shows whether the tests tell backends apart; a run of it cut off by the
    # timeout (its container start counts against the budget under load) proves nothing about that
    slow_other = [r for r in runs if r.timed_out and r.condition.backend != v.backend]
    v.warnings += [
        f"reference: {r.condition.label()} timed out (not grading's backend; not counted)" for r in slow_other
    ]
    runs = [r for r in runs if r not in slow_other]
    timed_out = [r for r in runs if r.timed_out]
    if timed_out:
        raise _Fail(
            "too_slow",
            f"the reference timed out ({v.task.timeout_s:g}s budget) under {timed_out[0].condition.label()}",
            **evidence,
        )
    # a test that fails on every run is the reference's failure; one that also passes somewhere is flaky
    # (a test failing with p=0.45 fails all three grading runs one time in eleven)
    failed = [set(r.failed) for r in runs]
    if failed and all(failed) and (always := set.intersection(*failed)):
        t = sorted(always)[0]
        raise _Fail(
            "reference_fails",
            f"the reference fails {len(always)} required tests on every one of "
            f"{len(runs)} runs, e.g. {t}: {runs[0].failed[t][:200]}",
            **evidence,
        )
    if bad := next((r for r in runs if r.failed), None):
        unstable = sorted({t for r in runs for t in r.failed})
        raise _Fail(
            "flaky",
            f"{len(unstable)} required tests pass on some of {len(runs)} reference runs and fail on "
            f"others, e.g. {unstable[0]} under {bad.condition.label()}: "
            f"{bad.failed.get(unstable[0], next(iter(bad.failed.values())))[:160]}",
            **evidence,
        )
    return evidence


def _check_timing(v: _Run) -> dict:
    slowest = _slowest(v, v.out["reference_runs"])
    share = slowest / v.task.timeout_s
    v.out["ref_seconds"], v.out["budget_share"] = round(slowest, 3), round(share, 3)
    evidence = {
        "slowest_s": round(slowest, 3),
        "timeout_s": v.task.timeout_s,
        "share": round(share, 3),
        "max_share": v.cfg.max_budget_share,
    }
    if share > v.cfg.max_budget_share:
        raise _Fail(
            "too_slow",
            f"the reference's slowest run took {slowest:.2f}s, {share:.0%} of the "
            f"{v.task.timeout_s:g}s budget (at most {v.cfg.max_budget_share:.0%})",
            **evidence,
        )
    return evidence


def _slowest(v: _Run, reference_runs: list[RunRecord]) -> float:
    """The slowest reference run on grading's backend (the other one only shows whether the tests tell
    backends apart)."""
    return max(r.wall_s for r in reference_runs if r.condition.backend == v.backend)


def _probe_timeout(v: _Run, slowest: float | None = None) -> float:
    """Probe and mutant runs: a loop forever is a failure; no need to wait the whole budget."""
    return min(v.task.timeout_s, max(5.0, 5 * (slowest or v.out.get("ref_seconds") or 1.0)))


def _weak(v: _Run, detail: str, **evidence: Any) -> tuple[Status, dict]:
    """A test-adequacy shortfall: a rejection, except for a project's own human-written
    tests (HUMAN_TESTS), where it lowers the quality score and warns (such tests are
    rejected only when they cannot tell the fix from no change: the `start` check)."""
    if v.human_tests:
        v.warnings.append(f"adequacy (quality only, human-written tests): {detail}")
        return "warn", {**evidence, "why": detail}
    raise _Fail("weak_tests", detail, **evidence)


def _check_coverage(v: _Run) -> dict | tuple[Status, dict]:
    """The hidden tests must run the reference's changed lines (in functions they enter at all)."""
    cov = v.out.pop("coverage_queued").result()
    share = cov.share
    evidence = {
        "required": cov.required,
        "missed": cov.missed,
        "unexercised": cov.unexercised,
        "guard_lines_not_required": cov.guards,
        "share": None if share is None else round(share, 3),
        "min_coverage": v.cfg.min_coverage,
    }
    v.out["unexercised"] = set(cov.unexercised)
    v.warnings += [f"coverage: changed function {f} is never run by the hidden tests" for f in cov.unexercised]
    if share is not None and share < v.cfg.min_coverage:
        refs = {rel: ref for rel, ref, _ws in adequacy.reference_sources(v.task)}
        lines = [f"{rel}:{n}: {refs[rel].splitlines()[n - 1].strip()}" for rel, ns in cov.missed.items() for n in ns]
        return _weak(
            v,
            f"the hidden tests run {share:.0%} of the reference's changed lines "
            f"(at least {v.cfg.min_coverage:.0%}); never run: {lines[:3]}",
            **evidence,
        )
    return evidence


def _check_leak_probe(v: _Run) -> dict | tuple[Status, dict]:
    """The answer may be in the workspace as live code: behind a module-level
    flag of the stub, or as another module's definition of an entry function.
    Not for a real project at its base commit (HUMAN_TESTS): no proposer wrote
    that workspace, and `start` already shows its tests fail there."""
    if v.human_tests:
        return "not_run", {"why": "the workspace is a real project's base commit, written by no proposer"}
    ws = v.task.workspace_dir
    modules = adequacy.workspace_modules(ws)
    probes: list[tuple[str, dict[str, str]]] = []
    for rel, _ref, ws_text in adequacy.reference_sources(v.task):
        if ws_text is not None:
            probes += [(f"workspace/{rel} with {desc}", {rel: text}) for desc, text in leak.flag_probes(ws_text)[:6]]
    for rel, fn in adequacy.entry_functions(v.task):
        stub = modules.get(rel)
        if stub is None:
            continue
        for other in leak.definers(modules, fn, exclude=rel)[:5]:
            mod = adequacy.module_name(other)
            probes.append((f"{fn} taken from workspace/{other}", {rel: f"{stub}\n\nfrom {mod} import {fn}  # probe\n"}))
    cond = Condition(run=0, backend=v.backend, grading=True)
    runs = v.many(v.run(cond, "leak_probe", desc, files=files, timeout=_probe_timeout(v)) for desc, files in probes)
    evidence = {"probes": [f"{r.what}: {'PASSES' if r.ok else 'fails'}" for r in runs]}
    passing = [r.what for r in runs if r.ok]
    if passing:
        raise _Fail(
            "leak", f"the hidden tests pass on the workspace with {passing[0]}: the answer is already there", **evidence
        )
    return evidence


def _check_baselines(v: _Run) -> dict | tuple[Status, dict]:
    values = adequacy.TRUSTED_BASELINES if v.trusted or v.human_tests else adequacy.BASELINES
    cases = adequacy.baselines(v.task, skip=v.out.get("unexercised", set()), values=values)
    cond = Condition(run=0, backend=v.backend, grading=True)
    runs = v.many(
        v.run(cond, "baseline", desc, with_reference=True, files={rel: text}, timeout=_probe_timeout(v))
        for desc, rel, text in cases
    )
    evidence = {"baselines": [f"{r.what}: {'PASSES' if r.ok else 'fails'}" for r in runs]}
    passing = [r.what for r in runs if r.ok]
    if passing:
        return _weak(
            v,
            f"a trivial solution passes every required test: {passing[0]}"
            + (f" (and {len(passing) - 1} more)" if len(passing) > 1 else ""),
            **evidence,
        )
    if not cases:
        v.warnings.append("baselines: no entry function whose body could be replaced by a trivial one")
    return evidence


def _pick_mutants(v: _Run) -> tuple:
    """The mutants to run, parsed, sampled and rendered."""
    refs = {rel: (ref, ws) for rel, ref, ws in adequacy.reference_sources(v.task)}
    sites = adequacy.mutation_sites(v.task)  # counted only: a site holds its whole unit's syntax tree
    limit = v.cfg.trusted_max_mutants if v.trusted or v.human_tests else v.cfg.max_mutants
    # sampled first, then rendered and analysed one at a time: a big module's change costs its sample only
    picked, guard_changes = adequacy.pick(sites, limit, lambda m: guards.only_guards_changed(m.source, *refs[m.path]))
    outputs = [] if v.trusted else adequacy.output_mutants(v.task)
    return refs, len(sites), picked, guard_changes, outputs


def _queue_mutants(v: _Run, mutants: tuple, after: list[Future] | None = None) -> None:
    """Queue the runs of `mutants` (`_pick_mutants`). For a project's own tests (HUMAN_TESTS) this
    happens before any run (`_queue_early`, with the reference runs as `after`): no check
    but `start` and `reference` can reject such a task, so the mutants queue behind the
    reference runs and fill the sandbox slots as they free up; each waits for the reference
    runs ahead of it (at most one is still running) to take its timeout from them, as
    `_probe_timeout` does after `timing`. Elsewhere a baseline rejection must not wait
    behind (or pay for) 40 mutants: they queue when `mutation` runs."""
    refs, n_sites, picked, guard_changes, outputs = mutants
    cond = Condition(run=0, backend=v.backend, grading=True)

    def job(m: adequacy.Mutant) -> Callable[[], RunRecord]:
        def timed() -> RunRecord:
            slowest = None
            if after is not None:
                wait(after)
                slowest = _slowest(v, [f.result() for f in after])
            timeout = _probe_timeout(v, slowest)
            return v.run(cond, "mutant", _mutant_label(m), with_reference=True, files={m.path: m.source},
                         timeout=timeout)()  # fmt: skip

        return timed

    futures = v.start(job(m) for m in picked + outputs)
    v.out["mutants_queued"] = (refs, n_sites, picked, guard_changes, outputs, cond, futures)


def _check_mutation(v: _Run) -> dict | tuple[Status, dict]:
    if "mutants_queued" not in v.out:
        _queue_mutants(v, _pick_mutants(v))
    refs, n_sites, picked, guard_changes, outputs, cond, futures = v.out.pop("mutants_queued")
    runs = v.collect(futures)
    runs, output_runs = runs[: len(picked)], runs[len(picked) :]
    outcomes = _mutant_outcomes(v, refs, picked, runs, cond)
    killed = outcomes.count("killed")
    output_survivors = [r.what for r in output_runs if not (r.timed_out or r.failed)]
    evidence = {
        "sites": n_sites,
        "guard_changes": len(guard_changes),  # mutants of the guards alone: left out of the score
        "guard_change_mutants": [_mutant_label(m) for m in guard_changes][:20],
        "run": len(picked),
        "sampled": len(picked) + len(guard_changes) < n_sites,
        "killed": killed,
        "guard_only": outcomes.count("guard_only"),
        "survived": outcomes.count("survived"),
        "mutants": [f"{r.what}: {o}" for r, o in zip(runs, outcomes)],
        "output_mutants": [f"{r.what}: {'survived' if r.what in output_survivors else 'killed'}" for r in output_runs],
        "output_survived": len(output_survivors),
        # entry functions whose result the tests never look at (side effects): not weakened
        "results_outside_contract": [] if v.trusted else adequacy.results_outside_contract(v.task),
    }
    if picked:
        score = killed / len(picked)
        v.out["mutation_score"], v.out["mutants"] = round(score, 3), len(picked)
        evidence["score"] = round(score, 3)
    if output_runs:
        evidence["output_score"] = round(1 - len(output_survivors) / len(output_runs), 3)
    if not picked:
        v.warnings.append(
            "mutation: the reference's change has no mutation site"
            + (f" outside its guards ({len(guard_changes)} guard-only mutants)" if guard_changes else "")
            + "; adequacy rests on the baselines"
            + (" and the weakened results" if output_runs else "")
        )
    elif score < v.cfg.threshold:
        survivors = [r.what for r, o in zip(runs, outcomes) if o != "killed"][:3]
        return _weak(
            v,
            f"hidden tests kill {killed} of {len(picked)} mutants of the reference's changed "
            f"code (score {score:.2f} < {v.cfg.threshold}; {evidence['guard_only']} failed only "
            f"on the reference's own guards); surviving e.g. {survivors}",
            **evidence,
        )
    if output_survivors:
        return _weak(
            v,
            f"the hidden tests do not notice a result changed at one site with its type and length kept "
            f"({len(output_survivors)} of {len(output_runs)} survive, e.g. {output_survivors[0]}): they check "
            "its shape (a length, a type, non-emptiness) or part of it, not its value",
            **evidence,
        )
    return evidence


def _mutant_label(m: adequacy.Mutant) -> str:
    return f"{m.operator} at {m.path}:{m.line} ({m.unit})"


def _mutant_outcomes(
    v: _Run, refs: dict[str, tuple[str, str | None]], picked: list, runs: list[RunRecord], cond: Condition
) -> list[str]:
    """killed / survived / guard_only per mutant. A mutant whose tests fail only at the
    reference's guards runs again with the guards removed; it is killed when a test
    that passes on the unguarded reference then fails."""
    lines = {rel: guards.guard_lines(ref, ws) for rel, (ref, ws) in refs.items()}
    guarded = {rel for rel, ls in lines.items() if ls}
    outcomes = []
    for m, r in zip(picked, runs):
        seen = {**lines, m.path: guards.guard_lines(m.source, refs[m.path][1])}
        if r.timed_out or (r.failed and not guards.died_of_guards(r.failed, r.raised_at, seen)):
            outcomes.append("killed")
        else:
            outcomes.append("guard_only" if r.failed else "survived")
    noticed = [i for i, o in enumerate(outcomes) if o == "guard_only"]
    if not noticed:
        return outcomes

    def bare(m: adequacy.Mutant | None) -> dict[str, str]:
        files = {rel: guards.unguarded(refs[rel][0], refs[rel][1]) for rel in guarded}
        return files | ({m.path: guards.unguarded(m.source, refs[m.path][1])} if m else {})

    t = _probe_timeout(v)
    jobs = [
        v.run(cond, "unguarded", "the reference without its guards", with_reference=True, files=bare(None), timeout=t)
    ]
    for i in noticed:
        what = f"{_mutant_label(picked[i])} without guards"
        jobs.append(v.run(cond, "mutant", what, with_reference=True, files=bare(picked[i]), timeout=t))
    base, *again = v.many(jobs)
    for i, r in zip(noticed, again):
        if not base.timed_out and (r.timed_out or set(r.failed) - set(base.failed)):
            outcomes[i] = "killed"
    return outcomes


# -- optional checks ----------------------------------------------------------------------------


def _check_isolation(v: _Run) -> tuple[Status, dict]:
    """The isolation probe grades the reference isolated once and records
    isolated / not_isolated (both keep the task: the verifier then grades
    accordingly). Fails only when the probe could not decide (it errored)."""
    if not v.cfg.isolation:
        return "not_run", {"why": "disabled in the config"}
    queued = v.out.pop("isolation_queued", None)
    result = queued.result() if queued else probe_isolation(v.task, v.backend)
    ok = result.ok
    evidence = {"status": result.status, "detail": result.detail}
    if not ok:
        what = (
            "the isolation probe errored, so whether the tests run isolated is undecided"
            if evidence["status"] == "error"
            else f"the isolation probe failed ({evidence['status']})"
        )
        raise _Fail(
            "isolation_fails",
            f"{what}: {evidence['detail'][:300] or 'no detail'}",
            status=evidence["status"],
            probe_detail=evidence["detail"],
        )  # `detail` is _Fail's own
    return "pass", evidence


def _check_solver(v: _Run) -> tuple[Status, dict]:
    """A served model attempts the task from the statement alone (the reference is
    never in its sandbox); a task no attempt solves is flagged for review."""
    import os

    spec = v.cfg.solver or os.environ.get("TOUCHSTONE_VALIDATION_SOLVER")
    if not spec:
        return "not_run", {"why": "no model configured (ValidationConfig.solver / $TOUCHSTONE_VALIDATION_SOLVER)"}
    policy = make_policy(PolicySpec.parse(spec), None)  # the config's or the environment's text
    try:
        patches = [
            run_episode(v.task, policy, attempt=a, backend=v.backend).diff.patch for a in range(v.cfg.solver_attempts)
        ]
    finally:
        policy.close()
    cond = Condition(run=0, backend=v.backend, grading=True)
    runs = v.many(v.run(cond, "solver", f"attempt {i}", patch=p) for i, p in enumerate(patches))
    solved = sum(r.ok for r in runs)
    evidence = {"policy": spec, "attempts": len(runs), "solved": solved}
    if not solved:
        v.out["needs_review"] = True
        raise _Fail(
            "needs_review",
            f"no attempt of {spec} solved the task from its statement ({len(runs)} tried): "
            "flagged for review, not trained on",
            **evidence,
        )
    return "pass", evidence


# -- the whole validation -----------------------------------------------------------------------


def _check_contract(v: _Run) -> dict:
    """The task's comparison semantics (`source.meta.oracle`) load, and a
    performance contract is declared only where the statement states a complexity bound or a time limit."""
    from touchstone.verify.oracle import contract_problems

    problems = contract_problems(v.task.statement, v.task.source.meta)
    if problems:
        raise _Fail("bad_contract", "; ".join(problems), problems=problems)
    return {"oracle": v.task.source.meta.get("oracle") or {}}


STATIC = [("leak", _check_leak), ("contamination", _check_contamination), ("audit", _check_audit),
          ("contract", _check_contract)]  # fmt: skip
SANDBOX = [
    ("reference", _check_reference),
    ("timing", _check_timing),
    ("coverage", _check_coverage),
    ("leak_probe", _check_leak_probe),
    ("baselines", _check_baselines),
    ("mutation", _check_mutation),
]
OPTIONAL = [("isolation", _check_isolation), ("solver", _check_solver)]


def _do(v: _Run, out: Validation, name: str, fn: Callable[[], Any], blocked_by: str | None) -> str | None:
    """Run one check unless an earlier one already rejected; record it. Returns
    the check's failure reason, else `blocked_by`."""
    if blocked_by:
        out.checks.append(ValidationCheck(name=name, status="skip", detail=f"not run: rejected by {blocked_by}"))
        return blocked_by
    t0 = time.monotonic()
    try:
        res = fn()
    except _Fail as f:
        out.checks.append(
            ValidationCheck(
                name=name,
                status="fail",
                reason=f.reason,
                detail=f.detail,
                evidence=f.evidence,
                seconds=round(time.monotonic() - t0, 3),
            )
        )
        if out.reason is None:
            out.reason, out.detail = f.reason, f.detail
        return name
    status, evidence = res if isinstance(res, tuple) else ("pass", res)
    out.checks.append(
        ValidationCheck(
            name=name,
            status=status,
            evidence=evidence,
            seconds=round(time.monotonic() - t0, 3),
            detail=str(evidence.get("why", "")),
        )
    )
    return None


def validate_task(task: Task, cfg: ValidationConfig | None = None, start: Any = None) -> Validation:
    """Run every check; never raises for a bad task (the verdict says why). `start`:
    a `RunRecord` of the starting workspace under grading's run 0 a proposer already made."""
    cfg = cfg or ValidationConfig()
    v = _Run(task, cfg)
    out = Validation(
        task_id=task.id,
        kept=False,
        validated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        n_fail_to_pass=len(task.fail_to_pass or []),
        n_pass_to_pass=len(task.pass_to_pass or []),
        content_hash=task.content_hash,
        proposer=task.source.proposer,
        config=cfg.model_dump(mode="json"),
    )
    given = _as_record(start, v.backend)
    blocked = None
    try:
        for name, fn in STATIC:  # every static check runs: they are cheap and all their evidence is useful
            blocked = _do(v, out, name, lambda fn=fn: fn(v), None) or blocked
        if task.reference_dir is None:  # recorded as the failing `reference` check, before anything runs
            blocked = _do(v, out, "reference", lambda: _no_reference(v), blocked)
        elif not blocked:
            _queue_early(v, given)
        blocked = _do(v, out, "start", lambda: _check_start(v, given), blocked)
        for name, fn in SANDBOX:
            if not out.check(name):
                blocked = _do(v, out, name, lambda fn=fn: fn(v), blocked)
        for name, fn in OPTIONAL:
            blocked = _do(v, out, name, lambda fn=fn: fn(v), blocked)
    finally:
        v.close()
    _finish(v, out)
    return out


def _as_record(start: Any, backend: str) -> RunRecord | None:
    """A proposer's own run of the starting workspace (grading's run 0, on the
    configured backend) as a record."""
    if start is None or isinstance(start, RunRecord):
        return start
    return RunRecord(
        role="start",
        what="made by the proposer",
        condition=Condition(run=0, backend=backend, grading=True),
        passed=len(start.passed),
        failed=dict(start.failed),
        timed_out=start.timed_out,
        wall_s=round(start.wall_s, 3),
    )


def _finish(v: _Run, out: Validation) -> None:
    out.runs, out.warnings = v.runs, v.warnings
    out.nearest_match = v.out.get("nearest_match")
    out.mutation_score, out.mutants = v.out.get("mutation_score"), v.out.get("mutants", 0)
    out.ref_seconds, out.budget_share = v.out.get("ref_seconds"), v.out.get("budget_share")
    out.needs_review = bool(v.out.get("needs_review"))
    if "f2p_p2p" in v.out:
        out.n_fail_to_pass, out.n_pass_to_pass = v.out["f2p_p2p"]
    start = v.out.get("start")
    if start is not None and not start.timed_out and (total := start.passed + len(start.failed)):
        out.difficulty = round(start.passed / total, 3)  # subtler bug: more tests still pass
    out.kept = out.reason is None
    if out.kept:
        score = f"mutation score {out.mutation_score:.2f}" if out.mutation_score is not None else "no mutation site"
        out.detail = (
            f"kept: reference passes {len(v.out.get('reference_runs', []))} runs, "
            f"{out.budget_share:.0%} of the budget, {score}"
        )


def validate_dir(task_dir: Path, cfg: ValidationConfig | None = None) -> Validation:
    """validate_task on a directory; a malformed directory is a `malformed` verdict."""
    try:
        task = load_task(task_dir)
    except TaskError as exc:
        return Validation(
            task_id=Path(task_dir).name,
            kept=False,
            reason="malformed",
            detail=str(exc),
            validated_at=datetime.now(UTC).isoformat(timespec="seconds"),
            checks=[ValidationCheck(name="load", status="fail", reason="malformed", detail=str(exc))],
        )
    return validate_task(task, cfg)
