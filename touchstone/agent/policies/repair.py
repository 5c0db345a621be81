"""Program-repair knowledge for the teacher: reading pytest output, localizing
faults from tracebacks, and candidate edits (inverse AST mutations).

Everything here is a pure function of text the agent saw through its tools;
nothing reads the task directory, hidden tests or the reference."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from touchstone.tasks.mutate import OPERATORS, Edit, Operator, apply_edit, functions

# ---------------------------------------------------------------- pytest output

_EXIT_RE = re.compile(r"^exit code: (-?\d+)", re.M)
_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\n(?:(\s+)(\S.*)\n)?', re.M)
_SUMMARY_RE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - .*)?$", re.M)
_WHERE_RE = re.compile(r"where .*? = ([A-Za-z_][\w.]*)\(", re.M)
_CALL_RE = re.compile(r"([A-Za-z_][\w]*)\s*\(")
_NOT_CALLEES = {"assert", "print", "len", "list", "dict", "set", "tuple", "str", "int", "float", "bool",
                "sorted", "range", "isinstance", "raises", "approx", "type", "repr", "abs", "min", "max",
                "sum", "any", "all", "zip", "map", "filter", "enumerate", "round", "if", "for", "while",
                "not", "and", "or", "in", "return", "lambda"}


@dataclass(frozen=True)
class Frame:
    path: str  # workspace-relative
    line: int
    func: str
    source: str  # the source line pytest printed, may be empty


@dataclass
class TestRun:
    exit_code: int | None
    failed: frozenset[str]
    frames: list[Frame] = field(default_factory=list)  # in traceback order (outermost first)
    where_names: list[str] = field(default_factory=list)  # from pytest's assertion rewriting

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def no_tests(self) -> bool:
        return self.exit_code == 5


def is_test_path(path: str) -> bool:
    p = PurePosixPath(path)
    return (
        any(part in ("tests", "test", "testing") for part in p.parts[:-1])
        or p.name.startswith("test_")
        or p.name.endswith("_test.py")
        or p.name == "conftest.py"
    )


def _workspace_rel(path: str) -> str | None:
    if path.startswith("/workspace/"):
        return path[len("/workspace/"):]
    if path.startswith("/") or path.startswith(".."):
        return None  # the interpreter, site-packages: not ours to fix
    return path.removeprefix("./")


def parse_test_run(observation: str) -> TestRun:
    """Read a bash observation of a `pytest --tb=native` run."""
    m = _EXIT_RE.search(observation)
    frames = []
    for fm in _FRAME_RE.finditer(observation):
        rel = _workspace_rel(fm.group(1))
        if rel is not None and rel.endswith(".py"):
            frames.append(Frame(rel, int(fm.group(2)), fm.group(3), (fm.group(5) or "").strip()))
    return TestRun(
        exit_code=int(m.group(1)) if m else None,
        failed=frozenset(f"{kind} {node}" for kind, node in _SUMMARY_RE.findall(observation)),
        frames=frames,
        where_names=[n.rsplit(".", 1)[-1] for n in _WHERE_RE.findall(observation)],
    )


def suspect_names(run: TestRun, statement: str) -> list[str]:
    """Function names worth locating: named in backticks by the statement, called on
    failing test lines, or reported by pytest's assertion rewriting; first seen first."""
    names: list[str] = []
    for span in re.findall(r"`([^`\n]+)`", statement):
        names += [part for part in re.findall(r"[A-Za-z_]\w*", span)]
    for frame in run.frames:
        if is_test_path(frame.path):
            names += _CALL_RE.findall(frame.source)
    names += run.where_names
    seen: dict[str, None] = {}
    for n in names:
        if n not in _NOT_CALLEES and not n.startswith("test"):
            seen.setdefault(n, None)
    return list(seen)


def parse_grep_defs(observation: str) -> list[tuple[str, int]]:
    """(path, line) of `grep -rn` hits on `def NAME` lines, outside test files."""
    hits = []
    for m in re.finditer(r"^(?:\./)?([^:\n]+\.py):(\d+):", observation, re.M):
        if not is_test_path(m.group(1)):
            hits.append((m.group(1), int(m.group(2))))
    return hits


# ---------------------------------------------------------------- candidate edits


