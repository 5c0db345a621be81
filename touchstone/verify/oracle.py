"""Differential oracle: candidate vs reference on the hidden tests' inputs
plus type-aware mutations of them (EvalPlus-style), each side in its own
process in its own sandbox, compared by canonical serialization.

Inputs come from the task's own (pristine) hidden test files: every call of an
entry point whose arguments are literals. The candidate runs twice, in forward
and reversed call order, so call-counter tricks that satisfy a fixed sequence
show up. A mutated input on which the reference raises is dropped (it is
outside the function's domain); on original inputs the exception type itself
must match.
"""

from __future__ import annotations

import ast
import json
import random
import shlex
from dataclasses import dataclass
from pathlib import Path

MAX_CASES = 60


@dataclass(frozen=True)
class Case:
    module: str
    function: str
    args: tuple
    kwargs: tuple  # sorted (name, value) pairs, hashable
    mutated: bool = False

    def encode(self, i: int) -> dict:
        return {
            "i": i,
            "module": self.module,
            "function": self.function,
            "args": encode(list(self.args)),
            "kwargs": {k: encode(v) for k, v in self.kwargs},
        }

    def describe(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{self.module}.{self.function}({', '.join(parts)})"[:300]


def encode(v):
    """Python literal -> tagged JSON understood by the runner's `decode`."""
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return {"__t": "float", "v": repr(v)}
    if isinstance(v, bytes):
        return {"__t": "bytes", "v": v.hex()}
    if isinstance(v, list):
        return [encode(e) for e in v]
    if isinstance(v, (tuple, set, frozenset)):
        items = sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v
        return {"__t": type(v).__name__, "v": [encode(e) for e in items]}
    if isinstance(v, dict):
        return {"__t": "dict", "v": [[encode(k), encode(x)] for k, x in v.items()]}
    raise TypeError(f"cannot encode {type(v).__name__}")


def _literal(node: ast.AST):
    return ast.literal_eval(node)


def extract_cases(test_sources: dict[str, str], entry_points: list[tuple[str, str]]) -> list[Case]:
    """Literal-argument calls of the entry points found in the test files."""
    by_name = {fn.split(".")[-1]: (mod, fn) for mod, fn in entry_points if "." not in fn}
    cases: list[Case] = []
    for path in sorted(test_sources):
        try:
            tree = ast.parse(test_sources[path])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name not in by_name or any(isinstance(a, ast.Starred) for a in node.args):
                continue
            try:
                args = tuple(_literal(a) for a in node.args)
                kwargs = tuple(sorted((k.arg, _literal(k.value)) for k in node.keywords if k.arg))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if len(kwargs) != len(node.keywords):
                continue
            case = Case(*by_name[name], args, kwargs)
            if case not in cases:
                cases.append(case)
    return cases


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
    if isinstance(v, (list, tuple)):
        seq = list(v)
        out = [seq[::-1], seq[1:], seq + seq[:1], sorted(seq, key=repr)]
        if seq:
            i = rng.randrange(len(seq))
            for m in _mutations(seq[i], rng)[:2]:
                out.append(seq[:i] + [m] + seq[i + 1:])
        return [type(v)(x) for x in out]
    if isinstance(v, dict) and v:
        k = next(iter(v))
        return [{kk: vv for kk, vv in v.items() if kk != k}]
    return []


def mutate_cases(cases: list[Case], seed: int = 0, limit: int = MAX_CASES) -> list[Case]:
    """Originals first, then mutations of one argument at a time, deduplicated."""
    rng = random.Random(seed)
    out = list(cases)
    seen = {(c.module, c.function, repr(c.args), repr(c.kwargs)) for c in cases}
    for case in cases:
        for i, arg in enumerate(case.args):
            for m in _mutations(arg, rng):
                new = Case(case.module, case.function, case.args[:i] + (m,) + case.args[i + 1:], case.kwargs, True)
                key = (new.module, new.function, repr(new.args), repr(new.kwargs))
                if key not in seen and len(out) < limit:
                    seen.add(key)
                    out.append(new)
    return out


def read_results(path: Path, n: int) -> dict[int, dict]:
    results: dict[int, dict] = {}
    if not path.is_file():
        return results
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("i"), int) and 0 <= rec["i"] < n:
            results.setdefault(rec["i"], rec)
    return results


