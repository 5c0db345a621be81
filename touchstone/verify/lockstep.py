"""Lockstep differential oracle: everything the hidden tests observe of the
candidate, compared with what they observe of the reference.

The recorded-call oracle (`touchstone.verify.oracle`) replays the calls it can
rebuild; it is blind where tests pass callables, use test-defined objects or
only check a length. In an isolated run every value test code gets from the
candidate's process crosses one wire, so the judge logs each (the `Observer`
of `touchstone/harness/isolation/remote/judge.py`: the result of every call,
attribute read and operator, or what it raised, in the oracle's canonical
form). The same tests run isolated on the reference twice, under two seeds of
`random` and otherwise alike; per test, observation by observation, the
candidate's run 0 must agree with the reference's wherever the reference's two
runs agree (elsewhere the answer depends on the draw and is not compared), in
the task's declared semantics (`touchstone.verify.semantics`). Where the test
took another path on the candidate (another operation at the same step) the
comparison of that test stops there: the tests' own verdict already covers it.

A test whose assertion checks only `len(result) == 3` still observes
`result`: a candidate that returns three wrong items disagrees here. What a
test reads that candidate code produced besides values is observed too: the
captured output it reads (`capsys`/`capfd`), the files under its tmp_path it
opens or lists, and identity (a returned argument, an object handed out
twice). A run counts as oracle-guarded only when every required test had an
observation compared and nothing a test read went unobserved
(`touchstone.verify.report.derive_guard`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from touchstone import atomic, paths
from touchstone.harness import HiddenSuite
from touchstone.harness.isolation import runner
from touchstone.verify.semantics import agrees, normalize, same

OPAQUE = ["object", "", []]  # a candidate object with no plain view: the test inspects it further
REFERENCE_SEEDS = (0, 1)  # `random` in the reference's process; run 0 of the plan otherwise
Observations = dict[str, list]  # test node id -> [[op, canonical value], ...]


@dataclass
class LockstepResult:
    status: str  # pass / fail / skipped
    evidence: str
    counts: dict[str, int] = field(default_factory=dict)


def reference_key(suite: HiddenSuite, task_hash: str, backend: str) -> str:
    """The reference's observations depend on the task, its environment, the
    sandbox backend and the judge's own code."""
    h = hashlib.sha256(f"{task_hash}\0{suite.environment.digest if suite.environment else ''}\0{backend}".encode())
    h.update(json.dumps([suite.required, suite.inputs, suite.own_protocol]).encode())
    h.update(runner.judge_code_digest().encode())
    return h.hexdigest()[:32]


def observe_reference(
    suite: HiddenSuite, reference: Path, tmp: Path, backend: str, key: str | None
) -> tuple[list[Observations] | None, str]:
    """The reference's observations under each of REFERENCE_SEEDS (cached under
    `key` once both runs passed), or None and why not."""
    path = paths.cache() / "lockstep" / f"{key}.json" if key else None
    if path is not None and path.is_file():
        return json.loads(path.read_text()), "from the cache"
    runs = []
    for seed in REFERENCE_SEEDS:
        trees = suite.compose_isolated(tmp / f"lockstep-reference-{seed}", overlays=[reference])
        result = suite.run_isolated(trees, 0, backend=backend, observe=True, random_seed=seed)
        if result.status != "pass":
            return None, f"the reference does not pass isolated under seed {seed}: {result.evidence[:300]}"
        runs.append(result.observations)
    if path is not None:
        atomic.write_text(path, json.dumps(runs))
    return runs, "observed afresh"


