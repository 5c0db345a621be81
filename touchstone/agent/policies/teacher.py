"""The `teacher` policy: a deterministic program-repair agent.

It is the round-0 teacher on the CPU default, where the tiny base model cannot
act yet. It works only through the public tools, like any policy: it runs the
visible tests, localizes the fault from tracebacks (frames in library code,
functions called on failing test lines, functions the statement names),
reads the implicated files, then tries single-edit repairs (inverse AST
mutations: flipped comparisons, ±1, and/or, arithmetic operators, negated
conditions, ...) one `str_replace` at a time, re-running the tests after each.
An edit that leaves failures it did not remove is reverted by the next edit;
one that strictly shrinks the set of failing tests is kept. It never reads
hidden tests or the reference, and it fails whenever the bug is not a single
such edit, the visible tests do not expose it, or its turn budget runs out.
Its trajectories are ordinary trajectories and are verified like any other.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from touchstone.agent.policies import Episode, Policy, PolicyTurn
from touchstone.agent.policies.repair import (
    SMALL_FILE_BYTES,
    Candidate,
    Outline,
    TestRun,
    Window,
    called_names,
    candidates,
    first_failure_command,
    is_test_path,
    line_edit,
    outline_command,
    parse_grep_defs,
    parse_outline,
    parse_test_run,
    qualname_at,
    suspect_names,
    trim_window,
)

# No bytecode or pytest cache: the teacher leaves only its edits in the workspace.
TEST_COMMAND = "PYTHONDONTWRITEBYTECODE=1 python -m pytest -q --tb=native -p no:cacheprovider"
_TRUNCATED_RE = re.compile(r"\n\[\.\.\. (?:truncated \d+ characters|stdout cut by the sandbox)")
_STDOUT_PREFIX = re.compile(r"^exit code: 0\nstdout:\n")

WindowKey = tuple[str, int]  # (path, first line)
Target = tuple[WindowKey, str, set[int]]  # window, function, implicated lines (window-relative)


@dataclass(frozen=True)
class Action:
    tool: str
    args: dict[str, str]
    thought: str


# The repair procedure as a generator: it yields actions and is sent each observation.
Procedure = Generator[Action, str, None]


class _Repair:
    """State of one repair attempt. Files are known by windows: a small file is one
    window read whole; a large one is outlined, then read one function at a time."""

    def __init__(self, statement: str, max_turns: int):
        self.statement = statement
        self.turns_left = max_turns - 2  # keep room for a final revert and submit
        self.outlines: dict[str, Outline | None] = {}
        self.windows: dict[WindowKey, Window | None] = {}
        self.current: dict[WindowKey, str] = {}  # window text as the teacher last wrote it
        self.kept: dict[WindowKey, str] = {}  # window text with only accepted edits

    def act(self, action: Action) -> Generator[Action, str, str]:
        self.turns_left -= 1
        return (yield action)

    def run(self) -> Procedure:
        out = yield from self.act(Action("bash", {"command": TEST_COMMAND}, "Run the visible tests to see what fails."))
        run = parse_test_run(out)
        while not run.passed and not run.no_tests and self.turns_left > 2:
            improved = yield from self.repair_round(run)
            if improved is None:
                break
            run = improved
        yield from self.revert_rejected()
        verdict = "the visible tests pass" if run.passed else "no further repair found"
        yield Action("submit", {}, f"Submit: {verdict}.")

    def repair_round(self, run: TestRun) -> Generator[Action, str, TestRun | None]:
        """Try candidates until one strictly shrinks the failing set; None if none does."""
        targets = yield from self.localize(run)
        tried: set[tuple[WindowKey, str]] = set()
        for key, cand in self.ranked(targets):
            if self.turns_left <= 3:
                return None
            if (key, cand.source) in tried:
                continue
            tried.add((key, cand.source))
            if not (yield from self.apply(key, cand)):
                continue
            out = yield from self.act(Action("bash", {"command": TEST_COMMAND}, "Re-run the tests."))
            new = parse_test_run(out)
            if new.improves_on(run):
                self.kept[key] = self.current[key]
                return new
        return None

    # -- localization ---------------------------------------------------------------
    def localize(self, run: TestRun) -> Generator[Action, str, list[Target]]:
        """Functions to repair, in priority order: frames of the traceback in library
        code (innermost first), functions named by the failing test lines or the
        statement, then functions of the same file those call."""
        rerun = first_failure_command(run, TEST_COMMAND)
        if rerun:
            out = yield from self.act(Action("bash", {"command": rerun}, "Run the first failing test alone to see its traceback."))
            detail = parse_test_run(out)
            run = TestRun(run.exit_code, run.failed, detail.frames, detail.where_names, run.n_bad)
        spots: list[tuple[str, int, bool]] = []  # (path, line, from a traceback frame)
        for frame in reversed(run.frames):
            if not is_test_path(frame.path):
                spots.append((frame.path, frame.line, True))
        names = suspect_names(run, self.statement)
        if names:
            pattern = "|".join(re.escape(n) for n in names[:20])
            out = yield from self.act(
                Action(
                    "bash",
                    {"command": f"grep -rnE --include='*.py' '^\\s*(async\\s+)?def ({pattern})\\b' ."},
                    "Find where the functions involved in the failure are defined.",
                )
            )
            spots += [(path, line, False) for path, line in parse_grep_defs(out)]
        targets: dict[tuple[WindowKey, str], set[int]] = {}
        yield from self.add_targets(spots, targets)
        for (key, qualname) in list(targets):  # helpers of the same file may hold the bug
            window = self.windows[key]
            outline = self.outlines.get(key[0])
            helpers = [(key[0], line, False) for name in called_names(window.module, qualname)
                       for line in (outline.defs_named(name) if outline else [])]
            yield from self.add_targets(helpers, targets)
        return [(key, qualname, lines) for (key, qualname), lines in targets.items()]

    def add_targets(self, spots, targets) -> Generator[Action, str, None]:
        for path, line, hot in spots:
            if self.turns_left <= 6:
                return
            window = yield from self.window_at(path, line)
            if window is None:
                continue
            rel = line - window.start + 1
            qualname = qualname_at(window.module, rel)
            if qualname is not None:
                lines = targets.setdefault(((path, window.start), qualname), set())
                if hot:
                    lines.add(rel)

    def ranked(self, targets: list[Target]) -> list[tuple[WindowKey, Candidate]]:
        out = []
        for key, qualname, lines in targets:
            window = Window(key[0], key[1], self.kept[key])
            out += [(key, c) for c in candidates(window.module, key[0], qualname, lines)]
        return out

    # -- reading through the tools ---------------------------------------------------
    def window_at(self, path: str, line: int) -> Generator[Action, str, Window | None]:
        """The window holding `line` of `path`, read through the tools once."""
        if path not in self.outlines:
            out = yield from self.act(Action("bash", {"command": outline_command(path)}, f"Outline {path}."))
            self.outlines[path] = parse_outline(out)
        outline = self.outlines[path]
        if outline is None:
            return None
        if outline.size <= SMALL_FILE_BYTES:
            span: tuple[int, int] | None = (1, outline.n_lines)
        else:
            span = outline.function_span(line)
        if span is None:
            return None
        key = (path, span[0])
        if key not in self.windows:
            self.windows[key] = yield from self.read_window(path, *span)
        return self.windows[key]

    def read_window(self, path: str, first: int, last: int) -> Generator[Action, str, Window | None]:
        if first == 1:
            text = yield from self.act(Action("read_file", {"path": path}, f"Read {path}."))
            bad = text.startswith("error: ")
        else:
            out = yield from self.act(
                Action("bash", {"command": f"sed -n '{first},{last}p' {path}"}, f"Read lines {first}-{last} of {path}.")
            )
            m = _STDOUT_PREFIX.match(out)
            bad, text = m is None, trim_window(out[m.end():]) if m else ""
        window = Window(path, first, text)
        if bad or _TRUNCATED_RE.search(text) or not _parses(window.module):
            return None
        self.current[(path, first)] = self.kept[(path, first)] = text
        return window

    # -- editing ---------------------------------------------------------------------
    def apply(self, key: WindowKey, cand: Candidate) -> Generator[Action, str, bool]:
        """Make the workspace hold exactly `cand` on top of the kept edits."""
        target = Window(key[0], key[1], self.kept[key]).reindent(cand.source)
        if target is None:
            return False
        yield from self.revert_rejected(keep=key)
        line = key[1] + cand.lineno - 1
        thought = f"Try {cand.operator.replace('_', ' ')} at {cand.path}:{line} ({cand.qualname})."
        return (yield from self.transition(key, target, thought))

    def revert_rejected(self, keep: WindowKey | None = None) -> Generator[Action, str, None]:
        for key, text in self.current.items():
            if key != keep and text != self.kept[key]:
                yield from self.transition(key, self.kept[key], f"Revert the unhelpful edit in {key[0]}.")

    def transition(self, key: WindowKey, target: str, thought: str) -> Generator[Action, str, bool]:
        current = self.current[key]
        if current == target:
            return True
        old, new = line_edit(current, target)
        out = yield from self.act(Action("str_replace", {"path": key[0], "old": old, "new": new}, thought))
        if out.startswith("error: `old` occurs") and not current.startswith(old):
            # The lines also occur elsewhere in the file: anchor the edit at the def line.
            end = current.index(old) + len(old)
            old, new = current[:end], target[: len(target) - (len(current) - end)]
            out = yield from self.act(Action("str_replace", {"path": key[0], "old": old, "new": new}, thought))
        if out.startswith("error: "):
            return False  # the file is unchanged
        self.current[key] = target
        return True


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


class _TeacherEpisode(Episode):
    def __init__(self, max_turns: int):
        self.max_turns = max_turns
        self.procedure: Procedure | None = None
        self.calls = 0

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyTurn:
        try:
            if self.procedure is None:
                statement = next(m["content"] for m in messages if m["role"] == "user")
                self.procedure = _Repair(statement, self.max_turns).run()
                action = next(self.procedure)
            else:
                last = messages[-1]
                action = self.procedure.send(last.get("content") or "" if last["role"] == "tool" else "")
        except StopIteration:
            action = Action("submit", {}, "Submit.")
        call = {
            "id": f"call_{self.calls}",
            "type": "function",
            "function": {"name": action.tool, "arguments": json.dumps(action.args)},
        }
        self.calls += 1
        return PolicyTurn(message={"role": "assistant", "content": action.thought, "tool_calls": [call]})


class TeacherPolicy(Policy):
    """Deterministic; the sampling parameters and seed are recorded but unused."""

    def episode(self, seed: int, max_turns: int) -> Episode:
        return _TeacherEpisode(max_turns)
