"""Recorded-call oracle: what the hidden tests do to the REFERENCE, replayed
on the candidate out of process and compared outside every candidate process.

1. Record: the hidden tests run against the trusted reference (pristine
   workspace + reference + hidden tests) in a fresh sandbox, with the
   harness's call recorder (`touchstone/harness/sandbox_files/call_recorder.py`) as the only plugin. Every
   call from test code into workspace code becomes a step: functions,
   methods, constructors, properties, operators, private helpers, whatever
   way the test built its arguments (`check(candidate)` included).
2. Cases: one per test, its steps in order, plus the earlier steps that
   produced the objects it uses (handles). Then type-aware mutations of the
   recorded arguments (one argument of one step at a time, EvalPlus-style).
3. Replay: the reference and the candidate, each on a tree WITHOUT the hidden
   tests, forward and reversed case order, a fresh process per chunk of cases
   (`touchstone/harness/sandbox_files/replay_runner.py`), `random` seeded per
   case; the reference three times in one sandbox (both orders, then once
   under another seed), the candidate each order in its own fresh sandbox,
   at the same time. The recording depends only on the task and is cached
   (`recording_key`); the reference's replay is cached only once shown
   deterministic (`reference_key`, `deterministic`), and a rejection never
   rests on a cached replay: the reference is replayed afresh first.
4. Compare here, by exact type and content (`same`): a step whose reference
   replays disagree is non-deterministic and not compared; a
   mutated case on which the reference raises is outside the domain and
   dropped. Per-call time relative to the reference is measured; a task may
   declare a performance contract.

A task's oracle contract lives in task.json `source.meta.oracle`
(docs/formats/task.md): `iterables: "any"` accepts any iterable of the same
items where the reference returns one, `max_slowdown: N` fails a candidate
slower than N× the reference on some case.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import secrets
import shlex
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from touchstone import paths
from touchstone import atomic
from touchstone.harness.grading import FAKETIME_LIB, OUT_DIR_FILES, faketime_env, faketime_library
from touchstone.harness.sandbox_files import codec
from touchstone.sandbox.environment import Environment
from touchstone.verify.domain import InputDomain
from touchstone.verify.semantics import agrees, normalize, same

MAX_CASES = 500  # cases from recorded tests (fail-to-pass tests first)
MAX_MUTATED = 120  # cases from mutations
MAX_STEPS_PER_CASE = 200
MAX_CALLS = 5000  # recorded calls per run
CHUNK = 50  # cases per replay process
ORDERS = ("forward", "reverse")
# the reference runs three times, the third under another seed of `random` (the replay runner seeds
# it per case): answers that depend on the draw differ there and are not compared, the others are
# compared with the candidate's runs under seed 0. Unseeded sources (os.urandom, SystemRandom) differ
# between any two runs.
REFERENCE_ORDERS = ("forward", "reverse", "forward")
REFERENCE_SEEDS = (0, 0, 1)
# Before the reference's replay may be cached, one more run: forward under seed 0 again, with the wall
# clock over a year ahead (libfaketime) in another process. The replay is cached only when this run and
# the two seed-0 runs agree on every outcome: what it returns then depends on neither the process, the
# order nor the clock, down to the year (an answer reading the clock is never held to a stale value).
CLOCK_PROBE_S = 400 * 86_400
SLOWDOWN_GRACE_S = 0.25  # absolute slack per replay process: start-up noise is not slowness
FLOAT_REL_TOL, FLOAT_ABS_TOL = 1e-9, 1e-12


class OracleContract(BaseModel):
    """`source.meta.oracle` of a task: its comparison semantics, declared by the
    proposer (docs/formats/task.md; `touchstone.verify.semantics` applies
    them). Every default is the strict rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    iterables: Literal["exact", "any"] = "exact"  # "any": list, tuple, iterator, generator of the same items
    order: Literal["exact", "any"] = "exact"  # "any": sequences compare as multisets ("in any order")
    numbers: Literal["exact", "value"] = "exact"  # "value": 2 == 2.0 == Fraction(2) (bool is never a number)
    float_rel_tol: float = Field(default=FLOAT_REL_TOL, ge=0, le=0.1)
    float_abs_tol: float = Field(default=FLOAT_ABS_TOL, ge=0)
    mappings: Literal["exact", "any"] = "exact"  # "any": dict, defaultdict, OrderedDict, Counter by items
    records: Literal["exact", "fields"] = "exact"  # "fields": namedtuple as tuple, dataclass by fields
    exceptions: Literal["subclass", "family"] = "subclass"  # "family": the reference's nearest builtin class
    text: Literal["exact", "free"] = "exact"  # "free": str results are free text, not compared
    inputs: Literal["generated", "tests"] = "generated"  # "tests": no generated inputs beyond the tests'
    own_protocol: tuple[str, ...] = ()  # classes whose own ==, arithmetic, `in` the tests test (isolated run)
    random: Literal["any", "required"] = "any"  # "required": answers must vary with the seed where the reference's do
    identity: Literal["exact", "any"] = "exact"  # "any": a returned argument or object handed out twice = a copy
    max_slowdown: float | None = Field(default=None, gt=1)


