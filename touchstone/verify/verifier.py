"""`verify_trajectory`: replay, grade the diff, audit, decide.

Order of work (cheap and decisive first): replay → recorded-diff match →
protected paths → compile → static audit → action audit → test run (k times,
varied hash seed and order) → oracle. When a cheap check already rejects, the
expensive ones are reported `skipped` (the verdict cannot change); pass
`full=True` to run everything anyway.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import glob
import hashlib
import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

from touchstone.episode.tools import DEFAULT_TIMEOUT_S
from touchstone.harness import HiddenSuite, TestRunResult, compose_tree, is_test_file, run_plan, test_dirs
from touchstone.sandbox import Environment, SandboxError
from touchstone.tasks.environment import task_environment
from touchstone.tasks.isolation import IsolationVerdict, probe_isolation, record_isolation, recorded_isolation
from touchstone.tasks.schema import Task
from touchstone.verify import lockstep, oracle
from touchstone.audit.action_audit import audit_actions
from touchstone.audit.policy import AuditPolicy, load_policy
from touchstone.verify.protected import DEFAULT_PROTECTED, check_protected
from touchstone.verify.replay import ReplayResult, recorded_diff_matches, replay
from touchstone.audit.finding import AuditFinding
from touchstone.verify.report import (
    DEFAULT_REPLAYS,
    START_TOOL,
    CheckResult,
    Isolation,
    ProgressPoint,
    VerificationReport,
)
from touchstone.audit.static_audit import audit_files


NEVER_PROBED = "task never probed (no reference to probe with): graded isolated only, never retried in process"


def trajectory_id_of(messages: list[dict[str, Any]]) -> str:
    """Content id for trajectories that arrive without one (bring-your-own)."""
    return "t-" + hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:20]


def verify_trajectory(
    task: Task,
    messages: list[dict[str, Any]],
    *,
    replays: int = DEFAULT_REPLAYS,
    progress: bool = False,
    backend: str = "auto",
    recorded_diff: dict[str, Any] | None = None,
    trajectory_id: str | None = None,
    policy: AuditPolicy | None = None,
    allow_rules: set[str] | None = None,
    full: bool = False,
    tool_timeout: float = DEFAULT_TIMEOUT_S,
    isolated: bool | None = None,
) -> VerificationReport:
    """Verify one trajectory of `task`. Never raises for infrastructure
    problems: those make the report inconclusive, with the error as evidence.
    `isolated`: None = as the task's isolation record says (tests run with no
    candidate code in the judging process unless the record says the task's
    tests cannot); a task never probed is probed here from its reference
    before anything of the candidate runs, and one that cannot be probed
    (no reference) runs isolated only. Nothing the candidate does can move
    its run in process. True / False = as if recorded isolated / not
    isolated. Audit rules with `severity_when_isolated` relax only when the
    tests ran isolated."""
    started = time.monotonic()
    # a task may allow rules where they are legitimate: source.meta["audit_allow"]
    allowed = set(allow_rules or ()) | set(task.source.meta.get("audit_allow", ()))
    policy = (policy or load_policy()).without(allowed)
    checks: list[CheckResult] = []
    findings: list[AuditFinding] = []
    points: list[ProgressPoint] | None = None

    environment: Environment | None = None
    isolation: Isolation | None = None
    # the way the tests run is the task's, decided from its reference before the candidate's code runs
    record = _isolation_record(task, isolated, backend)

    def report() -> VerificationReport:
        return VerificationReport(
            isolation=isolation,
            trajectory_id=trajectory_id or trajectory_id_of(messages), task_id=task.id,
            task_hash=task.content_hash, environment_digest=environment.digest if environment else None,
            checks=checks, findings=findings, progress=points,
            duration_s=round(time.monotonic() - started, 3),
        )  # fmt: skip

    # with --progress, the replay leaves the workspace of each step here, on disk, for `_progress`
    with tempfile.TemporaryDirectory(prefix="touchstone-states-") if progress else nullcontext() as states:
        states_dir = Path(states) if states else None
        pristine = _Pristine(task, record.inputs)
        try:
            environment = task_environment(task)  # built (network on) before anything of the candidate runs
            rep = replay(task.workspace_dir, messages, backend=backend, states_dir=states_dir,
                         is_protected=pristine.is_protected, tool_timeout=tool_timeout,
                         baseline=pristine.content, environment=environment)  # fmt: skip
        except Exception as exc:  # infrastructure (sandbox, daemon): never a verdict on the candidate
            checks.append(CheckResult(name="replay", status="error", evidence=f"replay failed: {_err(exc)}"))
            return report()
        if rep.refused:  # what the run's own tree or output provoked: its outcome, never "inconclusive"
            checks.append(CheckResult(name="replay", status="fail", evidence=f"refused: {rep.refused}"[:1000]))
            return report()
        checks.append(CheckResult(name="replay", status="pass", evidence=_replay_evidence(rep)))
        checks.append(_diff_match_check(rep, recorded_diff))
        prot = check_protected(rep.diff, pristine.files, pristine.task_globs, pristine.test_dirs,
                               pristine.content, rep.files.get,
                               installed=environment.top_level if environment else frozenset(),
                               hidden_files=pristine.hidden, final=rep.final)  # fmt: skip
        checks.append(_protected_check(prot))
        # graded = the candidate's changed files, minus new test files and the task's own tests
        graded = {rel: data for rel, data in rep.files.items() if rel not in prot.dropped and rel not in pristine.tests}
        deleted = [r for r in rep.diff.deleted if r not in pristine.tests]
        checks.append(_compile_check({rel: data for rel, data in graded.items() if rel.endswith(".py")}))

        def audit(relaxed: bool) -> list[AuditFinding]:
            return audit_files(graded, policy, pristine.versions(graded), isolated=relaxed)

        static = audit(record.status == "isolated")  # relaxed severities hold only if the tests run isolated
        actions = audit_actions(rep.events, policy)
        findings.extend(static + actions)
        checks += [_audit_check("static_audit", static), _audit_check("action_audit", actions)]

        if _rejected(checks) and not full:
            _skip(
                checks,
                ("tests", "determinism", "oracle", "lockstep"),
                f"not run: already rejected by {_rejected(checks)}",
            )
            return report()
        with tempfile.TemporaryDirectory(prefix="touchstone-verify-") as tmp:
            try:
                # reads the task's hidden tests: can fail too
                suite = HiddenSuite(task, task.required_tests, environment=environment, inputs=record.inputs)
                runs = _TestRuns(suite, record, backend, graded, deleted, Path(tmp))
                with ThreadPoolExecutor(2) as pool:
                    # the oracle and the reference's lockstep runs (own trees, own sandboxes) go alongside the
                    # determinism runs once the tests passed once: a failing candidate, the common case, costs neither
                    oracle_run = _Deferred(pool, lambda: _oracle_check(task, suite, graded, deleted, Path(tmp),
                                                                       backend, pristine.tests))  # fmt: skip
                    reference_seen = _Deferred(
                        pool, lambda: _reference_observations(task, runs.isolated_suite, record, Path(tmp), backend)
                    )

                    def start() -> None:
                        oracle_run.start()
                        reference_seen.start()

                    tested, isolation = _test_checks(runs, replays, record, on_first_pass=start)
                    checks.extend(tested)
                    if tested[0].status == "error" or (_rejected(checks) and not full):
                        oracle_run.wait()  # they read the trees under tmp: never left running past them
                        reference_seen.wait()
                        _skip(checks, ("oracle", "lockstep"), f"not run: {_rejected(checks) or 'tests errored'}")
                    else:
                        checks.append(_never_alone(oracle_run.result(), isolation))
                        checks.append(_lockstep_check(task, reference_seen.result(), runs.observed, isolation,
                                                      runs.isolated_suite.required or suite.prefixes))  # fmt: skip
                if progress:
                    points = _progress(suite, rep, pristine.tests, Path(tmp), backend)
            except Exception as exc:  # infrastructure: inconclusive, never accept
                checks.append(CheckResult(name="grading", status="error", evidence=f"grading failed: {_err(exc)}"))
        return report()


def _isolation_record(task: Task, isolated: bool | None, backend: str) -> IsolationVerdict:
    """How the task's tests run. Its record when it was probed on this content;
    else probed now from its reference (recorded beside the task where the
    task directory is writable); else (no reference, or the probe got no
    answer) isolated: a candidate that fails there is rejected, never retried
    in process, so no candidate can choose the weaker run."""
    record = recorded_isolation(task)
    if isolated is not None:  # the tests' inputs stay the task's record's
        detail = "isolation required by the caller" if isolated else "isolation switched off by the caller"
        return IsolationVerdict(status="isolated" if isolated else "not_isolated", detail=detail,
                                task_hash=task.content_hash, backend="-", inputs=record.inputs if record else [])  # fmt: skip
    if record is None and task.reference_dir is not None:
        try:
            probed = probe_isolation(task, backend, record=False)
        except Exception as exc:  # infrastructure: the safe way below
            probed = IsolationVerdict(status="error", detail=_err(exc), task_hash=task.content_hash, backend=backend)
        if probed.ok:
            with contextlib.suppress(OSError):  # a read-only task directory: probed again next time
                record_isolation(task, probed)
            record = probed
    if record is None:
        return IsolationVerdict(status="isolated", detail=NEVER_PROBED, task_hash=task.content_hash, backend="-")
    return record


def _never_alone(oracle_check: CheckResult, isolation: Isolation) -> CheckResult:
    """An in-process test run is never a pass by itself: candidate code shared
    the judging process, so its results could be forged. Without an oracle
    that replayed the tests' calls and agreed, such a run is inconclusive."""
    if isolation != "not_isolated" or oracle_check.status in ("fail", "error"):
        return oracle_check
    if oracle_check.status == "pass" and oracle_check.counts.get("replayed", 0) > 0:
        return oracle_check
    why = "an in-process test run is never a pass by itself, and the oracle compared nothing"
    return oracle_check.model_copy(update={"status": "error", "evidence": f"{why}: {oracle_check.evidence}"})


