"""Program-repair knowledge for the teacher: reading pytest output, localizing
faults from tracebacks, and candidate edits (inverse AST mutations).

Everything here is a pure function of text the agent saw through its tools;
nothing reads the task directory, hidden tests or the reference."""

from __future__ import annotations

import ast
import dataclasses
import math
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from touchstone.harness import is_test_file
from touchstone.tasks.mutate import OPERATORS, Edit, Operator, apply_edit, functions

# ---------------------------------------------------------------- pytest output

_EXIT_RE = re.compile(r"^exit code: (-?\d+)", re.M)
_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\n(?:(\s+)(\S.*)\n)?', re.M)
_SUMMARY_RE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - .*)?$", re.M)
_WHERE_RE = re.compile(r"where .*? = ([A-Za-z_][\w.]*)\(", re.M)
_CALL_RE = re.compile(r"([A-Za-z_][\w]*)\s*\(")
_PYTEST_HELPER_RE = re.compile(r"\bpytest\.\w+")  # pytest.raises(...) is not the library's `raises`
# An exception line of a traceback, or of pytest's short summary (`FAILED t.py::x - TypeError: ...`).
_EXC_RE = re.compile(r"(?:^| - )(\w*(?:Error|Exception)|StopIteration)\b", re.M)
_NOT_CALLEES = {
    "assert",
    "print",
    "len",
    "list",
    "dict",
    "set",
    "tuple",
    "str",
    "int",
    "float",
    "bool",
    "sorted",
    "range",
    "isinstance",
    "type",
    "repr",
    "abs",
    "min",
    "max",
    "sum",
    "any",
    "all",
    "zip",
    "map",
    "filter",
    "enumerate",
    "round",
    "if",
    "for",
    "while",
    "not",
    "and",
    "or",
    "in",
    "return",
    "lambda",
}


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
    n_bad: int | None = None  # failed + errors from pytest's final line; None if that line is missing
    errors: list[str] = field(default_factory=list)  # exception types raised, first seen first
    truncated: bool = False  # the tool cut the output: its tracebacks may be missing frames

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def improves_on(self, before: "TestRun") -> bool:
        """All pass, or strictly fewer failures (by pytest's own count) and none new."""
        if self.passed:
            return True
        if self.n_bad is None or before.n_bad is None:
            return False  # an output cut short proves nothing
        return self.n_bad < before.n_bad and self.failed <= before.failed

    @property
    def no_tests(self) -> bool:
        return self.exit_code == 5


def _workspace_rel(path: str) -> str | None:
    if path.startswith("/workspace/"):
        return path[len("/workspace/") :]
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
        n_bad=_count_bad(observation),
        errors=list(dict.fromkeys(_EXC_RE.findall(observation))),
        truncated="\n[... truncated " in observation,
    )


def _count_bad(observation: str) -> int | None:
    """failed + errors from the last line (`3 failed, 1 error, 9 passed in 0.1s`)."""
    lines = re.findall(r"^=*\s*(\d+ \w+(?:, \d+ \w+)*) in [\d.]+s\b.*$", observation, re.M)
    if not lines:
        return None
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (\w+)", lines[-1]))
    return counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)


def _names_from_test_id(node_id: str) -> list[str]:
    """`tests/test_x.py::TestY::test_foo_bar[...]` -> ["foo_bar", "foo"]: what a test is named after."""
    name = node_id.split("[", 1)[0].rsplit("::", 1)[-1].removeprefix("test_")
    parts = name.split("_")
    return [name] + ["_".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)] if "::" in node_id else []


def suspect_names(run: TestRun, statement: str) -> list[str]:
    """Function names worth locating, first seen first: called on failing test lines,
    reported by pytest's assertion rewriting, named in backticks by the statement
    (a bare name, or the name of a test), and named by the failing tests."""
    names: list[str] = []
    for frame in run.frames:
        if is_test_file(frame.path):
            names += _CALL_RE.findall(_PYTEST_HELPER_RE.sub("", frame.source))
    names += run.where_names
    for span in re.findall(r"`([^`\n]+)`", statement):
        if re.fullmatch(r"[A-Za-z_][\w.]*(\(\))?", span):
            names.append(span.removesuffix("()").rsplit(".", 1)[-1])
        names += _names_from_test_id(span)
    for failed in sorted(run.failed):
        names += _names_from_test_id(failed.split(" ", 1)[1])
    seen: dict[str, None] = {}
    for n in names:
        if n and n not in _NOT_CALLEES and not n.startswith("test"):
            seen.setdefault(n, None)
    return list(seen)


