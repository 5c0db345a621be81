"""Reading the library's code the way the teacher sees it: one grep that shows
the definitions of named functions (with the lines after each), windows of
those functions parsed back into modules, and the names functions call.

Pure functions of tool output; nothing reads the task directory."""

from __future__ import annotations

import ast
import os
import re
import shlex
from dataclasses import dataclass

from touchstone.harness import TEST_DIRS, TEST_MODULE_PATTERNS, is_test_file
from touchstone.tasks.mutate import functions
from touchstone import pyast

CALL_RE = re.compile(r"([A-Za-z_][\w]*)\s*\(")
# Builtins and keywords that look like calls: never a function worth reading.
NOT_CALLEES = {
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

CONTEXT_LINES = 60  # lines shown after each `def` hit: most functions fit
# The library's code only (grep's form of `is_test_file`): test helpers share
# names with it and crowd it out of the output.
_NOT_TESTS = " ".join(
    [*(f"--exclude-dir={d}" for d in sorted(TEST_DIRS)), *(f"--exclude='{p}'" for p in TEST_MODULE_PATTERNS)]
    + ["--exclude=conftest.py"]
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
    node = dict(functions(pyast.parse(module))).get(qualname)
    out: dict[str, None] = {}
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Call):
            name = sub.func.id if isinstance(sub.func, ast.Name) else getattr(sub.func, "attr", None)
            if name and name not in NOT_CALLEES:
                out.setdefault(name, None)
    return list(out)


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
    names = (n for line in lines for n in CALL_RE.findall(line))
    return list(dict.fromkeys(n for n in names if n not in NOT_CALLEES))


def qualname_at(source: str, lineno: int) -> str | None:
    """Qualified name of the function whose definition spans `lineno`."""
    best = None
    for qualname, node in functions(pyast.parse(source)):
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if start <= lineno <= (node.end_lineno or node.lineno):
            best = qualname
    return best