class _Pristine:
    """The task's own workspace files, its test files and test directories."""

    def __init__(self, task: Task, inputs: list[str]):
        self.root = task.workspace_dir
        # the task's protected globs and the tests' inputs outside their folders (golden files)
        self.task_globs = list(task.protected) + [glob.escape(rel) for rel in inputs]
        self.files = {p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()}
        self.tests = {r for r in self.files if is_test_file(r)}
        self.hidden = {p.relative_to(task.hidden_tests_dir).as_posix() for p in task.hidden_tests_dir.rglob("*.py")}
        self.test_dirs = test_dirs(self.files, self.hidden)
        self.globs = self.task_globs + list(DEFAULT_PROTECTED)
        # mutation tasks: reference/ holds each mutated file as it was before the mutation
        ref = task.reference_dir if task.source.proposer == "mutation" else None
        self.originals = {p.relative_to(ref).as_posix(): p for p in ref.rglob("*") if p.is_file()} if ref else {}

    def versions(self, rels) -> dict[str, list[bytes]]:
        """The versions of each file the task ships: its pristine workspace
        copy and, for mutation tasks, the original before the mutation (so
        restoring a mutated line that holds a flagged construct is honest)."""
        out: dict[str, list[bytes]] = {}
        for rel in rels:
            shipped = [self.content(rel)] + ([self.originals[rel].read_bytes()] if rel in self.originals else [])
            out[rel] = [v for v in shipped if v is not None]
        return out

    def content(self, rel: str) -> bytes | None:
        return (self.root / rel).read_bytes() if rel in self.files else None

    def is_protected(self, rel: str) -> bool:
        if rel.startswith(".git/") and not any(f.startswith(".git/") for f in self.files):
            return False  # the agent's own repository (git init): dropped before grading, not tampering
        return rel in self.tests or any(fnmatch.fnmatch(rel, g) for g in self.globs)


