"""The input domain of a task's calls, for the oracle's generated inputs.

The oracle replays the hidden tests' calls, then calls with one argument
changed (`oracle.mutate_cases`) to catch solutions that special-case the
tests' inputs. A changed input the reference merely *tolerates* is not a
question the task asks: `fib(-1) == 0` on a reference that never validates
rejects an honest `fib` that raises on negative input. So a generated value
must lie inside the domain, as far as the task tells it:

- the statement's stated bounds on a parameter, by name (`0 <= n <= 90`,
  `n < 10**6`, `1 ≤ len(xs) ≤ 100`, "`k` is between 1 and 9"), for the
  functions whose parameters the reference names;
- what the tests themselves pass at that argument: its sign (no negative
  number where every one is >= 0, no zero where every one is > 0), no empty
  text or sequence where none is empty, the same length where every value
  has one length (a 3-vector, a date string), no character in text that
  none of the tests' texts holds (no upper case where all are lower case),
  and the same rules for the items of a sequence (no negative item in a list
  of naturals).

Inside it, the candidate is judged against the reference on everything the
reference accepts; a case on which the reference raises is dropped, as
before. `inputs: "tests"` (source.meta.oracle) switches generation off.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

_NUMBER = r"-?\s*(?:10\s*(?:\*\*|\^)\s*\d+|\d+(?:[_,]\d{3})*(?:\.\d+)?(?:e\d+)?)"
_SUBJECT = r"(?:len\(\s*[A-Za-z_]\w*\s*\)|[A-Za-z_]\w*)"
_LESS = r"(<=|≤|=<|<|⩽)"
_MORE = r"(>=|≥|=>|>|⩾)"
_CHAIN = re.compile(rf"({_NUMBER})\s*{_LESS}\s*({_SUBJECT})\s*{_LESS}\s*({_NUMBER})")
_UPPER = re.compile(rf"(?<![\w<>=≤≥])({_SUBJECT})\s*{_LESS}\s*({_NUMBER})")
_LOWER = re.compile(rf"(?<![\w<>=≤≥])({_SUBJECT})\s*{_MORE}\s*({_NUMBER})")
_BETWEEN = re.compile(rf"({_SUBJECT})\s+(?:is|are|lies|must be)?\s*between\s+({_NUMBER})\s+and\s+({_NUMBER})", re.I)


def _number(text: str) -> float:
    text = re.sub(r"\s+", "", text).replace("_", "").replace(",", "")
    if m := re.fullmatch(r"(-?)10(?:\*\*|\^)(\d+)", text):
        return float(f"{m.group(1)}1e{m.group(2)}")
    return float(text)


@dataclass
class Bound:
    """An interval; `strict` ends exclude their value."""

    lo: float | None = None
    hi: float | None = None
    lo_strict: bool = False
    hi_strict: bool = False

    def holds(self, x: float) -> bool:
        if self.lo is not None and (x < self.lo or (self.lo_strict and x == self.lo)):
            return False
        return self.hi is None or not (x > self.hi or (self.hi_strict and x == self.hi))

    def tighten(self, lo=None, hi=None, lo_strict=False, hi_strict=False) -> None:
        if lo is not None and (self.lo is None or lo > self.lo):
            self.lo, self.lo_strict = lo, lo_strict
        if hi is not None and (self.hi is None or hi < self.hi):
            self.hi, self.hi_strict = hi, hi_strict


def statement_bounds(statement: str) -> dict[str, Bound]:
    """Bounds the statement states, keyed by parameter name or `len(name)`."""
    text = statement.replace("`", "").replace("$", "").replace("\\le", "≤").replace("\\ge", "≥")
    out: dict[str, Bound] = {}

    def key(subject: str) -> str:
        return re.sub(r"\s+", "", subject)

    for m in _CHAIN.finditer(text):
        out.setdefault(key(m.group(3)), Bound()).tighten(
            _number(m.group(1)), _number(m.group(5)), m.group(2) == "<", m.group(4) == "<"
        )
    for m in _BETWEEN.finditer(text):
        out.setdefault(key(m.group(1)), Bound()).tighten(_number(m.group(2)), _number(m.group(3)))
    chained = _CHAIN.sub(" ", text)  # single comparisons outside the chains already read
    for m in _UPPER.finditer(chained):
        out.setdefault(key(m.group(1)), Bound()).tighten(hi=_number(m.group(3)), hi_strict=m.group(2) == "<")
    for m in _LOWER.finditer(chained):
        out.setdefault(key(m.group(1)), Bound()).tighten(lo=_number(m.group(3)), lo_strict=m.group(2) == ">")
    return out


def parameter_names(tree: Path, target: dict) -> list[str] | None:
    """The positional parameter names of a module-level function the
    reference defines (`target`: a recorded step's), else None."""
    if target.get("kind") != "call" or "." in target.get("qualname", "."):
        return None
    base = tree / Path(*str(target.get("module", "")).split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            try:
                module = ast.parse(path.read_text(errors="replace"))
            except SyntaxError:
                return None
            for node in module.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == target["qualname"]:
                    return [a.arg for a in node.args.posonlyargs + node.args.args]
    return None


@dataclass
class InputDomain:
    """What the task says about its inputs: the statement's bounds and the
    reference tree (for parameter names)."""

    bounds: dict[str, Bound] = field(default_factory=dict)
    tree: Path | None = None
    _names: dict[str, list[str] | None] = field(default_factory=dict)

    @classmethod
    def of(cls, statement: str, reference_tree: Path | None) -> InputDomain:
        return cls(statement_bounds(statement or ""), reference_tree)

    def stated(self, target: dict, pos: int) -> tuple[Bound | None, Bound | None]:
        """The statement's bounds on the value and on the length of argument `pos`."""
        if not self.bounds or self.tree is None:
            return None, None
        key = repr(sorted(target.items()))
        if key not in self._names:
            self._names[key] = parameter_names(self.tree, target)
        names = self._names[key]
        if names is None or pos >= len(names):
            return None, None
        return self.bounds.get(names[pos]), self.bounds.get(f"len({names[pos]})")

    def within(self, m, seen: list, target: dict, pos: int) -> bool:
        value, length = self.stated(target, pos)
        if value is not None and type(m) in (int, float) and not value.holds(m):
            return False
        if length is not None and type(m) in (str, bytes, list, tuple) and not length.holds(len(m)):
            return False
        return shown(m, seen)


def shown(m, seen: list) -> bool:
    """Whether `m` stays inside what the tests pass at that argument (the
    module docstring's rules); `seen` empty: nothing to go by, allowed."""
    numbers = [v for v in seen if type(v) in (int, float)]
    if type(m) in (int, float) and numbers:
        if m < 0 <= min(numbers) or (m == 0 < min(numbers)):
            return False
    sized = [v for v in seen if type(v) is type(m) and type(v) in (str, bytes, list, tuple)]
    if sized:
        if len(m) == 0 and all(len(v) for v in sized):
            return False
        if len({len(v) for v in sized}) == 1 and len(m) != len(sized[0]) and len(sized) > 1:
            return False  # every value the tests pass has one length: a fixed-size input
    if type(m) is str and sized and not set(m) <= set().union(*(set(v) for v in sized)):
        return False
    if type(m) in (list, tuple) and sized:
        items = [x for v in sized for x in v]
        return all(shown(x, items) for x in m)
    return True
