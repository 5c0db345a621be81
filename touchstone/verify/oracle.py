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
import itertools
import json
import math
import random
import shlex
from dataclasses import dataclass
from pathlib import Path

from touchstone.sandbox.environment import Environment

MAX_CASES = 120


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


_LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)
MAX_BINDINGS = 200  # rows of parameters considered per test function


def _value(node: ast.AST, env: dict):
    """A literal, or a name bound by parametrize / a literal for-loop."""
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    return ast.literal_eval(node)


def _unpack(names: list[str], value) -> dict | None:
    if len(names) == 1:
        return {names[0]: value}
    if isinstance(value, (tuple, list)) and len(value) == len(names):
        return dict(zip(names, value))
    return None


def _rows(names: list[str], values: ast.AST, consts: dict[str, object]) -> list[dict]:
    """Bindings from a literal list of values, or from a module-level constant
    holding one (`@pytest.mark.parametrize("a, b", CASES)`); items that are
    not literals (`pytest.param(...)`) are skipped."""
    if isinstance(values, ast.Name) and isinstance(consts.get(values.id), (list, tuple)):
        items = [_unpack(names, v) for v in consts[values.id]]
        return [row for row in items if row is not None]
    if not isinstance(values, (ast.List, ast.Tuple)):
        return []
    rows = []
    for elt in values.elts:
        try:
            row = _unpack(names, ast.literal_eval(elt))
        except _LITERAL_ERRORS:
            continue
        if row is not None:
            rows.append(row)
    return rows


def _parametrize_rows(fn: ast.FunctionDef, consts: dict[str, object]) -> list[dict]:
    rows: list[dict] = [{}]
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("parametrize") and len(dec.args) >= 2):
            continue
        try:
            names = ast.literal_eval(dec.args[0])
        except _LITERAL_ERRORS:
            continue
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        new = _rows(names, dec.args[1], consts)
        rows = [{**r, **n} for r in rows for n in new][:MAX_BINDINGS]
    return rows


def _module_constants(tree: ast.Module) -> dict[str, object]:
    """Module-level `NAME = <literal>` assignments of a test file."""
    consts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except _LITERAL_ERRORS:
                continue
    return consts


def _loop_rows(loop: ast.For, consts: dict[str, object]) -> list[dict] | None:
    names = [loop.target.id] if isinstance(loop.target, ast.Name) else (
        [e.id for e in loop.target.elts] if isinstance(loop.target, ast.Tuple)
        and all(isinstance(e, ast.Name) for e in loop.target.elts) else None)  # fmt: skip
    return _rows(names, loop.iter, consts) if names else None


class _CallFinder(ast.NodeVisitor):
    """Entry-point calls whose arguments are literals or names bound by the
    enclosing test's parametrize decorators or literal for-loops."""

    def __init__(self, by_name: dict[str, tuple[str, str]]):
        self.by_name, self.envs, self.cases, self.consts = by_name, [{}], [], {}

    def visit_Module(self, node: ast.Module) -> None:
        self.consts = _module_constants(node)
        self.generic_visit(node)

    def _with(self, rows: list[dict], body: list[ast.AST]) -> None:
        saved = self.envs
        self.envs = [{**e, **r} for e in saved for r in rows][:MAX_BINDINGS] or saved
        for stmt in body:
            self.visit(stmt)
        self.envs = saved

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._with(_parametrize_rows(node, self.consts), node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._with(_loop_rows(node, self.consts) or [{}], node.body)

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name in self.by_name and not any(isinstance(a, ast.Starred) for a in node.args) and all(
            k.arg for k in node.keywords
        ):
            for env in self.envs:
                try:
                    args = tuple(_value(a, env) for a in node.args)
                    kwargs = tuple(sorted((k.arg, _value(k.value, env)) for k in node.keywords))
                except _LITERAL_ERRORS:
                    continue
                case = Case(*self.by_name[name], args, kwargs)
                if case not in self.cases:
                    self.cases.append(case)
        self.generic_visit(node)


def extract_cases(test_sources: dict[str, str], entry_points: list[tuple[str, str]]) -> list[Case]:
    """Entry-point calls in the (pristine) test files whose arguments are
    literals, or names bound to literals by `@pytest.mark.parametrize` or a
    `for` loop over a literal list."""
    finder = _CallFinder({fn: (mod, fn) for mod, fn in entry_points if "." not in fn})
    for path in sorted(test_sources):
        try:
            finder.visit(ast.parse(test_sources[path]))
        except SyntaxError:
            continue
    return finder.cases


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
    """Originals first, then mutations of one argument at a time, taken
    round-robin over the originals (every function gets some), deduplicated."""
    rng = random.Random(seed)
    per_case = []
    for case in cases:
        variants = []
        for i, arg in enumerate(case.args):
            for m in _mutations(arg, rng):
                variants.append(Case(case.module, case.function, case.args[:i] + (m,) + case.args[i + 1:], case.kwargs, True))
        per_case.append(variants)
    out = list(cases)
    seen = {_key(c) for c in cases}
    for group in itertools.zip_longest(*per_case):
        for new in group:
            if new is not None and _key(new) not in seen and len(out) < limit:
                seen.add(_key(new))
                out.append(new)
    return out


def _key(c: Case) -> tuple:
    return (c.module, c.function, repr(c.args), repr(c.kwargs))


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


FLOAT_REL_TOL, FLOAT_ABS_TOL = 1e-9, 1e-12


def same(a, b) -> bool:
    """Canonical forms equal, exact in types and structure; floats within a
    tiny tolerance (summation order is not a wrong answer); NaN equals only NaN."""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) == len(b) == 2 and a[0] == b[0] == "float" and isinstance(a[1], str) and isinstance(b[1], str):
            x, y = float(a[1]), float(b[1])
            if math.isnan(x) or math.isnan(y):
                return math.isnan(x) and math.isnan(y)
            return math.isclose(x, y, rel_tol=FLOAT_REL_TOL, abs_tol=FLOAT_ABS_TOL)
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _observed(rec: dict | None) -> list | None:
    if rec is None:
        return None
    return ["raised", rec["raised"]] if "raised" in rec else [rec.get("result"), rec.get("args_after")]