def failing_test_params(run: TestRun, limit: int = 4) -> list[str]:
    """Word-like parameters of the failing tests (`test_x[cow-kine]` -> cow, kine):
    data the library may register at import time, out of reach of any traceback."""
    words: dict[str, None] = {}
    for failed in sorted(run.failed):
        params = failed.partition("[")[2].rstrip("]")
        for word in re.split(r"[-\s]", params):
            if re.fullmatch(r"[A-Za-z_]\w{2,}", word):
                words.setdefault(word, None)
    return list(words)[:limit]


def find_literals_command(words: list[str]) -> str:
    """One grep for the words in the library's code."""
    patterns = " ".join(f"-e {shlex.quote(w)}" for w in words)
    return f"grep -rnwi --include='*.py' {_NOT_TESTS} {patterns} ."


MAX_LITERAL_HITS = 12  # more hits than this: the words are too common to point anywhere


def literal_callees(observation: str) -> list[str]:
    """Functions called on the lines `find_literals_command` found, first seen first."""
    lines = [m.group(4) for m in map(_GREP_LINE_RE.match, observation.splitlines()) if m and m.group(2) == ":"]
    if len(lines) > MAX_LITERAL_HITS:
        return []
    names = (n for line in lines for n in _CALL_RE.findall(line))
    return list(dict.fromkeys(n for n in names if n not in _NOT_CALLEES))


def first_failure_command(run: TestRun, base_command: str) -> str | None:
    """Re-run only the first failing test, when a long output hid its traceback
    or cut it short."""
    if (run.frames and not run.truncated) or not run.failed:
        return None
    node = sorted(run.failed)[0].split(" ", 1)[1]
    return f"{base_command} {shlex.quote(node)}"


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
    "swap_arguments": OPERATORS["swap_arguments"],
    "constant_step": _constant_step,
    "bool_op_swap": OPERATORS["bool_op_swap"],
    "negate_condition": OPERATORS["negate_condition"],
    "arith_swap": OPERATORS["arith_swap"],
    "arith_other": _arith_more,
    "shift_index": _shift_index,
}
_RANK = {name: i for i, name in enumerate(REPAIR_OPERATORS)}

# Edits to try first when the failure raised this exception: a TypeError or
# AttributeError is typically an argument of the wrong kind (swapped arguments,
# an operator on the wrong types), an IndexError an index one off.
ERROR_PRIORS: dict[str, tuple[str, ...]] = {
    "TypeError": ("swap_arguments", "arith_swap"),
    "AttributeError": ("swap_arguments",),
    "IndexError": ("shift_index", "drop_plus_minus_one", "constant_step"),
}


def preferred_operators(errors: list[str]) -> set[str]:
    return {op for e in errors for op in ERROR_PRIORS.get(e, ())}


@dataclass(frozen=True)
class EditCandidate:
    path: str
    qualname: str
    operator: str
    lineno: int
    source: str  # whole file after the edit
    rank: tuple = ()  # sort key within and across functions (smaller: try sooner)


def qualname_at(source: str, lineno: int) -> str | None:
    """Qualified name of the function whose definition spans `lineno`."""
    best = None
    for qualname, node in functions(ast.parse(source)):
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if start <= lineno <= (node.end_lineno or node.lineno):
            best = qualname
    return best


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


_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def trigrams(text: str) -> Counter:
    toks = _TOKEN_RE.findall(text)
    return Counter(zip(toks, toks[1:], toks[2:]))


def naturalness_gain(before: str, after: str, corpus: Counter) -> float:
    """How much more the changed lines look like the rest of the code after the edit:
    an injected bug tends to be the odd one out among similar lines (`insert(x, 0)`
    among many `insert(0, x)`, `s[2:]` among many `s[1:]`). `corpus` counts the
    trigrams of the code read so far, the changed lines included."""
    a, b = before.splitlines(True), after.splitlines(True)
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < min(len(a), len(b)) - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    old, new = trigrams("".join(a[pre : len(a) - suf])), trigrams("".join(b[pre : len(b) - suf]))

    def familiarity(grams: Counter) -> float:
        return sum(n * math.log1p(max(corpus[g] - old[g], 0)) for g, n in grams.items())

    return familiarity(new) - familiarity(old)


