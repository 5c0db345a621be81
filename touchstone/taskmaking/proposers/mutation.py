"""Mutation proposer (SWE-smith style): inject one AST-level bug into a real
project with a pytest suite, find the tests it breaks (fail-to-pass) and the
ones it leaves (pass-to-pass), describe the failing behaviour, and validate.

Per seed: the seed's own suite must pass in the sandbox, in the seed's
environment, first (otherwise the seed is reported and skipped); a second run
under a per-test profile hook learns which functions the passing tests call,
and only those are mutated. The workspace is the mutated project with its
visible tests; hidden_tests/ holds pristine copies of the test files;
reference/ holds the original of the mutated file.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from touchstone.episode.tools import stable_output
from touchstone.envs import EnvError, EnvSpec
from touchstone.tasks.environment import task_environment
from touchstone.taskmaking.coverage import covered_functions
from touchstone.tasks.mutate import OPERATORS, Mutation, Operator, compile_error, mutations, operator_table
from touchstone.taskmaking.proposers.common import Candidate, finalize, reject, run_candidates, slug
from touchstone.harness import TestRunResult, is_test_module, run_hidden_tests
from touchstone.tasks.schema import HIDDEN_TESTS, REFERENCE, WORKSPACE, EntryPoint, Task, TaskSource, load_task
from touchstone.tasks.seeding import Seed, SeedError, copy_clean, default_seeds, resolve_seed
from touchstone.taskmaking.validate import Validation, ValidationConfig

MAX_PER_UNIT = 2  # tasks per function: spread tasks over the code
MAX_LISTED_TESTS = 5


@dataclass
class SeedReport:
    name: str
    usable: bool
    detail: str
    passing: list[str] = field(default_factory=list)
    wall_s: float = 0.0  # one run of the unmodified suite
    covered: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # path -> function -> tests

    def only(self, path: str) -> set[str] | None:
        """Functions of `path` worth mutating (None: coverage unknown, all of them)."""
        return set(self.covered.get(path, {})) if self.covered else None

    @property
    def mutant_timeout(self) -> float:
        """A mutant that loops forever must not hold a worker for the task's whole budget."""
        return max(10.0, 5 * self.wall_s)


@dataclass
class MutationResult:
    out: Path
    index: Path
    kept: int
    rejected: int
    seeds: list[SeedReport]


def write_task_dir(task_dir: Path, seed: Seed, task: Task, overlays: dict[str, str], reference: dict[str, str]) -> Task:
    """Lay out a task directory from a seed project: workspace (+ overlays),
    pristine hidden tests, reference files, task.json."""
    copy_clean(seed.root, task_dir / WORKSPACE)
    for rel, text in overlays.items():
        (task_dir / WORKSPACE / rel).write_text(text)
    for rel in seed.tests:
        dest = task_dir / HIDDEN_TESTS / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(seed.root / rel, dest)
    for rel, text in reference.items():
        dest = task_dir / REFERENCE / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    task.write(task_dir)
    return load_task(task_dir)


def check_seed(seed: Seed, work: Path, cfg: ValidationConfig) -> SeedReport:
    """Run the seed's own suite once, unmodified, in the sandbox."""
    task_dir = work / f"baseline-{slug(seed.name)}"
    shutil.rmtree(task_dir, ignore_errors=True)
    probe = write_task_dir(
        task_dir,
        seed,
        Task(id="baseline", statement="baseline run of the seed suite", environment=seed.environment),
        {},
        {},
    )
    try:
        environment = task_environment(probe)
        run = run_hidden_tests(probe, required=None, environment=environment, backend=cfg.backend, timeout=120)
    except EnvError as exc:
        return SeedReport(seed.name, False, f"its environment does not build: {exc}")
    finally:
        shutil.rmtree(task_dir)
    # A test the seed's own suite skips (an optional dependency, a platform) is not a
    # broken seed: only its passing tests become required tests of its tasks.
    skipped = [t for t, why in run.failed.items() if why.startswith(("setup skipped", "call skipped"))]
    if not run.ok and not (run.status == "fail" and run.failed and len(skipped) == len(run.failed)):
        failing = "; ".join(f"{k}: {v.splitlines()[0][:120] if v else ''}" for k, v in list(run.messages.items())[:3])
        return SeedReport(seed.name, False, f"seed suite does not pass before mutation ({run.evidence}) {failing}")
    covered = covered_functions(seed, environment=environment, backend=cfg.backend)
    n_funcs = sum(len(f) for f in covered.values())
    skips = f" ({len(skipped)} skipped by the suite itself)" if skipped else ""
    return SeedReport(
        seed.name,
        True,
        f"{len(run.passed)} tests pass in {run.wall_s:.1f}s{skips}; they call {n_funcs} "
        f"functions in {len(covered)} files",
        run.passed,
        run.wall_s,
        covered,
    )