def _int(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _drop_one(parent, field_name, index, node) -> Iterator[ast.AST]:
    """`x + 1` / `x - 1` -> `x`: the commonest off-by-one fix."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and _int(node.right) == 1:
        yield node.left


def _shift_index(parent, field_name, index, node) -> Iterator[ast.AST]:
    """An index, slice bound or range() argument moved by one."""
    in_range = isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "range"
    in_slice = isinstance(parent, ast.Slice) and field_name in ("lower", "upper")
    in_index = isinstance(parent, ast.Subscript) and field_name == "slice" and not isinstance(node, ast.Slice)
    if isinstance(node, ast.expr) and (in_range or in_slice or in_index) and not isinstance(node, ast.Tuple):
        for op in (ast.Sub(), ast.Add()):
            yield ast.BinOp(node, op, ast.Constant(1))


def _constant_step(parent, field_name, index, node) -> Iterator[ast.AST]:
    """Numeric literals one step off, booleans flipped."""
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield ast.Constant(not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        for delta in (-1, 1):
            if node.value + delta >= 0:
                yield ast.Constant(node.value + delta)


_MORE_ARITH = {ast.Mult: (ast.Div, ast.Pow, ast.Add), ast.FloorDiv: (ast.Mod, ast.Div), ast.Div: (ast.FloorDiv,)}


def _arith_more(parent, field_name, index, node) -> Iterator[ast.AST]:
    if isinstance(node, ast.BinOp):
        for op in _MORE_ARITH.get(type(node.op), ()):
            yield ast.BinOp(node.left, op(), node.right)


# Edits tried by the teacher, most plausible first for a given site. The
# mutation operators that are their own inverse are reused from the proposer's
# library; the others get an inverse here.
REPAIR_OPERATORS: dict[str, Operator] = {
    "comparison_boundary": OPERATORS["comparison_boundary"],
    "drop_plus_minus_one": _drop_one,
    "comparison_flip": OPERATORS["comparison_flip"],
    "bool_op_swap": OPERATORS["bool_op_swap"],
    "negate_condition": OPERATORS["negate_condition"],
    "arith_swap": OPERATORS["arith_swap"],
    "arith_other": _arith_more,
    "shift_index": _shift_index,
    "constant_step": _constant_step,
    "swap_arguments": OPERATORS["swap_arguments"],
}
_RANK = {name: i for i, name in enumerate(REPAIR_OPERATORS)}


@dataclass(frozen=True)
class Candidate:
    path: str
    qualname: str
    operator: str
    lineno: int
    source: str  # whole file after the edit


def qualname_at(source: str, lineno: int) -> str | None:
    """Qualified name of the function whose definition spans `lineno`."""
    best = None
    for qualname, node in functions(ast.parse(source)):
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if start <= lineno <= (node.end_lineno or node.lineno):
            best = qualname
    return best


def callees(source: str, qualname: str) -> list[str]:
    """Functions of the same file called by `qualname` (helpers may hold the bug)."""
    defs = dict(functions(ast.parse(source)))
    node = defs.get(qualname)
    if node is None:
        return []
    short = {q.rsplit(".", 1)[-1]: q for q in defs}
    out: dict[str, None] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = sub.func.id if isinstance(sub.func, ast.Name) else getattr(sub.func, "attr", None)
            if name in short and short[name] != qualname:
                out.setdefault(short[name], None)
    return list(out)


def _sites(func: ast.AST) -> Iterator[tuple[ast.AST, str, int | None, ast.AST]]:
    """(parent, field, index, node) for every node inside a function's body."""
    stack = [func]
    while stack:
        parent = stack.pop()
        for name, value in ast.iter_fields(parent):
            items = value if isinstance(value, list) else [value]
            for i, node in enumerate(items):
                if isinstance(node, ast.AST) and not isinstance(node, (ast.JoinedStr, ast.arguments)):
                    yield parent, name, i if isinstance(value, list) else None, node
                    stack.append(node)


def candidates(source: str, path: str, qualname: str, hot_lines: set[int]) -> list[Candidate]:
    """Single-edit repairs of one function, lines implicated by a traceback first,
    then by distance to them, then by operator plausibility."""
    tree = ast.parse(source)
    func = dict(functions(tree)).get(qualname)
    if func is None:
        return []
    found: dict[str, Candidate] = {}
    for parent, field_name, index, node in _sites(func):
        if parent is func and field_name != "body":
            continue  # decorators, annotations: not where a behavioural bug lives
        for name, op in REPAIR_OPERATORS.items():
            for new in op(parent, field_name, index, node):
                text = apply_edit(source, tree, Edit(parent, field_name, index, node, new))
                if text is not None and text != source and text not in found:
                    found[text] = Candidate(path, qualname, name, node.lineno, text)

    def rank(c: Candidate) -> tuple[int, int, int]:
        distance = min((abs(c.lineno - h) for h in hot_lines), default=0)
        return (distance, _RANK[c.operator], c.lineno)

    return sorted(found.values(), key=rank)


def line_edit(current: str, target: str) -> tuple[str, str]:
    """(old, new) for one `str_replace` turning `current` into `target`: the
    differing lines, widened by whole lines until `old` occurs exactly once."""
    a, b = current.splitlines(keepends=True), target.splitlines(keepends=True)
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < min(len(a), len(b)) - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    lo, hi_a, hi_b = pre, len(a) - suf, len(b) - suf
    while True:
        old = "".join(a[lo:hi_a])
        if old and current.count(old) == 1:
            return old, "".join(b[lo:hi_b])
        if lo == 0 and hi_a == len(a):
            return current, target  # whole file; str_replace still applies
        if lo > 0:
            lo -= 1
        if hi_a < len(a):
            hi_a += 1
            hi_b += 1