def edit_candidates(
    source: str,
    path: str,
    qualname: str,
    hot_lines: set[int],
    preferred: set[str] = frozenset(),
    corpus: Counter | None = None,
) -> list[EditCandidate]:
    """Single-edit repairs of one function, lines implicated by a traceback first,
    then by distance to them, then edits that make the code more like the rest of
    `corpus`, then operators the exception points to, then by operator plausibility."""
    tree = ast.parse(source)
    func = dict(functions(tree)).get(qualname)
    if func is None:
        return []
    found: dict[str, EditCandidate] = {}
    for parent, field_name, index, node in _sites(func):
        if parent is func and field_name != "body":
            continue  # decorators, annotations: not where a behavioural bug lives
        for name, op in REPAIR_OPERATORS.items():
            for new in op(parent, field_name, index, node):
                text = apply_edit(source, tree, Edit(parent, field_name, index, node, new))
                if text is not None and text != source and text not in found:
                    found[text] = EditCandidate(path, qualname, name, node.lineno, text)

    corpus = corpus if corpus is not None else trigrams(source)

    def ranked(c: EditCandidate) -> EditCandidate:
        distance = min((abs(c.lineno - h) for h in hot_lines), default=0)
        gain = naturalness_gain(source, c.source, corpus)
        key = (distance, -round(gain, 1) if gain > 0 else 0.0, c.operator not in preferred, _RANK[c.operator], c.lineno)
        return dataclasses.replace(c, rank=key)

    return sorted(map(ranked, found.values()), key=lambda c: c.rank)


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


# ---------------------------------------------------------------- reading big files by function

CONTEXT_LINES = 60  # lines shown after each `def` hit: most functions fit
# The library's code only: test helpers share names with it and crowd it out of the output.
_NOT_TESTS = (
    "--exclude-dir=tests --exclude-dir=test --exclude-dir=testing --exclude='test_*.py' "
    "--exclude='*_test.py' --exclude=conftest.py"
)


def find_functions_command(names: list[str]) -> str:
    """One grep that shows every definition of `names` with the lines after it."""
    pattern = "|".join(re.escape(n) for n in names)
    return (
        f"grep -rn -A {CONTEXT_LINES} --include='*.py' {_NOT_TESTS} "
        f"-E '^[[:space:]]*(async[[:space:]]+)?def ({pattern})\\b' ."
    )


_GREP_LINE_RE = re.compile(r"^(?:\./)?(.+?\.py)([:-])(\d+)[:-](.*)$")


def parse_function_hits(observation: str) -> list["Window"]:
    """Function windows from `grep -n -A` output: each `def` hit and the lines after
    it, up to the first line indented no deeper than the def (or the context's end).
    Test files are skipped; a window cut by truncation simply fails to parse later."""
    windows: list[Window] = []
    current: tuple[str, int, int, list[str]] | None = None  # path, start, indent, lines

    def close() -> None:
        if current and not is_test_file(current[0]):
            windows.append(Window(current[0], current[1], trim_window("".join(current[3]))))

    for raw in observation.splitlines():
        m = _GREP_LINE_RE.match(raw)
        if m is None:
            close()
            current = None
            continue
        path, sep, line, text = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        indent = len(text) - len(text.lstrip())
        if sep == ":":  # a def line: starts a window (a nested def stays inside its parent)
            if current and current[0] == path and indent > current[2] and line == current[1] + len(current[3]):
                current[3].append(text + "\n")
                continue
            close()
            current = (path, line, indent, [text + "\n"])
        elif current and current[0] == path and line == current[1] + len(current[3]):
            if text.strip() and indent <= current[2] and not text.lstrip().startswith("#"):
                close()  # the function ended
                current = None
            else:
                current[3].append(text + "\n")
    close()
    return windows


@dataclass(frozen=True)
class Window:
    """Lines `start`.. of a file as the agent read them, and the same text
    dedented into a parseable module (a method becomes a top-level function)."""

    path: str
    start: int
    text: str

    @property
    def prefix(self) -> str:
        indents = [line[: len(line) - len(line.lstrip())] for line in self.text.splitlines() if line.strip()]
        return os.path.commonprefix(indents) if indents else ""

    @property
    def module(self) -> str:
        n = len(self.prefix)
        return "".join(line[n:] if line.strip() else line.lstrip(" \t") for line in self.text.splitlines(True))

    def reindent(self, module: str) -> str | None:
        """Window text for an edited `module`; unchanged lines keep their exact bytes."""
        old, new = self.module.splitlines(True), module.splitlines(True)
        if len(old) != len(new):
            return None
        orig = self.text.splitlines(True)
        return "".join(o if a == b else (self.prefix + b if b.strip() else b) for o, a, b in zip(orig, old, new))


def trim_window(text: str) -> str:
    """Drop trailing blank, comment and decorator lines (they belong to what follows)."""
    lines = text.splitlines(True)
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith(("#", "@"))):
        lines.pop()
    return "".join(lines)


def called_names(module: str, qualname: str) -> list[str]:
    """Names of everything `qualname` calls (plain names and attributes), first seen first."""
    node = dict(functions(ast.parse(module))).get(qualname)
    out: dict[str, None] = {}
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Call):
            name = sub.func.id if isinstance(sub.func, ast.Name) else getattr(sub.func, "attr", None)
            if name and name not in _NOT_CALLEES:
                out.setdefault(name, None)
    return list(out)