def _rejected(checks: list[CheckResult]) -> str:
    return ", ".join(c.name for c in checks if c.status == "fail")


def _skip(checks: list[CheckResult], names: tuple[str, ...], why: str) -> None:
    checks.extend(CheckResult(name=name, status="skipped", evidence=why) for name in names)


def _diff_match_check(rep: ReplayResult, recorded_diff: dict[str, Any] | None) -> CheckResult:
    if recorded_diff is None:
        return CheckResult(name="diff_match", status="skipped", evidence="no harness-recorded diff to compare")
    ok, evidence = recorded_diff_matches(rep.diff, recorded_diff)
    return CheckResult(name="diff_match", status="pass" if ok else "fail", evidence=evidence)


def _err(exc: Exception) -> str:
    kind = "sandbox" if isinstance(exc, SandboxError) else type(exc).__name__
    return f"{kind}: {exc}"[:500]


def _replay_evidence(rep: ReplayResult) -> str:
    parts = [f"{rep.n_steps} tool calls replayed", rep.diff.summary()]
    if rep.refused_calls:  # named first: why a run that called a tool that does not exist went wrong
        parts.insert(0, f"{len(rep.refused_calls)} calls refused ({', '.join(rep.refused_calls[:5])})")
    if not rep.submitted:
        parts.append("trajectory did not submit")
    if rep.divergent_steps:
        parts.append(f"replayed output differs from the recorded one at steps {rep.divergent_steps[:10]}")
    return "; ".join(parts)