def compare(
    references: list[Observations], candidates: list[Observations], contract, required: list[str] | None = None
) -> LockstepResult:
    """The candidate's run 0 against the reference's observations, test by
    test; with `random: "required"` declared, also whether the candidate's
    answers vary between its runs 0 and 1 (other seeds) where the reference's
    vary with the seed. Coverage, for the run's guard: `tests_uncovered`,
    the `required` tests (node ids or test functions; default: every test the
    reference ran) with no observation compared; `unobserved`, tests that read
    something of the candidate's the judge could not observe."""
    counts = {"observed": 0, "compared": 0, "random": 0, "diverged_tests": 0}
    first, second = (_observable(run) for run in references)
    candidate = _observable(candidates[0])
    unobserved = sorted(t for t in {*_unobserved(references[0]), *_unobserved(candidates[0])})
    if contract.random == "required" and len(candidates) > 1:
        ignored = ignores_the_draw(first, second, candidate, _observable(candidates[1]))
        if ignored:
            return LockstepResult("fail", ignored, counts)
    covered: set[str] = set()
    for test in sorted(set(first) | set(candidate)):
        want, again, got = first.get(test, []), second.get(test, []), candidate.get(test, [])
        counts["observed"] += len(got)
        for k, (w, g) in enumerate(zip(want, got)):
            if w[0] != g[0]:  # the test took another path: its own assertions decide from here
                counts["diverged_tests"] += 1
                break
            w_v = normalize(w[1], contract)
            if k >= len(again) or again[k][0] != w[0] or not same(w_v, normalize(again[k][1], contract), contract):
                counts["random"] += 1  # depends on the draw (or the run): not compared
                continue
            g_v = normalize(g[1], contract)
            if contract.iterables == "any" and OPAQUE in (w[1], g[1]) and w[1] != g[1]:
                counts["diverged_tests"] += 1  # an iterator where the other has items: the test reads it on
                break
            counts["compared"] += 1
            covered.add(_function(test))
            if not agrees(w_v, g_v, contract):
                where = test or "collection"
                return LockstepResult("fail", f"{where}: observation {k + 1} ({w[0]}): the reference gave "
                                              f"{json.dumps(w[1])[:200]}, the candidate {json.dumps(g[1])[:200]}",
                                      counts)  # fmt: skip
    tests = {_function(t) for t in (required if required is not None else [t for t in first if t])}
    counts["tests_uncovered"] = len(tests - covered)
    counts["unobserved"] = len(unobserved)
    summary = (f"{counts['compared']} of {counts['observed']} values the tests got compared with the reference's "
               f"({counts['random']} depend on the seed or run, not compared; {counts['diverged_tests']} tests took "
               f"another path, compared up to it); {counts['tests_uncovered']} of {len(tests)} tests with nothing "
               f"compared; {len(unobserved)} read what the judge cannot observe"
               f"{' (' + ', '.join(unobserved[:3]) + ')' if unobserved else ''}")  # fmt: skip
    if counts["compared"] == 0:
        return LockstepResult("skipped", f"nothing compared: {summary}", counts)
    return LockstepResult("pass", f"all agree: {summary}", counts)


def _function(test: str) -> str:
    """A test node id without its parameters: coverage is per test function."""
    return test.split("[", 1)[0]


def _observable(run: Observations) -> Observations:
    """A run's observations without its `unobserved` notes (counted apart, so
    a note on one side only never shifts the comparison of the rest)."""
    return {t: [o for o in obs if o[0] != "unobserved"] for t, obs in run.items()}


def _unobserved(run: Observations) -> list[str]:
    return [t for t, obs in run.items() if any(o[0] == "unobserved" for o in obs)]


def ignores_the_draw(ref0: Observations, ref1: Observations, cand0: Observations, cand1: Observations) -> str | None:
    """Where the reference's answers change with the seed of `random` and the
    statement asks for randomness (`random: "required"`), a candidate whose
    answers at those observations never change between its own two seeds
    ignores the draw (a deterministic "random" passes every property test)."""
    varying = varied = 0
    for test in ref0:
        for k, (a, b) in enumerate(zip(ref0[test], ref1.get(test, []))):
            c0, c1 = cand0.get(test, []), cand1.get(test, [])
            if a[0] != b[0] or a[1] == b[1] or k >= min(len(c0), len(c1)) or c0[k][0] != a[0] or c1[k][0] != a[0]:
                continue
            varying += 1
            varied += c0[k][1] != c1[k][1]
    if varying and not varied:
        return (
            f"the reference's answers change with the seed of `random` at {varying} observations; the "
            "candidate's never do (the statement asks for randomness)"
        )
    return None