def statement_for(seed_name: str, failures: dict[str, str], collect_errors: dict[str, str]) -> str:
    """Describe the failing behaviour from the failing tests' messages (never the diff)."""
    dist = seed_name.split("==")[0]
    lines = [
        f"A bug was introduced into the `{dist}` library: some of its behaviour no longer matches its "
        f"test suite. {len(failures)} test(s) fail, for example:",
        "",
    ]
    for nodeid, message in list(failures.items())[:MAX_LISTED_TESTS]:
        lines.append(f"- `{nodeid}`")
        # Object addresses change from run to run: left in, the same mutation would get another
        # statement, task hash and training row each run.
        lines += [f"    {m}" for m in stable_output(message or "fails").splitlines()[:4]]
    for path, error in list(collect_errors.items())[:2]:
        lines += ["", f"Collecting `{path}` fails:"] + [f"    {m}" for m in stable_output(error).splitlines()[:4]]
    lines += [
        "",
        "Find and fix the bug in the library's source code so that these tests pass again, "
        "without breaking the other tests. Do not modify the tests.",
    ]
    return "\n".join(lines)


def build_candidate(
    seed: Seed,
    report: SeedReport,
    mutation: Mutation,
    task_dir: Path,
    cfg: ValidationConfig,
    source: TaskSource | None = None,
) -> tuple[Task, TestRunResult] | Validation:
    """Write the task for one mutation; reject mutants that do not compile or that no test notices.
    `source`: the task's source when another proposer wrote the mutant (self-play)."""
    task_id = task_dir.name
    error = compile_error(mutation.source, mutation.path)
    if error:
        return reject(task_id, "not_compilable", f"{mutation.path}:{mutation.lineno}: {error}")
    original = (seed.root / mutation.path).read_text()
    module, func = mutation.unit.split(":", 1)
    draft = Task(
        id=task_id,
        statement="(pending)",
        timeout_s=60,
        protected=list(seed.tests),
        entry_points=[EntryPoint(module=module, function=func)],
        source=source or _source(seed, mutation),
        environment=seed.environment,
    )
    task = write_task_dir(task_dir, seed, draft, {mutation.path: mutation.source}, {mutation.path: original})
    run = run_hidden_tests(
        task, required=None, environment=task_environment(task), backend=cfg.backend, timeout=report.mutant_timeout
    )
    if run.timed_out:
        return reject(
            task_id,
            "too_slow",
            f"the mutant's suite did not finish within {report.mutant_timeout:g}s "
            f"(the seed's takes {report.wall_s:.1f}s): an endless loop?",
        )
    still = set(run.passed)
    # tests of a module that no longer collects are missing from run.failed by id: derive from `passed`
    failing = {
        t: run.messages.get(t, run.messages.get(t.split("[")[0], "fails")) for t in report.passing if t not in still
    }
    if not failing:
        return reject(task_id, "already_solved", "no test fails on the mutant (an equivalent or unnoticed mutant)")
    # SWE-bench convention: grade with the test files that exercise the bug (faster
    # runs, same signal); the full suite stays visible in the workspace
    files = {t.split("::")[0] for t in failing}
    for rel in seed.tests:
        if rel not in files and is_test_module(rel):
            (task_dir / HIDDEN_TESTS / rel).unlink()
    p2p = [t for t in report.passing if t in still and t.split("::")[0] in files]
    final = draft.model_copy(
        update={
            "statement": statement_for(seed.name, failing, run.collect_errors),
            "fail_to_pass": sorted(failing),
            "pass_to_pass": p2p,
        }
    )
    final.write(task_dir)
    return load_task(task_dir), run


def _source(seed: Seed, m: Mutation) -> TaskSource:
    return TaskSource(
        proposer="mutation",
        origin=seed.name,
        unit=f"{seed.name.split('==')[0]}:{m.unit}",
        operator=m.operator,
        meta={"path": m.path, "lineno": m.lineno},
    )