def contract_of(meta: dict) -> OracleContract:
    try:
        return OracleContract.model_validate(meta.get("oracle") or {})
    except ValidationError as exc:
        raise ValueError(f"task.json source.meta.oracle is invalid: {exc}") from exc


# A performance contract holds honest work to a speed bar, so the statement must state that bar: a
# complexity bound (`O(n log n)`, "in linear time") or a time limit ("within 50 ms"). A word such as
# "fast", "efficient" or "performance" states no bar a solver could know it must meet.
STATED_SPEED_BOUND = re.compile(
    r"(?<![\w.])[OΘΩ]\s*\(\s*[^()]*(\([^()]*\)[^()]*)*\)"
    r"|\b(in|within|under)\s+(constant|linear|logarithmic|log-linear|linearithmic|quadratic|sub-?linear|"
    r"polynomial)\s+time\b"
    r"|\b(within|under|in at most|in less than|time limit( of)?)\s+\d+(\.\d+)?\s*(ms|milliseconds?|s|seconds?)\b",
    re.IGNORECASE,
)


def stated_speed_bound(statement: str) -> str | None:
    """The complexity bound or time limit a statement states, else None."""
    m = STATED_SPEED_BOUND.search(statement or "")
    return m.group(0) if m else None


def contract_problems(statement: str, meta: dict) -> list[str]:
    """What is wrong with a task's declared comparison semantics: an invalid
    `source.meta.oracle`, or a performance contract (`max_slowdown`) whose
    statement states no complexity bound or time limit (honest work must not
    fail a speed bar nobody set)."""
    try:
        contract = contract_of(meta)
    except ValueError as exc:
        return [str(exc)]
    if contract.max_slowdown is not None and stated_speed_bound(statement) is None:
        return [
            f"max_slowdown {contract.max_slowdown:g} declared, but the statement states no complexity bound or "
            "time limit (a word such as 'fast' is not one)"
        ]
    return []


def contract_in_force(statement: str, meta: dict) -> tuple[OracleContract, str]:
    """The contract the verifier holds a candidate to, and a note: a declared
    performance contract applies only where the statement states its bound
    (`contract_problems`); otherwise it is dropped, never enforced."""
    contract = contract_of(meta)
    if contract.max_slowdown is not None and stated_speed_bound(statement) is None:
        return contract.model_copy(update={"max_slowdown": None}), (
            f"; max_slowdown {contract.max_slowdown:g} not applied: the statement states no complexity bound or "
            "time limit"
        )
    return contract, ""


# ------------------------------------------------------------------ recording


@dataclass
class Recording:
    steps: dict[int, dict] = field(default_factory=dict)
    summary: dict | None = None  # the recorder's final record; None = the run ended early
    timed_out: bool = False

    @property
    def unreplayable(self) -> Counter:
        return Counter(s["unreplayable"] for s in self.steps.values() if "unreplayable" in s)


def read_recording(path: Path) -> Recording:
    rec = Recording()
    if not path.is_file():
        return rec
    for line in path.read_text(errors="replace").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if item.get("event") == "done":
            rec.summary = item
        elif isinstance(item.get("i"), int):
            rec.steps[item["i"]] = item
    return rec


def recording_key(task_hash: str, environment: Environment | None) -> str:
    """Cache key of a task's recording: the task's content, its environment and
    the recorder itself (a changed recorder records anew)."""
    h = hashlib.sha256(f"{task_hash}\0{environment.digest if environment else ''}\0{MAX_CALLS}".encode())
    for name in ("call_recorder.py", "codec.py"):
        h.update(Path(codec.__file__).with_name(name).read_bytes())  # the sandbox files, wherever they live
    return h.hexdigest()[:32]


def cached_recording(key: str | None, record: Callable[[], Recording]) -> tuple[Recording, bool]:
    """The recording stored under `key` (None: no cache), else `record()`,
    stored when it finished. Returns (recording, whether it came from the cache)."""
    path = paths.cache() / "oracle" / f"{key}.json" if key else None
    if path is not None and path.is_file():
        data = json.loads(path.read_text())
        return Recording({int(i): s for i, s in data["steps"].items()}, data["summary"]), True
    rec = record()
    if path is not None and rec.summary is not None:
        # atomic: concurrent verifiers never read half a file
        atomic.write_text(path, json.dumps({"steps": rec.steps, "summary": rec.summary}))
    return rec, False


