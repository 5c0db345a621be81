"""The teacher on mutation-style tasks (one injected AST bug in a small library):
it solves some and fails others, through the public tools only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import make_policy
from touchstone.agent.teacher.edits import line_edit, preferred_operators
from touchstone.agent.teacher.pytest_output import (
    failing_test_params,
    first_failure_command,
    parse_test_run,
    suspect_names,
)
from touchstone.agent.teacher.reading import literal_callees, parse_function_hits

from .conftest import MINILIB, MINILIB_TESTS, minilib_task, write_task

# (task id, statement, original text, mutated text, visible tests expose it, teacher should solve)
MUTANTS = [
    ("flip", "`clamp` ignores the upper bound.", "if x > hi:", "if x <= hi:", True),
    ("range", "`is_sorted` crashes.", "range(len(xs) - 1)", "range(len(xs) - 1 + 1)", True),
    ("boolop", "`both_positive` is wrong.", "a > 0 and b > 0", "a > 0 or b > 0", True),
    ("div", "`mean` is wrong.", "sum(xs) / len(xs)", "sum(xs) * len(xs)", True),
    ("augassign", "`count_vowels` counts wrong.", "total += 1", "total -= 1", True),
    ("return", "`chunk` returns nothing.", "return [xs[i:i + n] for i in range(0, len(xs), n)]", "return None", False),
    ("hidden-only", "`both_positive` is wrong.", "a > 0 and b > 0", "a > 0 or b > 0", False),
]


def hidden_tests_pass(task, patch: str, tmp_path) -> bool:
    """Grade like the verifier: the final diff on a pristine copy + the hidden tests."""
    work = tmp_path / f"grade-{task.id}"
    shutil.copytree(task.workspace_dir, work)
    if patch:
        subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=work, check=True)
    shutil.copytree(task.hidden_tests_dir, work, dirs_exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=work, capture_output=True, text=True
    )
    return r.returncode == 0


@pytest.mark.slow  # seven episodes, ~30 s on 2 busy cores
def test_teacher_solves_some_mutants_and_fails_others(tmp_path):
    teacher = make_policy(PolicySpec.parse("teacher"))
    outcome = {}
    for task_id, statement, original, mutated, should_solve in MUTANTS:
        assert original in MINILIB
        visible = MINILIB_TESTS
        if task_id == "hidden-only":  # the visible tests do not exercise the bug
            visible = MINILIB_TESTS.replace("    assert not both_positive(1, -2)\n", "")
        task = minilib_task(tmp_path / "tasks", task_id, statement, MINILIB.replace(original, mutated), visible)
        traj = run_episode(task, teacher, backend="bwrap")
        assert traj.exit_reason == "submitted", (task_id, traj.error)
        # It acts only through the tools and never looks for the hidden material.
        for m in traj.messages:
            for c in m.get("tool_calls") or []:
                assert "hidden" not in c["function"]["arguments"] and "reference" not in c["function"]["arguments"]
        outcome[task_id] = hidden_tests_pass(task, traj.diff.patch, tmp_path)
    assert outcome == {t[0]: t[4] for t in MUTANTS}
    assert traj.diff.patch == ""  # nothing to try: the teacher leaves the workspace as it was


def test_teacher_is_deterministic_and_reverts_failed_edits(tmp_path):
    task = minilib_task(
        tmp_path, "det", "`clamp` ignores the upper bound.", MINILIB.replace("if x > hi:", "if x <= hi:")
    )
    a, b = (run_episode(task, make_policy(PolicySpec.parse("teacher")), attempt=i, backend="bwrap") for i in range(2))
    assert [m for m in a.messages if m["role"] == "assistant"] == [m for m in b.messages if m["role"] == "assistant"]
    edits = [s for s in a.steps if s.tool == "str_replace"]
    assert len(edits) >= 2  # a wrong candidate first, undone by the next edit
    removed = [line for line in a.diff.patch.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-    if x <= hi:"] and "+    if x > hi:" in a.diff.patch


def test_parse_test_run_reads_native_tracebacks():
    out = (
        "exit code: 1\nstdout:\nF\n=== FAILURES ===\nTraceback (most recent call last):\n"
        '  File "/workspace/tests/test_core.py", line 4, in test_x\n    assert f(1) == 2\n'
        '  File "/workspace/pkg/core.py", line 7, in f\n    return g(x) + 1\n'
        '  File "/usr/lib/python3/x.py", line 1, in h\n    pass\nZeroDivisionError: boom\n'
        "=== short test summary info ===\nFAILED tests/test_core.py::test_x - ZeroDivisionError: boom\n"
        "ERROR tests/test_other.py\n1 failed, 1 error in 0.01s\n"
    )
    run = parse_test_run(out)
    assert run.exit_code == 1 and not run.passed and run.n_bad == 2
    # The tools drop pytest's run time; a recorded trajectory may still show it.
    assert parse_test_run(out.replace(" in 0.01s", "")).n_bad == 2
    assert parse_test_run(out.replace("1 failed, 1 error in 0.01s", "== 3 failed, 9 passed ==")).n_bad == 3
    assert run.failed == {"FAILED tests/test_core.py::test_x", "ERROR tests/test_other.py"}
    assert [(f.path, f.line, f.func, f.source) for f in run.frames] == [
        ("tests/test_core.py", 4, "test_x", "assert f(1) == 2"),
        ("pkg/core.py", 7, "f", "return g(x) + 1"),
    ]


@pytest.mark.parametrize(
    "current, target",
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("x = 1\nx = 1\ny = 2\n", "x = 1\nx = 2\ny = 2\n"),  # the changed line is not unique
        ("one\n", "two\n"),
    ],
)
def test_line_edit_is_one_unique_replacement(current, target):
    old, new = line_edit(current, target)
    assert current.count(old) == 1 and current.replace(old, new) == target


def test_teacher_edits_lines_that_repeat_elsewhere_in_a_large_file(tmp_path):
    # Another function shares clamp's lines, and the file is too long to read in one observation.
    filler = "".join(
        f"\n\ndef helper_{i}(x, lo):\n    if x < lo:\n        return lo\n    return x * {i}\n" for i in range(200)
    )
    task = minilib_task(
        tmp_path, "big", "`clamp` ignores the upper bound.", MINILIB.replace("if x > hi:", "if x <= hi:") + filler
    )
    assert len((task.workspace_dir / "minilib/core.py").read_text()) > 8000
    traj = run_episode(task, make_policy(PolicySpec.parse("teacher")), backend="bwrap")
    assert traj.exit_reason == "submitted" and hidden_tests_pass(task, traj.diff.patch, tmp_path)
    errors = [m["content"] for m in traj.messages if m["role"] == "tool" and m["content"].startswith("error: ")]
    assert errors and all("occurs 2" in e or "occurs 201" in e for e in errors)  # retried with the def line


def test_function_windows_from_grep_context():
    out = (
        "exit code: 0\nstdout:\n./pkg/a.py:3:def f(x):\n./pkg/a.py-4-    y = x\n./pkg/a.py-5-\n"
        "./pkg/a.py-6-    return y\n./pkg/a.py-7-\n./pkg/a.py-8-X = 1\n--\n"
        "./pkg/b.py:10:    def m(self):\n./pkg/b.py-11-        return 1\n./pkg/b.py-12-\n"
        "./pkg/b.py-13-    @property\n./pkg/b.py:14:    def f(self):\n./pkg/b.py-15-        return 2\n--\n"
        "./tests/test_a.py:1:def f():\n./tests/test_a.py-2-    pass\n"
    )
    windows = parse_function_hits(out)
    assert [(w.path, w.start, w.text) for w in windows] == [
        ("pkg/a.py", 3, "def f(x):\n    y = x\n\n    return y\n"),
        ("pkg/b.py", 10, "    def m(self):\n        return 1\n"),
        ("pkg/b.py", 14, "    def f(self):\n        return 2\n"),
    ]
    assert windows[1].module == "def m(self):\n    return 1\n"
    assert windows[1].reindent("def m(self):\n    return 2\n") == "    def m(self):\n        return 2\n"


# A library that registers its data at import time, like inflection's irregular words:
# a traceback shows only the test's assertion, never the registering function.
WORDLIB = """\
PLURALS = {}


