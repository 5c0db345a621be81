"""The repair procedure: a generator that yields the teacher's next action and
is sent the tool's observation. State: the function windows read so far, the
text the teacher last wrote into each, and the text with only accepted edits."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass

from touchstone.agent.teacher.edits import EditCandidate, edit_candidates, line_edit, preferred_operators, trigrams
from touchstone.agent.teacher.pytest_output import (
    TestRun,
    failing_test_params,
    first_failure_command,
    parse_test_run,
    suspect_names,
)
from touchstone.agent.teacher.reading import (
    Window,
    called_names,
    find_functions_command,
    find_literals_command,
    literal_callees,
    parse_function_hits,
    qualname_at,
)
from touchstone.harness import is_test_file
from touchstone import pyast

# No bytecode or pytest cache: the teacher leaves only its edits in the workspace.
TEST_COMMAND = "PYTHONDONTWRITEBYTECODE=1 python -m pytest -q --tb=native -p no:cacheprovider"
MAX_NAMES = 8  # functions looked up per grep
# turns one more try needs: the edit, its test run, and a revert plus the submit
# if it fails; with fewer left the teacher stops trying and submits what it kept
TURNS_PER_TRY = 4
CALL_DEPTH = 2  # rounds of look-ups per repair: the suspects, then the functions they call

WindowKey = tuple[str, int]  # (path, first line)
Target = tuple[WindowKey, str, set[int]]  # window, function, implicated lines (window-relative)


@dataclass(frozen=True)
class Action:
    tool: str
    args: dict[str, str]
    thought: str


# The repair procedure as a generator: it yields actions and is sent each observation.
Procedure = Generator[Action, str, None]

# Every episode starts here; its observation is the state other policies branch from.
FIRST_ACTION = Action("bash", {"command": TEST_COMMAND}, "Run the visible tests to see what fails.")
RERUN = Action("bash", {"command": TEST_COMMAND}, "Re-run the tests.")


# The teacher's other actions, one builder each: the procedure speaks through them,
# and `phrasebook` shows one of each to the tiny model's tokenizer.
def run_first_failure(command: str) -> Action:
    return Action("bash", {"command": command}, "Run the first failing test alone to see its traceback.")


def find_literals(words: list[str]) -> Action:
    return Action(
        "bash", {"command": find_literals_command(words)}, "Find where the library mentions the failing test's data."
    )


def find_functions(names: list[str]) -> Action:
    return Action("bash", {"command": find_functions_command(names)}, "Show the functions involved in the failure.")


def try_edit_thought(operator: str, path: str, line: int, qualname: str) -> str:
    return f"Try {operator.replace('_', ' ')} at {path}:{line} ({qualname})."


def revert_thought(path: str) -> str:
    return f"Revert the unhelpful edit in {path}."


def edit(path: str, old: str, new: str, thought: str) -> Action:
    return Action("str_replace", {"path": path, "old": old, "new": new}, thought)


def submit(passed: bool) -> Action:
    return Action("submit", {}, f"Submit: {'the visible tests pass' if passed else 'no further repair found'}.")


def phrasebook() -> list[Action]:
    """One action of each kind the teacher takes, with placeholder names. The default
    tokenizer trains on them (training/model_init.py), so the fixed parts of the
    teacher's commands (`grep`, `--exclude-dir=tests`, ...) are whole tokens and a
    tiny model imitating a look-up copies ~60 pieces instead of ~150."""
    path, name = "package/module.py", "function_name"
    return [
        FIRST_ACTION,
        run_first_failure(f"{TEST_COMMAND} {shlex.quote('tests/test_module.py::test_name[case-value]')}"),
        find_literals(["case", "value"]),
        find_functions([name, "other_name"]),
        edit(path, "    return a, b\n", "    return b, a\n", try_edit_thought("swap_arguments", path, 1, name)),
        edit(path, "", "", revert_thought(path)),
        RERUN,
        submit(True),
        submit(False),
    ]


class Repair:
    """State of one repair attempt. Code is known by windows: a function's lines as
    `grep -A` showed them, keyed by (path, first line)."""

    def __init__(self, statement: str, max_turns: int):
        self.statement = statement
        self.turns_left = max_turns
        self.windows: dict[WindowKey, Window] = {}
        self.looked_up: set[str] = set()
        self.searched: set[str] = set()  # test parameters already grepped for
        self.current: dict[WindowKey, str] = {}  # window text as the teacher last wrote it
        self.kept: dict[WindowKey, str] = {}  # window text with only accepted edits

    def act(self, action: Action) -> Generator[Action, str, str]:
        self.turns_left -= 1
        return (yield action)

    def run(self) -> Procedure:
        out = yield from self.act(FIRST_ACTION)
        run = parse_test_run(out)
        while not run.passed and not run.no_tests and self.turns_left >= TURNS_PER_TRY:
            improved = yield from self.repair_round(run)
            if improved is None:
                break
            run = improved
        yield from self.revert_rejected()
        yield submit(run.passed)

    def repair_round(self, run: TestRun) -> Generator[Action, str, TestRun | None]:
        """Try candidates, most suspect functions first, until one improves the test
        run; None if none does within the turn budget."""
        rerun = first_failure_command(run, TEST_COMMAND)
        if rerun:
            out = yield from self.act(run_first_failure(rerun))
            detail = parse_test_run(out)
            run = TestRun(
                run.exit_code,
                run.failed,
                detail.frames,
                detail.where_names,
                run.n_bad,
                list(dict.fromkeys(run.errors + detail.errors)),
            )
        hot = [(f.path, f.line) for f in reversed(run.frames) if not is_test_file(f.path)]  # innermost first
        names = [f.func for f in reversed(run.frames) if not is_test_file(f.path)] + suspect_names(run, self.statement)
        words = [] if hot else [w for w in failing_test_params(run) if w not in self.searched]
        if words:  # no library frame: maybe the failing data is registered at import time
            self.searched.update(words)
            out = yield from self.act(find_literals(words))
            names = literal_callees(out) + names
        tried: set[tuple[WindowKey, str]] = set()
        for _ in range(CALL_DEPTH):
            targets = yield from self.look_up(names, hot)
            for key, cand in self.ranked(targets, preferred_operators(run.errors)):
                if self.turns_left < TURNS_PER_TRY:
                    return None
                if (key, cand.source) in tried:
                    continue
                tried.add((key, cand.source))
                if not (yield from self.apply(key, cand)):
                    continue
                out = yield from self.act(RERUN)
                new = parse_test_run(out)
                if new.improves_on(run):
                    self.kept[key] = self.current[key]
                    return new
            names = [n for key, qualname, _ in targets for n in called_names(self.windows[key].module, qualname)]
        return None

    def look_up(self, names: list[str], hot: list[tuple[str, int]]) -> Generator[Action, str, list[Target]]:
        """Show the definitions of `names` (one grep) and return the functions found,
        in the order of `names`, with the traceback lines that fall inside them."""
        wanted = [n for n in dict.fromkeys(names) if n not in self.looked_up][:MAX_NAMES]
        if not wanted or self.turns_left < TURNS_PER_TRY:
            return []
        self.looked_up.update(wanted)
        out = yield from self.act(find_functions(wanted))
        found: list[Target] = []
        for window in parse_function_hits(out):
            key = (window.path, window.start)
            if key in self.windows or not _parses(window.module):
                continue
            self.windows[key] = window
            self.current[key] = self.kept[key] = window.text
            n_lines = window.text.count("\n")
            lines = {
                line - window.start + 1
                for path, line in hot
                if path == window.path and window.start <= line < window.start + n_lines
            }
            qualname = qualname_at(window.module, 1)
            if qualname is not None:
                found.append((key, qualname, lines))
        order = {n: i for i, n in enumerate(wanted)}
        return sorted(found, key=lambda t: (not t[2], order.get(t[1].rsplit(".", 1)[-1], len(order))))

    def ranked(self, targets: list[Target], preferred: set[str]) -> list[tuple[WindowKey, EditCandidate]]:
        """Edits near any traceback line first (the bug may sit in a caller's frame
        as well as the innermost one), then the other functions' edits, function by function."""
        hot, cold = [], []
        corpus = sum((trigrams(text) for text in self.kept.values()), Counter())  # all the code read so far
        for i, (key, qualname, lines) in enumerate(targets):
            window = Window(key[0], key[1], self.kept[key])
            for c in edit_candidates(window.module, key[0], qualname, lines, preferred, corpus):
                (hot if lines else cold).append((c.rank, i, key, c))
        hot.sort(key=lambda t: t[:2])
        return [(key, c) for _, _, key, c in hot + cold]

    # -- editing ---------------------------------------------------------------------
    def apply(self, key: WindowKey, cand: EditCandidate) -> Generator[Action, str, bool]:
        """Make the workspace hold exactly `cand` on top of the kept edits."""
        target = Window(key[0], key[1], self.kept[key]).reindent(cand.source)
        if target is None:
            return False
        yield from self.revert_rejected(keep=key)
        line = key[1] + cand.lineno - 1
        thought = try_edit_thought(cand.operator, cand.path, line, cand.qualname)
        return (yield from self.transition(key, target, thought))

    def revert_rejected(self, keep: WindowKey | None = None) -> Generator[Action, str, None]:
        for key, text in self.current.items():
            if key != keep and text != self.kept[key]:
                yield from self.transition(key, self.kept[key], revert_thought(key[0]))

    def transition(self, key: WindowKey, target: str, thought: str) -> Generator[Action, str, bool]:
        current = self.current[key]
        if current == target:
            return True
        old, new = line_edit(current, target)
        if any(k != key and k[0] == key[0] and old in text for k, text in self.current.items()):
            old, new = _anchor_at_def(current, target, old)  # known to repeat: spare the failing try
        out = yield from self.act(edit(key[0], old, new, thought))
        if out.startswith("error: `old` occurs") and not current.startswith(old):
            old, new = _anchor_at_def(current, target, old)
            out = yield from self.act(edit(key[0], old, new, thought))
        if out.startswith("error: "):
            return False  # the file is unchanged
        self.current[key] = target
        return True


def _anchor_at_def(current: str, target: str, old: str) -> tuple[str, str]:
    """(old, new) widened up to the def line, for lines that also occur elsewhere in the file."""
    end = current.index(old) + len(old)
    return current[:end], target[: len(target) - (len(current) - end)]


def _parses(text: str) -> bool:
    try:
        pyast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def repair(statement: str, max_turns: int) -> Procedure:
    """The teacher's procedure for one task: send it each tool observation."""
    return Repair(statement, max_turns).run()