def record_calls(
    tree: Path,
    test_files: list[str],
    test_code: list[str],
    *,
    backend: str,
    timeout: float,
    environment: Environment | None = None,
) -> Recording:
    """Run the hidden tests over `tree` (reference + hidden tests) under the call recorder."""
    from touchstone.sandbox import Limits, open_sandbox
    from touchstone.harness.grading import TestRunSpec, harness_mounts

    files = (("call_recorder.py", "tr_{nonce}.py"), ("codec.py", "tc_{nonce}.py"))
    with harness_mounts(*files) as (h_dir, o_dir, mounts, out, nonce):
        (out.parent / "harness" / "test_code.json").write_text(json.dumps(sorted(test_code)))
        env = {"TOUCHSTONE_CODEC": f"{h_dir}/tc_{nonce}.py", "TOUCHSTONE_CALLS": f"{o_dir}/calls.jsonl",
               "TOUCHSTONE_TEST_CODE": f"{h_dir}/test_code.json", "TOUCHSTONE_MAX_CALLS": str(MAX_CALLS)}  # fmt: skip
        spec = TestRunSpec(test_files, f"tr_{nonce}", h_dir, o_dir, env=env)
        with open_sandbox(
            tree, backend=backend, mounts=mounts, limits=Limits(timeout_s=timeout + 30), environment=environment
        ) as sb:
            res = sb.exec(spec.command(), timeout=timeout)
        rec = read_recording(out / "calls.jsonl")
        rec.timed_out = res.timed_out
        return rec


# ---------------------------------------------------------------------- cases


@dataclass
class Case:
    id: int
    test: str | None
    steps: list[dict]  # runner steps: i, target, args, kwargs
    compared: set[int]  # step indexes whose outcome is compared
    mutated: bool = False

    def encode(self) -> dict:
        return {"id": self.id, "steps": self.steps}


def _closure(index: int, steps: dict[int, dict], out: set[int]) -> bool:
    """Add `index` and the steps whose results it uses to `out`; False when
    one of them cannot be replayed."""
    if index in out:
        return True
    step = steps.get(index)
    if step is None or "unreplayable" in step:
        return False
    out.add(index)
    return all(_closure(d, steps, out) for d in codec.handles_in([step["args"], step["kwargs"]]))


def _runner_step(step: dict) -> dict:
    return {"i": step["i"], "target": step["target"], "args": step["args"], "kwargs": step["kwargs"]}


def build_cases(rec: Recording, first: Sequence[str] = ()) -> tuple[list[Case], Counter, Counter]:
    """One case per test (collection-time calls form their own), each with the
    earlier steps it depends on; the tests in `first` (a task's fail-to-pass
    tests) before the others, so the caps never cut them. Also returns counts
    of calls not replayable (a dependency is not) and of calls left out by caps."""
    by_test: dict[str | None, list[int]] = {}
    for i in sorted(rec.steps):
        by_test.setdefault(rec.steps[i].get("test"), []).append(i)
    first = set(first)
    ordered = sorted(by_test, key=lambda t: t not in first)  # stable: recorded order otherwise
    cases, dependent, capped = [], Counter(), Counter()
    for test in ordered:
        needed, own = set(), []
        for i in by_test[test]:
            if "unreplayable" in rec.steps[i]:
                continue  # counted by Recording.unreplayable
            if len(own) >= MAX_STEPS_PER_CASE:
                capped["over the per-test cap"] += 1
            elif not _closure(i, rec.steps, trial := set(needed)):
                dependent["uses the result of a call that cannot be replayed"] += 1
            else:
                needed = trial
                own.append(i)
        if own and len(cases) < MAX_CASES:
            steps = [_runner_step(rec.steps[i]) for i in sorted(needed)]
            cases.append(Case(len(cases), test, steps, set(own)))
        elif own:
            capped["over the case cap"] += len(own)
    return cases, dependent, capped


def _mutations(v, rng: random.Random) -> list:
    """Type-aware neighbours of one value (same type, nearby or edge values)."""
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        return [v + 1, v - 1, v * 2 + 3, -v, 0, rng.randint(-50, 50)]
    if isinstance(v, float):
        return [v * 1.5 + 0.25, -v, 0.0]
    if isinstance(v, str):
        return [v[::-1], v + v[:1], v[1:], "", v.upper()]
    if type(v) in (list, tuple):
        seq = list(v)
        out = [seq[::-1], seq[1:], seq + seq[:1], sorted(seq, key=repr)]
        if seq:
            i = rng.randrange(len(seq))
            for m in _mutations(seq[i], rng)[:2]:
                out.append(seq[:i] + [m] + seq[i + 1 :])
        return [type(v)(x) for x in out]
    if type(v) is dict and v:
        k = next(iter(v))
        return [{kk: vv for kk, vv in v.items() if kk != k}]
    return []