def _outcome(rec: dict | None) -> str:
    if rec is None:
        return "no result (process died or timed out)"
    if "raised" in rec:
        return f"raised {rec['raised']}"
    return json.dumps([rec.get("result"), rec.get("args_after")])[:300]


def compare(cases: list[Case], reference: dict[int, dict], candidate_runs: list[dict[int, dict]]) -> tuple[int, str | None]:
    """(number of cases compared, first counterexample or None)."""
    compared = 0
    for i, case in enumerate(cases):
        ref = reference.get(i)
        if ref is None or (case.mutated and "raised" in ref):
            continue  # outside the reference's domain
        compared += 1
        want = ("raised", ref["raised"]) if "raised" in ref else (ref.get("result"), ref.get("args_after"))
        for order, run in zip(("forward", "reverse"), candidate_runs):
            got_rec = run.get(i)
            got = None
            if got_rec is not None:
                got = ("raised", got_rec["raised"]) if "raised" in got_rec else (got_rec.get("result"), got_rec.get("args_after"))
            if got != want:
                kind = "generated input" if case.mutated else "hidden-test input"
                return compared, (
                    f"{kind} {case.describe()} ({order} order): reference {_outcome(ref)}, "
                    f"candidate {_outcome(got_rec)}"
                )
    return compared, None


def _run_side(tree: Path, cases: list[dict], *, backend: str, timeout: float) -> tuple[dict[int, dict], float, bool]:
    """Run the oracle runner over `tree` in its own fresh sandbox.
    Returns (results by case index, wall seconds, timed out)."""
    from touchstone.sandbox import Limits, open_sandbox
    from touchstone.verify.grading import harness_mounts

    with harness_mounts(("oracle_runner.py", "or_{nonce}.py")) as (h_dir, o_dir, mounts, out, nonce):
        (out / "cases.json").write_text(json.dumps(cases))
        command = shlex.join([
            "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "PYTHONHASHSEED=0",
            "PYTHONDONTWRITEBYTECODE=1", "python3", "-s", f"{h_dir}/or_{nonce}.py",
            "/workspace", f"{o_dir}/cases.json", f"{o_dir}/results.jsonl",
        ])  # fmt: skip
        with open_sandbox(tree, backend=backend, mounts=mounts, limits=Limits(timeout_s=timeout + 30)) as sb:
            res = sb.exec(command, timeout=timeout)
        return read_results(out / "results.jsonl", len(cases)), res.wall_s, res.timed_out


def run_oracle(
    candidate_tree: Path, reference_tree: Path, cases: list[Case], *, backend: str = "auto", timeout: float = 60.0
) -> tuple[str, str]:
    """(status, evidence) of the differential check. The reference runs first
    in its own sandbox; the candidate then runs twice (forward, reversed
    order) in two more, with a time limit scaled to the reference's."""
    encoded = [c.encode(i) for i, c in enumerate(cases)]
    reference, ref_wall, ref_timeout = _run_side(reference_tree, encoded, backend=backend, timeout=timeout)
    if ref_timeout or not reference:
        return "error", f"the reference produced no oracle results (timed out: {ref_timeout})"
    limit = min(timeout, max(30.0, 10 * ref_wall + 10))  # generous: a loaded machine is not a slow solution
    runs = []
    for order in (encoded, encoded[::-1]):
        got, _, timed_out = _run_side(candidate_tree, order, backend=backend, timeout=limit)
        if timed_out:
            return "fail", f"candidate exceeded the oracle time limit of {limit:.1f} s (reference: {ref_wall:.2f} s)"
        runs.append(got)
    compared, counterexample = compare(cases, reference, runs)
    if counterexample:
        return "fail", counterexample
    n_gen = sum(1 for i, c in enumerate(cases) if c.mutated and i in reference and "raised" not in reference[i])
    return "pass", f"{compared} inputs agree with the reference ({n_gen} generated), in both call orders"