def compare(cases: list[Case], reference: dict[int, dict], candidate_runs: list[dict[int, dict]]) -> tuple[int, str | None]:
    """(number of cases compared, first counterexample or None)."""
    compared = 0
    for i, case in enumerate(cases):
        ref = reference.get(i)
        if ref is None or (case.mutated and "raised" in ref):
            continue  # outside the reference's domain
        compared += 1
        for order, run in zip(("forward", "reverse"), candidate_runs):
            if not same(_observed(run.get(i)), _observed(ref)):
                kind = "generated input" if case.mutated else "hidden-test input"
                return compared, (
                    f"{kind} {case.describe()} ({order} order): reference {_outcome(ref)}, "
                    f"candidate {_outcome(run.get(i))}"
                )
    return compared, None


def _run_side(tree: Path, cases: list[dict], *, backend: str, timeout: float,
               environment: Environment | None = None) -> tuple[dict[int, dict], float, bool]:
    """Run the oracle runner over `tree` in its own fresh sandbox.
    Returns (results by case index, wall seconds, timed out)."""
    from touchstone.sandbox import Limits, open_sandbox
    from touchstone.harness import harness_mounts

    with harness_mounts(("oracle_runner.py", "or_{nonce}.py")) as (h_dir, o_dir, mounts, out, nonce):
        (out / "cases.json").write_text(json.dumps(cases))
        command = shlex.join([
            "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "PYTHONHASHSEED=0",
            "PYTHONDONTWRITEBYTECODE=1", "python3", "-s", f"{h_dir}/or_{nonce}.py",
            "/workspace", f"{o_dir}/cases.json", f"{o_dir}/results.jsonl",
        ])  # fmt: skip
        with open_sandbox(tree, backend=backend, mounts=mounts, limits=Limits(timeout_s=timeout + 30),
                          environment=environment) as sb:
            res = sb.exec(command, timeout=timeout)
        return read_results(out / "results.jsonl", len(cases)), res.wall_s, res.timed_out


def run_oracle(
    candidate_tree: Path, reference_tree: Path, cases: list[Case], *, backend: str = "auto", timeout: float = 60.0,
    environment: Environment | None = None,
) -> tuple[str, str]:
    """(status, evidence) of the differential check. The reference runs first
    in its own sandbox; the candidate then runs twice (forward, reversed
    order) in two more, with a time limit scaled to the reference's."""
    encoded = [c.encode(i) for i, c in enumerate(cases)]
    reference, ref_wall, ref_timeout = _run_side(reference_tree, encoded, backend=backend, timeout=timeout,
                                                 environment=environment)
    if ref_timeout or not reference:
        return "error", f"the reference produced no oracle results (timed out: {ref_timeout})"
    limit = min(timeout, max(30.0, 10 * ref_wall + 10))  # generous: a loaded machine is not a slow solution
    runs = []
    for order in (encoded, encoded[::-1]):
        got, _, timed_out = _run_side(candidate_tree, order, backend=backend, timeout=limit, environment=environment)
        if timed_out:
            return "fail", f"candidate exceeded the oracle time limit of {limit:.1f} s (reference: {ref_wall:.2f} s)"
        runs.append(got)
    compared, counterexample = compare(cases, reference, runs)
    if counterexample:
        return "fail", counterexample
    n_gen = sum(1 for i, c in enumerate(cases) if c.mutated and i in reference and "raised" not in reference[i])
    return "pass", f"{compared} inputs agree with the reference ({n_gen} generated), in both call orders"