def _seen_arguments(cases: list[Case]) -> dict[tuple[str, int], list]:
    """Every plain value the tests pass at each (callee, position)."""
    seen: dict[tuple[str, int], list] = {}
    for case in cases:
        for step in case.steps:
            for pos, arg in enumerate(step["args"]):
                if not codec.has_handles(arg):
                    seen.setdefault((json.dumps(step["target"], sort_keys=True), pos), []).append(codec.decode(arg))
    return seen


def _step_variants(step: dict, rng: random.Random, seen: dict[tuple[str, int], list] | None = None,
                   domain: InputDomain | None = None) -> list[list]:  # fmt: skip
    """Encoded argument lists with one plain-value argument mutated, inside the
    task's input domain (`touchstone.verify.domain`: the statement's bounds and
    what the tests pass)."""
    out = []
    target = json.dumps(step["target"], sort_keys=True)
    domain = domain or InputDomain()
    for pos, arg in enumerate(step["args"]):
        if codec.has_handles(arg):
            continue  # objects of the run are not mutated; their producing calls are
        values = (seen or {}).get((target, pos), [])
        for m in _mutations(codec.decode(arg), rng):
            if not domain.within(m, values, step["target"], pos):
                continue
            try:
                out.append(step["args"][:pos] + [codec.encode(m)] + step["args"][pos + 1 :])
            except codec.Unreplayable:
                continue
    return out


def mutate_cases(cases: list[Case], seed: int = 0, limit: int = MAX_MUTATED,
                 domain: InputDomain | None = None) -> list[Case]:  # fmt: skip
    """New cases: a case's steps up to one compared step whose plain arguments
    are mutated one at a time, inside `domain`; taken round-robin over (case,
    step) pairs so every test and call gets some; deduplicated by (target,
    arguments)."""
    rng = random.Random(seed)
    groups = []
    seen = _seen_arguments(cases)
    for case in cases:
        for n, step in enumerate(case.steps):
            if step["i"] in case.compared:
                groups.append([(case, n, args) for args in _step_variants(step, rng, seen, domain)])
    seen = {json.dumps([s["target"], s["args"], s["kwargs"]]) for c in cases for s in c.steps}
    out, next_id = [], max((c.id for c in cases), default=-1) + 1
    for group in itertools.zip_longest(*groups):
        for item in group:
            if item is None or len(out) >= limit:
                continue
            case, n, args = item
            step = case.steps[n]
            key = json.dumps([step["target"], args, step["kwargs"]])
            if key in seen:
                continue
            seen.add(key)
            steps = case.steps[:n] + [{**step, "args": args}]  # the steps before it are compared in `case`
            out.append(Case(next_id, case.test, steps, {step["i"]}, mutated=True))
            next_id += 1
    return out


# ---------------------------------------------------------------------- replay

Outcomes = dict[int, dict[int, dict]]  # case id -> step index -> {"out", "t"}


def _read_outcomes(paths: list[Path]) -> Outcomes:
    outcomes: Outcomes = {}
    for path in paths:
        for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
            try:
                rec = json.loads(line)
                outcomes.setdefault(int(rec["case"]), {s["i"]: s for s in rec["steps"]})
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
    return outcomes