def _irregular(singular, plural):
    PLURALS[singular[0].upper() + singular[1:]] = plural[0].upper() + plural[1:]
    PLURALS[singular[0].lower() + singular[1:]] = plural[0].lower() + plural[1:]


def pluralize(word):
    return PLURALS.get(word, word + "s")


_irregular("cow", "kine")
_irregular("person", "people")
"""

WORDLIB_TESTS = """\
import pytest

from wordlib.core import pluralize


@pytest.mark.parametrize("singular, plural", [("Cow", "Kine"), ("person", "people"), ("cat", "cats")])
def test_pluralize(singular, plural):
    assert pluralize(singular) == plural
"""


def test_teacher_finds_bugs_in_data_registered_at_import_time(tmp_path):
    mutated = WORDLIB.replace("plural[0].upper() + plural[1:]", "plural[0].upper() + plural[2:]")
    task = write_task(
        tmp_path,
        "wordlib",
        "`pluralize` is wrong for some irregular words.",
        {"wordlib/__init__.py": "", "wordlib/core.py": mutated, "tests/test_core.py": WORDLIB_TESTS},
        {"tests/test_core.py": WORDLIB_TESTS},
    )
    traj = run_episode(
        task, make_policy(PolicySpec.parse("teacher")), backend="bwrap", limits=EpisodeLimits(max_turns=16)
    )
    assert traj.exit_reason == "submitted" and hidden_tests_pass(task, traj.diff.patch, tmp_path)
    commands = [
        json.loads(c["function"]["arguments"]).get("command", "")
        for m in traj.messages
        for c in m.get("tool_calls") or []
    ]
    assert any("-e Cow -e Kine" in c for c in commands)  # found through the failing test's data
    edits = [s for s in traj.steps if s.tool == "str_replace"]
    assert len(edits) == 1  # the odd one out among similar slices is tried first


def test_localization_helpers_read_test_ids_and_exceptions():
    run = parse_test_run(
        "exit code: 1\nstdout:\nTraceback (most recent call last):\n"
        '  File "/workspace/tests/test_utils.py", line 6, in test_raises\n'
        "    assert not raises(ZeroDivisionError, lambda: 1) and pytest.raises(KeyError)\n"
        "AssertionError: assert not True\n"
        "FAILED tests/test_utils.py::test_raises - assert not True\n"
        "FAILED tests/test_words.py::test_plural[cow-kine] - TypeError: bad\n2 failed in 0.1s\n"
    )
    assert suspect_names(run, "")[0] == "raises"  # the library's own `raises`, not pytest.raises
    assert run.errors == ["AssertionError", "TypeError"]
    assert preferred_operators(run.errors) >= {"swap_arguments"}
    assert failing_test_params(run) == ["cow", "kine"]
    assert literal_callees("./pkg/words.py:40:_irregular('cow', 'kine')\n") == ["_irregular"]
    assert literal_callees("".join(f"./pkg/a.py:{i}:f('cow')\n" for i in range(20))) == []  # too common


def test_a_cut_short_output_sends_the_teacher_back_to_one_failing_test():
    full = parse_test_run(
        "exit code: 1\nstdout:\nTraceback (most recent call last):\n"
        '  File "/workspace/pkg/a.py", line 3, in f\n    return 1\n'
        "FAILED tests/test_a.py::test_f - ValueError\n1 failed in 0.1s\n"
    )
    cut = parse_test_run(
        "exit code: 1\nstdout:\nTraceback (most recent call last):\n"
        '  File "/workspace/pkg/a.py", line 3, in f\n    return 1\n'
        "[... truncated 5000 characters ...]\nFAILED tests/test_a.py::test_f - ValueError\n"
        "1 failed in 0.1s\n"
    )
    assert first_failure_command(full, "pytest") is None
    assert first_failure_command(cut, "pytest") == "pytest tests/test_a.py::test_f"
