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
    Candidate,
    TestRun,
    callees,
    candidates,
    is_test_path,
    line_edit,
    parse_grep_defs,
    parse_test_run,
    qualname_at,
    suspect_names,
)

# No bytecode or pytest cache: the teacher leaves only its edits in the workspace.
TEST_COMMAND = "PYTHONDONTWRITEBYTECODE=1 python -m pytest -q --tb=native -p no:cacheprovider"
READ_CHUNK_LINES = 100
_TRUNCATED_RE = re.compile(r"\n\[\.\.\. truncated \d+ characters \.\.\.\]\n")
_STDOUT_PREFIX = re.compile(r"^exit code: 0\n(?:stdout:\n)?")


@dataclass(frozen=True)
class Action:
    tool: str
    args: dict[str, str]
    thought: str


# The repair procedure as a generator: it yields actions and is sent each observation.
Procedure = Generator[Action, str, None]


class _Repair:
    def __init__(self, statement: str, max_turns: int):
        self.statement = statement
        self.turns_left = max_turns - 2  # keep room for a final revert and submit
        self.files: dict[str, str] = {}  # path -> current text (as the teacher last wrote it)
        self.kept: dict[str, str] = {}  # path -> text with only accepted edits

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
        tried: set[str] = set()
        for cand in self.ranked(targets, run):
            if self.turns_left <= 3:
                return None
            if cand.source in tried:
                continue
            tried.add(cand.source)
            if not (yield from self.apply(cand)):
                continue
            out = yield from self.act(Action("bash", {"command": TEST_COMMAND}, "Re-run the tests."))
            new = parse_test_run(out)
            if new.passed or (new.exit_code is not None and new.failed < run.failed):
                self.kept[cand.path] = cand.source
                return new
        return None

    # -- localization ---------------------------------------------------------------
    def localize(self, run: TestRun) -> Generator[Action, str, list[tuple[str, str, set[int]]]]:
        """(path, function, implicated lines) in priority order."""
        spots: list[tuple[str, int, bool]] = []  # (path, line, from a traceback frame)
        for frame in reversed(run.frames):  # innermost first
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
        targets: dict[tuple[str, str], set[int]] = {}
        for path, line, hot in spots:
            source = yield from self.read(path)
            qualname = qualname_at(source, line) if source is not None else None
            if qualname is None:
                continue
            targets.setdefault((path, qualname), set())
            if hot:
                targets[(path, qualname)].add(line)
        ordered = [(p, q, lines) for (p, q), lines in targets.items()]
        for path, qualname, _ in list(ordered):
            for helper in callees(self.files[path], qualname):
                if (path, helper) not in targets:
                    targets[(path, helper)] = set()
                    ordered.append((path, helper, set()))
        return ordered

    def ranked(self, targets: list[tuple[str, str, set[int]]], run: TestRun) -> list[Candidate]:
        out: list[Candidate] = []
        for path, qualname, lines in targets:
            out += candidates(self.kept[path], path, qualname, lines)
        return out

    # -- file access through the tools ---------------------------------------------------
    def read(self, path: str) -> Generator[Action, str, str | None]:
        """The file's text (read once), or None if unreadable or not Python."""
        if path not in self.files:
            text = yield from self.act(Action("read_file", {"path": path}, f"Read {path}."))
            if _TRUNCATED_RE.search(text):
                text = yield from self.read_in_chunks(path)
            if text is None or text.startswith("error: ") or not _parses(text):
                self.files[path] = None  # type: ignore[assignment]
            else:
                self.files[path] = self.kept[path] = text
        return self.files[path]

    def read_in_chunks(self, path: str) -> Generator[Action, str, str | None]:
        """A file too long for one observation, read with `sed` a slice at a time."""
        parts, start = [], 1
        while self.turns_left > 4:
            end = start + READ_CHUNK_LINES - 1
            out = yield from self.act(
                Action("bash", {"command": f"sed -n '{start},{end}p' {path}"}, f"Read lines {start}-{end} of {path}.")
            )
            m = _STDOUT_PREFIX.match(out)
            if m is None or _TRUNCATED_RE.search(out):
                return None
            chunk = out[m.end():]
            parts.append(chunk)
            if chunk.count("\n") < READ_CHUNK_LINES:
                return "".join(parts)
            start = end + 1
        return None

    def apply(self, cand: Candidate) -> Generator[Action, str, bool]:
        """Make the workspace hold exactly `cand` on top of the kept edits."""
        yield from self.revert_rejected(keep=cand.path)
        ok = yield from self.transition(
            cand.path, cand.source, f"Try {cand.operator.replace('_', ' ')} at {cand.path}:{cand.lineno} ({cand.qualname})."
        )
        return ok

    def revert_rejected(self, keep: str | None = None) -> Generator[Action, str, None]:
        for path, text in self.files.items():
            if text is not None and path != keep and text != self.kept[path]:
                yield from self.transition(path, self.kept[path], f"Revert the unhelpful edit in {path}.")

    def transition(self, path: str, target: str, thought: str) -> Generator[Action, str, bool]:
        current = self.files[path]
        if current == target:
            return True
        old, new = line_edit(current, target)
        out = yield from self.act(Action("str_replace", {"path": path, "old": old, "new": new}, thought))
        if out.startswith("error: "):
            return False
        self.files[path] = target
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