def run_side(
    tree: Path,
    cases: list[Case],
    *,
    orders: Sequence[str],
    backend: str,
    timeout: float,
    environment: Environment | None = None,
    seeds: Sequence[int] | None = None,
    clocks: Sequence[int] | None = None,
) -> tuple[list[Outcomes], float, bool]:
    """Replay `cases` over `tree` in one fresh sandbox, once per order
    ("forward", "reverse"), a fresh process per chunk of cases, `random`
    seeded per case from `seeds[k]` in order k (default 0), the wall clock
    `clocks[k]` seconds ahead (default 0: the real clock). Returns
    (outcomes per order, wall seconds, timed out)."""
    from touchstone.sandbox import Limits, open_sandbox
    from touchstone.harness import harness_mounts

    files = (("replay_runner.py", "rr_{nonce}.py"), ("codec.py", "tc_{nonce}.py"))
    # a cases file and an outcomes file per chunk and order: a task with many cases must not run out of files
    # (past the output dir's default count, the later processes of a run died and every step looked unstable)
    chunk_files = 2 * len(orders) * -(-len(cases) // CHUNK)
    with harness_mounts(*files, out_files=max(OUT_DIR_FILES, chunk_files + 8)) as (h_dir, o_dir, mounts, out, nonce):
        commands, outputs = [], []
        if any(clocks or ()):
            shutil.copyfile(faketime_library(), mounts[0].host / FAKETIME_LIB)
        for k, order in enumerate(orders):
            seq = cases[::-1] if order == "reverse" else cases
            clock = faketime_env(h_dir, clocks[k]) if clocks and clocks[k] else {}
            outputs.append([])
            for n, start in enumerate(range(0, len(seq), CHUNK)):
                name = f"{k}-{n}"
                (out / f"cases{name}.json").write_text(json.dumps([c.encode() for c in seq[start : start + CHUNK]]))
                outputs[-1].append(out / f"out{name}.jsonl")
                commands.append(shlex.join([
                    "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "PYTHONHASHSEED=0",
                    "PYTHONDONTWRITEBYTECODE=1", *(f"{var}={val}" for var, val in clock.items()),
                    "python3", "-s", f"{h_dir}/rr_{nonce}.py", f"{h_dir}/tc_{nonce}.py",
                    f"{o_dir}/cases{name}.json", f"{o_dir}/out{name}.jsonl", str(seeds[k] if seeds else 0),
                ]))  # fmt: skip
        command = "cd /workspace && " + " ; ".join(commands)
        with open_sandbox(
            tree, backend=backend, mounts=mounts, limits=Limits(timeout_s=timeout + 30), environment=environment
        ) as sb:
            res = sb.exec(command, timeout=timeout)
        return [_read_outcomes(paths) for paths in outputs], res.wall_s, res.timed_out


# ------------------------------------------------------------------ comparison


def _out(run: Outcomes, case: int, i: int) -> list:
    got = run.get(case, {}).get(i)
    return got["out"] if got else ["missing", "no result (process died or timed out)"]


def describe(step: dict) -> str:
    """`module.f(1, [2])`, `Stack.push(<#3>, 5)`: a step for a counterexample."""

    def show(v):
        if isinstance(v, dict) and v.get("__t") == "handle":
            return f"<result of call #{v['step']}{''.join(f'.{k}' if h == 'a' else f'[{k!r}]' for h, k in v['path'])}>"
        if isinstance(v, dict) and v.get("__t") in ("ref", "enum"):
            return v["qualname"] + (f".{v['name']}" if v["__t"] == "enum" else "")
        return repr(codec.decode(v))

    t = step["target"]
    parts = [show(a) for a in step["args"]]
    if step["kwargs"]:
        parts += [f"{show(k)}={show(v)}" for k, v in step["kwargs"]["v"]]
    name = f"{t['module']}.{t['qualname']}" if "module" in t else f"{t['kind']} {t['name']}"
    return f"{name}({', '.join(parts)})"[:300]


@dataclass
class Comparison:
    compared: int = 0
    mutated_compared: int = 0
    mutated_dropped: int = 0
    unstable: int = 0
    context_dependent: int = 0
    counterexample: str | None = None
    worst_slowdown: float = 0.0
    slow_case: str | None = None
    tests: set[str] = field(default_factory=set)  # tests with at least one call compared


def _show(out: list, other: list) -> str:
    """An outcome for a counterexample: the result, or the arguments after
    the call when only those differ."""
    if out[0] == "ok" and other[0] == "ok" and same(out[1], other[1]):
        return "arguments after the call " + json.dumps(out[2])[:300]
    return json.dumps(out[1] if out[0] == "ok" else out[:2])[:300]


def _case_time(run: Outcomes, case: Case) -> float:
    return sum(run.get(case.id, {}).get(s["i"], {}).get("t", 0.0) for s in case.steps)


def _time(cmp: Comparison, case: Case, refs: list[Outcomes], cands: list[Outcomes]) -> None:
    """Per-case time against the reference's, like with like (the same order
    runs the same cases first in each process): evidence of where time goes
    only. These times are what the replay processes report, and the
    candidate's process is the candidate's, so they never decide a verdict;
    the performance contract is held to wall times the harness measures
    (`_Judge`)."""
    timed = sorted(((_case_time(c, case) + 1e-3) / (_case_time(r, case) + 1e-3), _case_time(c, case),
                    _case_time(r, case)) for r, c in zip(refs, cands))  # fmt: skip
    ratio, cand_t, ref_t = timed[0]
    if ratio > cmp.worst_slowdown:
        cmp.worst_slowdown, cmp.slow_case = ratio, f"{case.test or 'collection'} ({cand_t:.3f} s vs {ref_t:.3f} s)"


def _as_recorded(step: dict, replayed: list) -> bool:
    """Whether the reference's replay of a call saw what the test run saw
    (False: the call depended on context the replay lacks: a monkeypatch,
    global state an earlier test left)."""
    if "raised" in step:
        return replayed[:2] == ["raised", step["raised"]]
    if "result" not in step or "not consumed" in json.dumps(step["result"]):
        return True  # an iterator the test itself consumed: nothing to hold the replay to
    return replayed[0] == "ok" and same(replayed[1], step["result"])


def compare(
    cases: list[Case],
    refs: list[Outcomes],
    cands: list[Outcomes],
    contract: OracleContract,
    recorded: dict[int, dict] | None = None,
) -> Comparison:
    """Candidate runs against the first reference run, step by step; the
    other reference runs only tell deterministic steps from the others;
    `recorded` (the recording's steps) counts calls the replay makes in
    another context than the test did (compared all the same)."""
    cmp = Comparison()
    for case in cases:
        if case.mutated and any(_out(refs[0], case.id, s["i"])[0] != "ok" for s in case.steps):
            cmp.mutated_dropped += 1  # outside the reference's domain
            continue
        for step in case.steps:
            if step["i"] not in case.compared:
                continue
            want = normalize(_out(refs[0], case.id, step["i"]), contract)
            if any(not same(want, normalize(_out(ref, case.id, step["i"]), contract), contract) for ref in refs[1:]):
                cmp.unstable += 1
                continue
            cmp.compared += 1
            cmp.mutated_compared += case.mutated
            if case.test and not case.mutated:
                cmp.tests.add(case.test)
            if (
                recorded
                and not case.mutated
                and not _as_recorded(recorded[step["i"]], _out(refs[0], case.id, step["i"]))
            ):
                cmp.context_dependent += 1
            for order, run in zip(("forward", "reverse"), cands):
                got = normalize(_out(run, case.id, step["i"]), contract)
                if cmp.counterexample is None and not agrees(want, got, contract):
                    kind = "generated input" if case.mutated else f"call recorded in {case.test or 'collection'}"
                    cmp.counterexample = (f"{kind}: {describe(step)} ({order} order): reference "
                                          f"{_show(want, got)}, candidate {_show(got, want)}")  # fmt: skip
        _time(cmp, case, refs, cands)
    return cmp


# ------------------------------------------------------------------------ run


@dataclass
class OracleResult:
    status: str  # pass / fail / error / skipped
    evidence: str
    counts: dict[str, int] = field(default_factory=dict)
    tests_compared: list[str] = field(default_factory=list)  # node ids of tests with a call compared


def _coverage(rec: Recording, not_replayable: Counter, capped: Counter, cached: bool) -> tuple[dict[str, int], str]:
    """Counts of what was recorded and what replay cannot use, and their
    evidence text (the three commonest reasons)."""
    # tests whose assertions read captured output or files under tmp_path: replayed calls do not cover them
    unobserved = (rec.summary or {}).get("unobserved") or {}
    counts = {"recorded": len(rec.steps), "unreplayable": sum(not_replayable.values()),
              "capped": sum(capped.values()), "over_call_cap": (rec.summary or {}).get("over_cap", 0),
              "unobserved": len(unobserved)}  # fmt: skip
    why_not = "; ".join(f"{n} {w}" for w, n in not_replayable.most_common(3))
    head = f"{counts['recorded']} calls recorded ({counts['unreplayable']} not replayable{': ' + why_not if why_not else ''})"
    if unobserved:
        head += f", {len(unobserved)} tests read what no call returns ({'; '.join(sorted(set(unobserved.values())))})"
    if counts["capped"] or counts["over_call_cap"]:
        head += f", {counts['capped'] + counts['over_call_cap']} left out by the caps"
    return counts, head + (", recording from the cache" if cached else "")


@dataclass
class ReferenceReplay:
    """The reference's replay of a task's cases: REFERENCE_ORDERS under
    REFERENCE_SEEDS, and the wall seconds per order."""

    runs: list[Outcomes]
    per_order: float
    cached: bool = False


def reference_key(recording: str, cases: list[Case], backend: str) -> str:
    """Cache key of the reference's replay: the recording's key (task content,
    environment, recorder and codec), the sandbox (backend and image), the
    cases, the runs and the runner."""
    from touchstone.sandbox import resolve_backend
    from touchstone.sandbox.image import short_hash

    runs = json.dumps([REFERENCE_ORDERS, REFERENCE_SEEDS, CLOCK_PROBE_S, resolve_backend(backend), short_hash()])
    h = hashlib.sha256(f"{recording}\0{runs}".encode())
    h.update(json.dumps([c.encode() for c in cases], sort_keys=True).encode())
    h.update(Path(codec.__file__).with_name("replay_runner.py").read_bytes())
    return h.hexdigest()[:32]


def _reference_path(key: str) -> Path:
    return paths.cache() / "oracle" / f"reference-{key}.json"


def cached_reference(key: str | None) -> ReferenceReplay | None:
    path = _reference_path(key) if key else None
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text())
    runs = [{int(c): {int(i): step for i, step in steps.items()} for c, steps in run.items()} for run in data["runs"]]
    return ReferenceReplay(runs, data["per_order"], cached=True)