def _protected_check(prot) -> CheckResult:
    if prot.violations:
        return CheckResult(name="protected_paths", status="fail", evidence="; ".join(prot.violations)[:1000])
    shown = ", ".join(prot.dropped[:10]) + (f" and {len(prot.dropped) - 10} more" if len(prot.dropped) > 10 else "")
    note = f"; not graded (new test files, agent-made git repository): {shown}" if prot.dropped else ""
    return CheckResult(name="protected_paths", status="pass", evidence="no protected path changed" + note)


def _compile_check(sources: dict[str, bytes]) -> CheckResult:
    for rel, src in sorted(sources.items()):
        try:  # bytes: decoded as the interpreter will (coding cookie, BOM)
            compile(src, rel, "exec", dont_inherit=True)  # compiles only; nothing runs
        except (SyntaxError, ValueError) as exc:
            return CheckResult(name="compile", status="fail", evidence=f"{rel}: {exc}")
    return CheckResult(name="compile", status="pass", evidence=f"{len(sources)} changed Python files compile")


def _audit_check(name: str, found: list[AuditFinding]) -> CheckResult:
    rejecting = [f for f in found if f.severity == "reject"]
    if rejecting:
        rules = sorted({f.rule for f in rejecting})
        return CheckResult(name=name, status="fail", evidence=f"{', '.join(rules)}: {rejecting[0].evidence}"[:1000])
    flags = sorted({f.rule for f in found})
    return CheckResult(name=name, status="pass", evidence=f"flags: {', '.join(flags)}" if flags else "no findings")


class _TestRuns:
    """Run i of the plan on the graded diff, isolated, in process, or split
    (a split task's `in_process` tests in process, every other one isolated).
    The trees are composed once, on first use, and shared by every run: each
    sandbox works on a private copy of them (`open_sandbox`), so runs can go at
    once and none sees what another left on disk."""

    def __init__(self, suite: HiddenSuite, record: IsolationVerdict, backend: str, files: dict[str, bytes],
                 deleted: list[str], tmp: Path):  # fmt: skip
        self.suite, self.backend, self.files, self.deleted, self.tmp = suite, backend, files, deleted, tmp
        self.isolated_suite = self.in_process_suite = suite
        if record.status == "split":
            apart = set(record.in_process)
            self.isolated_suite = suite.with_required([r for r in suite.required if r not in apart])
            self.in_process_suite = suite.with_required(record.in_process)
        self.lock = threading.Lock()
        self.trees: dict[str, Any] = {}
        self.observed: dict[int, dict[str, list]] = {}

    def _composed(self, way: str, compose: Callable[..., Any]) -> Any:
        with self.lock:
            if way not in self.trees:
                self.trees[way] = compose(self.tmp / way, files=self.files, deleted=self.deleted)
            return self.trees[way]

    def isolated(self, i: int) -> TestRunResult:
        """Runs 0 and 1 log every value the tests get from the candidate (`observed`: the lockstep check's
        input; run 1 is under another seed of `random`)."""
        trees = self._composed("isolated", self.suite.compose_isolated)
        result = self.isolated_suite.run_isolated(trees, i, backend=self.backend, observe=i < 2)
        if i < 2:
            self.observed[i] = result.observations
        return result

    def in_process(self, i: int) -> TestRunResult:
        return self.in_process_suite.run(self._composed("graded", self.suite.compose), i, backend=self.backend)

    def split(self, i: int) -> TestRunResult:
        """The isolated part first: when it does not pass, that is the run's outcome (nothing runs in process)."""
        isolated = self.isolated(i)
        if isolated.status != "pass":
            return isolated
        rest = self.in_process(i)
        return dataclasses.replace(
            rest,
            evidence=f"{isolated.evidence}; in process: {rest.evidence}",
            passed=isolated.passed + rest.passed,
            total=isolated.total + rest.total,
            wall_s=isolated.wall_s + rest.wall_s,
            observations=isolated.observations,
        )