def _round_robin(streams: list[Iterator]) -> Iterator:
    """One item from each stream in turn until all are exhausted."""
    streams = list(streams)
    while streams:
        for stream in list(streams):
            item = next(stream, None)
            if item is None:
                streams.remove(stream)
            else:
                yield item


def candidates(
    seeds: list[tuple[Seed, SeedReport]],
    cfg: ValidationConfig,
    rng: random.Random,
    operators: dict[str, Operator] = OPERATORS,
) -> Iterator[Candidate]:
    """Mutations interleaved across seeds, then files, at most MAX_PER_UNIT per function."""

    def tagged(seed: Seed, report: SeedReport, rel: str) -> Iterator:
        source = (seed.root / rel).read_text()
        found = mutations(source, rel, seed.module_of(rel), only=report.only(rel), rng=rng, operators=operators)
        return (((seed, report), m) for m in found)

    per_seed = [_round_robin([tagged(seed, report, rel) for rel in seed.sources]) for seed, report in seeds]
    per_unit: dict[str, int] = {}
    for (seed, report), m in _round_robin(per_seed):
        if per_unit.get(m.unit, 0) >= MAX_PER_UNIT:
            continue
        per_unit[m.unit] = per_unit.get(m.unit, 0) + 1
        digest = hashlib.sha256(m.source.encode()).hexdigest()[:6]  # two sites on one line differ here
        name = slug(f"{seed.name.split('==')[0]}-{m.unit.split(':')[1]}-{m.operator}-{m.lineno}-{digest}")
        yield Candidate(name, _source(seed, m), lambda d, s=seed, r=report, mu=m: build_candidate(s, r, mu, d, cfg))


def propose_mutation(
    out: Path,
    *,
    seeds: list[str | tuple[str, EnvSpec | None]] | None = None,
    n: int = 50,
    workers: int = 2,
    cfg: ValidationConfig | None = None,
    rng_seed: int = 0,
    environment: EnvSpec | None = None,
    tests: str | None = None,
    operators: list[str] | None = None,
) -> MutationResult:
    """Propose and validate mutation tasks until `n` are kept (or candidates run out).
    `seeds`: local source trees, pinned sdists or shipped seed names, alone or
    paired with their environment (default: the shipped seeds, each with its
    own); `environment`: what the unpaired given seeds need installed;
    `tests`: path prefix or glob of the test files that count; `operators`:
    the kinds of bug to inject (touchstone.tasks.mutate.OPERATORS; default all)."""
    cfg = cfg or ValidationConfig()
    table = operator_table(operators)  # an unknown name fails before any sandbox run
    out.mkdir(parents=True, exist_ok=True)
    with usable_seeds(seeds, cfg, environment, tests) as (usable, reports):
        found = candidates(usable, cfg, random.Random(rng_seed), table)
        rows, kept = run_candidates(found, out, n=n, workers=workers, cfg=cfg, desc="mutation tasks")
    index = finalize(out, rows)
    return MutationResult(out, index, len(kept), len(rows) - len(kept), reports)


@contextlib.contextmanager
def usable_seeds(
    seeds: list[str | tuple[str, EnvSpec | None]] | None,
    cfg: ValidationConfig,
    environment: EnvSpec | None = None,
    tests: str | None = None,
) -> Iterator[tuple[list[tuple[Seed, SeedReport]], list[SeedReport]]]:
    """The seeds resolved into a temporary directory and checked (their own
    suite passes in the sandbox): (usable seeds with their reports, every
    report), valid while the context is open. No usable seed is a SeedError."""
    with tempfile.TemporaryDirectory(prefix="touchstone-seeds-") as tmp:
        work = Path(tmp)
        pairs = [s if isinstance(s, tuple) else (s, environment) for s in seeds or []]
        resolved = default_seeds(work) if not pairs else [resolve_seed(s, work, env) for s, env in pairs]
        resolved = [s.only_tests(tests) for s in resolved]
        # each check is a suite run and a coverage run in the sandbox: the seeds' side by side
        with ThreadPoolExecutor(cfg.parallel) as pool:
            reports = list(pool.map(lambda seed: check_seed(seed, work, cfg), resolved))
        usable = [(s, r) for s, r in zip(resolved, reports) if r.usable]
        if not usable:
            raise SeedError("no usable seed: " + "; ".join(f"{r.name}: {r.detail}" for r in reports))
        yield usable, reports