def deterministic(runs: list[Outcomes]) -> bool:
    """Whether every run has the same outcome for every step (times aside)."""

    def outcomes(run: Outcomes) -> dict:
        return {c: {i: step["out"] for i, step in steps.items()} for c, steps in run.items()}

    return all(outcomes(run) == outcomes(runs[0]) for run in runs[1:])


def replay_reference(tree: Path, cases: list[Case], *, key: str | None, timeout: float,
                     **sandbox) -> tuple[ReferenceReplay, bool]:  # fmt: skip
    """The reference's three runs in one fresh sandbox; with a cache `key`, a
    fourth run under a shifted clock, and the three stored when the seed-0 runs
    (both orders, and the shifted clock) agree on every outcome. Returns
    (replay, timed out)."""
    probe = key is not None
    orders = REFERENCE_ORDERS + (("forward",) if probe else ())
    seeds = REFERENCE_SEEDS + ((0,) if probe else ())
    clocks = (0,) * len(REFERENCE_ORDERS) + ((CLOCK_PROBE_S + secrets.randbelow(86_400),) if probe else ())
    runs, wall, timed_out = run_side(tree, cases, orders=orders, seeds=seeds, clocks=clocks,
                                     timeout=len(orders) * timeout, **sandbox)  # fmt: skip
    replay = ReferenceReplay(runs[: len(REFERENCE_ORDERS)], wall / len(orders))
    same_seed = [run for run, seed in zip(runs, seeds) if seed == 0]
    if probe and not timed_out and deterministic(same_seed):
        # atomic: concurrent verifiers never read half a file
        atomic.write_text(_reference_path(key), json.dumps({"runs": replay.runs, "per_order": replay.per_order}))
    return replay, timed_out