class _Deferred:
    """A call started on `pool` at most once, on demand; `result()` runs it here if never started."""

    def __init__(self, pool: ThreadPoolExecutor, call: Callable[[], CheckResult]):
        self.pool, self.call, self.future = pool, call, None

    def start(self) -> None:
        if self.future is None:
            self.future = self.pool.submit(self.call)

    def wait(self) -> None:
        if self.future is not None:
            self.future.exception()

    def result(self) -> CheckResult:
        return self.future.result() if self.future is not None else self.call()


def _test_checks(
    runs: _TestRuns, replays: int, record: IsolationVerdict, on_first_pass: Callable[[], None]
) -> tuple[list[CheckResult], Isolation]:
    """The `tests` and `determinism` checks, and how they ran: as the task's
    record says, and only that way (a failure isolated is final)."""
    if record.status == "not_isolated":
        checks = _repeat(runs.in_process, runs.in_process(0), replays, on_first_pass)
        return _noted(checks, f"not isolated ({record.detail[:300]})"), "not_isolated"
    if record.status == "split":
        checks = _repeat(runs.split, runs.split(0), replays, on_first_pass)
        shown = ", ".join(record.in_process[:5]) + (" ..." if len(record.in_process) > 5 else "")
        return _noted(checks, f"split: {len(record.in_process)} tests that pass before the fix ran in process "
                              f"({shown}), every other one isolated"), "split"  # fmt: skip
    checks = _repeat(runs.isolated, runs.isolated(0), replays, on_first_pass)
    return (_noted(checks, NEVER_PROBED) if record.detail == NEVER_PROBED else checks), "isolated"


def _noted(checks: list[CheckResult], note: str) -> list[CheckResult]:
    checks[0].evidence = f"{note}; {checks[0].evidence}"
    return checks


def _repeat(run: Callable[[int], TestRunResult], first: TestRunResult,
            replays: int, on_first_pass: Callable[[], None]) -> list[CheckResult]:  # fmt: skip
    """`tests` from the first run, `determinism` from runs 1..k-1 of the plan."""
    tests = CheckResult(name="tests", status=first.status, evidence=first.evidence)
    if first.status != "pass":
        return [tests, CheckResult(name="determinism", status="skipped", evidence="tests did not pass once")]
    on_first_pass()
    rest = range(1, max(replays, 1))
    plan = [run_plan(i) for i in rest]
    with ThreadPoolExecutor(max(len(rest), 1)) as pool:  # each run on its own trees: all at once
        agains = list(pool.map(run, rest))
    for again in agains:
        if again.status == "error":
            return [tests, CheckResult(name="determinism", status="error", evidence=again.evidence)]
        if again.status != "pass":
            return [tests, CheckResult(name="determinism", status="fail",
                                       evidence=f"flaky: passed once, then failed: {again.evidence}")]  # fmt: skip
    return [tests, CheckResult(name="determinism", status="pass",
                               evidence=f"passed {len(plan) + 1} of {len(plan) + 1} runs (seed/order {[run_plan(0), *plan]})")]  # fmt: skip


