"""Reading pytest's output as the teacher's tool calls show it (`pytest -q
--tb=native`): the exit code, the failed tests, the traceback frames in
workspace code, the exception types, pytest's own failure count; and the
names worth looking up from them.

Pure functions of tool output; nothing reads the task directory, hidden tests
or the reference."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from touchstone.agent.teacher.reading import CALL_RE, NOT_CALLEES
from touchstone.episode.tools import PYTEST_COUNTS
from touchstone.harness import is_test_file

_EXIT_RE = re.compile(r"^exit code: (-?\d+)", re.M)
_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\n(?:(\s+)(\S.*)\n)?', re.M)
_SUMMARY_RE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - .*)?$", re.M)
_WHERE_RE = re.compile(r"where .*? = ([A-Za-z_][\w.]*)\(", re.M)
_COUNTS_RE = re.compile(rf"^=*\s*({PYTEST_COUNTS})(?: in [\d.]+s\b.*| =+)?\s*$", re.M)
_PYTEST_HELPER_RE = re.compile(r"\bpytest\.\w+")  # pytest.raises(...) is not the library's `raises`
# An exception line of a traceback, or of pytest's short summary (`FAILED t.py::x - TypeError: ...`).
_EXC_RE = re.compile(r"(?:^| - )(\w*(?:Error|Exception)|StopIteration)\b", re.M)


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
    """failed + errors from the last line (`3 failed, 1 error, 9 passed`; the tools
    drop pytest's run time, a recorded trajectory may still have it)."""
    lines = _COUNTS_RE.findall(observation)
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
            names += CALL_RE.findall(_PYTEST_HELPER_RE.sub("", frame.source))
    names += run.where_names
    for span in re.findall(r"`([^`\n]+)`", statement):
        if re.fullmatch(r"[A-Za-z_][\w.]*(\(\))?", span):
            names.append(span.removesuffix("()").rsplit(".", 1)[-1])
        names += _names_from_test_id(span)
    for failed in sorted(run.failed):
        names += _names_from_test_id(failed.split(" ", 1)[1])
    seen: dict[str, None] = {}
    for n in names:
        if n and n not in NOT_CALLEES and not n.startswith("test"):
            seen.setdefault(n, None)
    return list(seen)


MAX_SEARCH_WORDS = 4  # test parameters grepped for at once (more: the grep matches everything)


def failing_test_params(run: TestRun, limit: int = MAX_SEARCH_WORDS) -> list[str]:
    """Word-like parameters of the failing tests (`test_x[cow-kine]` -> cow, kine):
    data the library may register at import time, out of reach of any traceback."""
    words: dict[str, None] = {}
    for failed in sorted(run.failed):
        params = failed.partition("[")[2].rstrip("]")
        for word in re.split(r"[-\s]", params):
            if re.fullmatch(r"[A-Za-z_]\w{2,}", word):
                words.setdefault(word, None)
    return list(words)[:limit]


def first_failure_command(run: TestRun, base_command: str) -> str | None:
    """Re-run only the first failing test, when a long output hid its traceback
    or cut it short."""
    if (run.frames and not run.truncated) or not run.failed:
        return None
    node = sorted(run.failed)[0].split(" ", 1)[1]
    return f"{base_command} {shlex.quote(node)}"