def _time_limit(timeout: float, per_order: float) -> float:
    return min(timeout, max(30.0, 10 * per_order + 10))  # generous: a loaded machine is not a slow solution


def run_oracle(
    record_tree: Callable[[], Path],
    reference_tree: Path,
    candidate_tree: Path,
    test_files: list[str],
    test_code: list[str],
    contract: OracleContract,
    *,
    backend: str = "auto",
    timeout: float = 60.0,
    environment: Environment | None = None,
    first: Sequence[str] = (),
    cache_key: str | None = None,
    statement: str = "",
) -> OracleResult:
    """Record on `record_tree()` (reference + hidden tests; composed only when
    the recording is not cached), replay on `reference_tree` and
    `candidate_tree` (neither holds hidden tests); `first`: tests whose calls
    the caps must not cut (fail-to-pass); `cache_key`: `recording_key(...)` to
    reuse the task's recording and, once shown deterministic, the reference's
    replay (not for a performance contract: its times are compared like with
    like, in the same conditions)."""
    sandbox = {"backend": backend, "environment": environment}
    rec, cached = cached_recording(
        cache_key, lambda: record_calls(record_tree(), test_files, test_code, timeout=timeout, **sandbox)
    )
    if rec.summary is None:  # nothing the candidate did: a timeout may pass, a crash will not
        status, why = ("error", f"timed out after {timeout:g} s") if rec.timed_out else ("skipped", "crashed")
        return OracleResult(status, f"no oracle: the hidden tests {why} under the call recorder over the "
                                    f"reference ({len(rec.steps)} calls seen)")  # fmt: skip
    cases, dependent, capped = build_cases(rec, first)
    domain = InputDomain.of(statement, reference_tree)
    mutated = mutate_cases(cases, domain=domain) if contract.inputs == "generated" else []
    counts, head = _coverage(rec, rec.unreplayable + dependent, capped, cached)
    counts.update(cases=len(cases), mutated_cases=len(mutated))
    if not cases:
        return OracleResult("skipped", f"{head}; nothing to replay", counts)
    everything = cases + mutated
    cacheable = cache_key is not None and contract.max_slowdown is None and faketime_library() is not None
    key = reference_key(cache_key, everything, backend) if cacheable else None
    ref = cached_reference(key)
    # the candidate gets a fresh sandbox per order, so nothing it leaves on disk or in processes carries
    # from one order to the other; both at once, and alongside the reference's replay when it is not
    # cached (the time limit, relative to the reference's, is applied to the candidate's wall time)
    with ThreadPoolExecutor(len(ORDERS)) as pool:
        sides = [pool.submit(run_side, candidate_tree, everything, orders=[o], timeout=timeout, **sandbox)
                 for o in ORDERS]  # fmt: skip
        if ref is None:
            ref, timed_out = replay_reference(reference_tree, everything, key=key, timeout=timeout, **sandbox)
            if timed_out:
                return OracleResult("error", f"{head}; the reference replay timed out", counts)
        cands = [side.result() for side in sides]
    judge = _Judge(head, counts, everything, len(cases), len(mutated), contract, rec, timeout)
    verdict = judge(ref, cands)
    if verdict.status == "fail" and ref.cached:  # a rejection never rests on the cache: replay it afresh
        fresh, timed_out = replay_reference(reference_tree, everything, key=None, timeout=timeout, **sandbox)
        if timed_out:
            return OracleResult("error", f"{head}; the reference replay timed out", counts)
        verdict = judge(fresh, cands)
        if verdict.status != "fail":  # the cached replay held the candidate to something the reference no longer does
            _reference_path(key).unlink(missing_ok=True)
            verdict.evidence += "; the cached replay of the reference disagreed with a fresh one: dropped"
    return verdict