def _oracle_check(
    task: Task,
    suite: HiddenSuite,
    files: dict[str, bytes],
    deleted: list[str],
    tmp: Path,
    backend: str,
    pristine_tests: set[str],
) -> CheckResult:
    if task.reference_dir is None:
        return CheckResult(name="oracle", status="skipped", evidence="task has no reference")
    try:
        contract, note = oracle.contract_in_force(task.statement, task.source.meta)
    except ValueError as exc:
        return CheckResult(name="oracle", status="error", evidence=str(exc))

    def record_tree() -> Path:  # composed only when the task's recording is not cached
        tree = tmp / "oracle-record"
        return compose_tree(tree, task.workspace_dir, overlays=[task.reference_dir], tests=task.hidden_tests_dir)

    # the reference's replay tree is composed like the candidate's: test directories (and data files
    # in them) absent from both, so a call that reads one fails alike instead of only for the candidate
    ref_tree = suite.compose(tmp / "reference", overlays=[task.reference_dir], with_tests=False)
    # the replay trees get no hidden tests: nothing on the candidate's disk holds an expected value
    cand_tree = suite.compose(tmp / "oracle-candidate", files=files, deleted=deleted, with_tests=False)
    test_code = sorted(set(suite.sources) | pristine_tests)
    result = oracle.run_oracle(record_tree, ref_tree, cand_tree, suite.test_files, test_code, contract,
                               backend=backend, timeout=task.timeout_s, environment=suite.environment,
                               first=task.fail_to_pass or (), statement=task.statement,
                               cache_key=oracle.recording_key(task.content_hash, suite.environment))  # fmt: skip
    # how many required tests (functions, parameters folded) had no call compared: an in-process
    # run is oracle-guarded only when none (`report.derive_guard`)
    required = sorted({r.split("[", 1)[0] for r in (task.required_tests or suite.prefixes)})
    compared = {t.split("[", 1)[0] for t in result.tests_compared}
    counts = {**result.counts, "tests_uncovered": sum(r not in compared for r in required)}
    return CheckResult(name="oracle", status=result.status, evidence=result.evidence + note, counts=counts)


def _reference_observations(task: Task, suite: HiddenSuite, record: IsolationVerdict, tmp: Path,
                             backend: str) -> CheckResult | tuple[list, str]:  # fmt: skip
    """What the tests observe of the reference (`lockstep.observe_reference`),
    or the check's result when there is nothing to compare with."""
    if task.reference_dir is None:
        return CheckResult(name="lockstep", status="skipped", evidence="task has no reference")
    if record.status not in ("isolated", "split"):
        return CheckResult(name="lockstep", status="skipped", evidence="the tests do not run isolated")
    key = lockstep.reference_key(suite, task.content_hash, backend)
    runs, how = lockstep.observe_reference(suite, task.reference_dir, tmp, backend, key)
    return CheckResult(name="lockstep", status="skipped", evidence=how) if runs is None else (runs, how)


def _lockstep_check(task: Task, reference, observed: dict[int, dict[str, list]], isolation: Isolation,
                    required: list[str]) -> CheckResult:  # fmt: skip
    if isinstance(reference, CheckResult):
        return reference
    if isolation not in ("isolated", "split"):
        return CheckResult(name="lockstep", status="skipped", evidence="the tests did not run isolated")
    runs, how = reference
    try:
        contract = oracle.contract_of(task.source.meta)
    except ValueError as exc:
        return CheckResult(name="lockstep", status="error", evidence=str(exc))
    result = lockstep.compare(runs, [observed[i] for i in sorted(observed)], contract, required)
    return CheckResult(name="lockstep", status=result.status, evidence=f"{result.evidence} (reference {how})",
                       counts=result.counts)  # fmt: skip


def _progress(
    suite: HiddenSuite, rep: ReplayResult, pristine_tests: set[str], tmp: Path, backend: str
) -> list[ProgressPoint]:
    """Share of required hidden tests passing on the task as given (the start point,
    turn and step -1) and after each state-changing step. The start matters to credit:
    required tests include pass-to-pass ones, so the first state change, whatever it
    did, would otherwise be credited with every test that already passed."""
    start = suite.run(suite.compose(tmp / "progress-start"), 0, backend=backend)
    points = [ProgressPoint(turn=-1, step=-1, tool=START_TOOL, passed=len(start.passed), total=start.total,
                            fraction=start.fraction)]  # fmt: skip
    for i, state in enumerate(rep.states):
        for rel in pristine_tests:  # the task's own tests are graded as shipped
            (state.changed / rel).unlink(missing_ok=True)
        tree = suite.compose(tmp / f"progress-{i}", overlays=[state.changed],
                             deleted=[r for r in state.deleted if r not in pristine_tests])  # fmt: skip
        res = suite.run(tree, 0, backend=backend)
        points.append(ProgressPoint(turn=state.turn, step=state.step, tool=state.tool,
                                    passed=len(res.passed), total=res.total, fraction=res.fraction))  # fmt: skip
    return points