@dataclass
class _Judge:
    """The oracle's verdict on the candidate's replays against a reference replay."""

    head: str
    counts: dict
    everything: list[Case]
    n_cases: int
    n_mutated: int
    contract: OracleContract
    rec: Recording
    timeout: float

    def _over_contract(self, ref: ReferenceReplay, cands: list[tuple[list[Outcomes], float, bool]]) -> str | None:
        """The performance contract, on wall time the harness measured around
        each replay process (never on times the candidate's process reports).
        The reference's own case times are trusted (it is the task's code): the
        rest of its wall time is process start-up, which the candidate's wall
        time is relieved of before the comparison."""
        work = sum(_case_time(ref.runs[0], case) for case in self.everything)
        startup = max(0.0, ref.per_order - work)
        slowest = min(wall for _, wall, _ in cands) - startup  # the faster order: slow means slow in both
        if slowest <= self.contract.max_slowdown * work + SLOWDOWN_GRACE_S:
            return None
        return (
            f"the candidate's calls took {slowest:.2f} s per replay (wall time measured by the harness, less "
            f"the reference's {startup:.2f} s of process start-up), more than {self.contract.max_slowdown:g}x "
            f"the reference's {work:.3f} s"
        )

    def __call__(self, ref: ReferenceReplay, cands: list[tuple[list[Outcomes], float, bool]]) -> OracleResult:
        head, counts = self.head, dict(self.counts)
        limit = _time_limit(self.timeout, ref.per_order)
        if any(timed_out or wall > limit for _, wall, timed_out in cands):
            return OracleResult("fail", f"{head}; the candidate exceeded the replay time limit of {limit:.1f} s "
                                        f"(reference: {ref.per_order:.2f} s per order)", counts)  # fmt: skip
        if self.contract.max_slowdown and (slow := self._over_contract(ref, cands)):
            return OracleResult("fail", f"{head}; performance contract: {slow}", counts)
        cmp = compare(self.everything, ref.runs, [got for (got,), _, _ in cands], self.contract, self.rec.steps)
        counts.update(
            replayed=cmp.compared,
            mutated=cmp.mutated_compared,
            unstable=cmp.unstable,
            mutated_dropped=cmp.mutated_dropped,
            context_dependent=cmp.context_dependent,
        )
        body = (f"{head}; {cmp.compared} calls replayed in {self.n_cases} tests, {cmp.mutated_compared} of them "
                f"on {self.n_mutated - cmp.mutated_dropped} mutated inputs, forward and reversed, "
                f"{CHUNK} cases per process; {cmp.unstable} non-deterministic on the reference not compared; "
                f"{cmp.context_dependent} replayed otherwise than under the tests (monkeypatches, state left by "
                f"other tests); slowest case {cmp.worst_slowdown:.1f}x the reference (as the replay processes report)"
                + ("; the reference's replay from the cache (shown deterministic)" if ref.cached else ""))  # fmt: skip
        if cmp.counterexample:
            return OracleResult("fail", f"{cmp.counterexample} [{body}]", counts)
        if cmp.compared == 0:
            return OracleResult("skipped", f"{body}: nothing compared", counts)
        return OracleResult("pass", f"all agree with the reference: {body}", counts, sorted(cmp.tests))
