"""Tool execution in real sandboxes: observations, error observations, determinism."""

from __future__ import annotations

import json

import pytest

from touchstone.episode.tools import TOOL_NAMES, TOOL_SCHEMAS, execute_tool_call, stable_output
from touchstone.sandbox import open_sandbox


def call(sb, name, **args):
    return execute_tool_call(sb, name, json.dumps(args))


@pytest.fixture
def sb(simple_task):
    with open_sandbox(simple_task.workspace_dir, backend="bwrap") as sandbox:
        yield sandbox


def test_schemas_are_openai_function_tools():
    assert TOOL_NAMES == ("bash", "read_file", "write_file", "str_replace", "submit")
    for schema in TOOL_SCHEMAS:
        assert schema["type"] == "function"
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) == set(params["properties"])


def test_bash_reports_exit_code_and_streams(simple_task, sandbox_backend):
    with open_sandbox(simple_task.workspace_dir, backend=sandbox_backend) as sb:
        out = call(sb, "bash", command="pwd; ls minilib; echo oops >&2; exit 3")
    assert out == ("exit code: 3\nstdout:\n/workspace\n__init__.py\ncore.py\n\nstderr:\noops\n", False, False, 3)


def test_bash_timeout_is_reported(sb):
    out = execute_tool_call(sb, "bash", json.dumps({"command": "sleep 5"}), timeout=0.5)
    assert out.content.startswith("exit code: ") and "(timed out after 0.5 s)" in out.content
    assert not out.ok


ADDRESS_TEST = """\
import unittest


def test_holds():
    assert True


def test_shows_an_address():
    assert [test_holds] == []


class Case(unittest.TestCase):
    def test_unit(self):
        self.assertTrue(True)
"""


def test_bash_output_is_the_same_on_every_run(sb):
    # pytest prints its run time and the failing object's address, which change from run
    # to run; the observation must not, or the same seed gives another rollout each time.
    assert call(sb, "write_file", path="test_address.py", content=ADDRESS_TEST).ok
    runs = [call(sb, "bash", command="python3 -m pytest -q -p no:cacheprovider test_address.py") for _ in range(2)]
    units = [call(sb, "bash", command="python3 -m unittest -q test_address 2>&1") for _ in range(2)]
    assert runs[0] == runs[1] and units[0] == units[1]
    assert "assert [<function te...0x...>] == []" in runs[0].content  # pytest cut the repr
    assert "<function test_holds at 0x...>" in runs[0].content
    assert runs[0].content.rstrip().endswith("\n1 failed, 2 passed")
    assert "\nRan 1 test\n" in units[0].content


@pytest.mark.parametrize(
    "text",
    [
        "LOAD = 0x40  # at 0x40\nmask at 0xdeadbeef12 is data, and so is 0x7f37e33d0cc0...\n<a...b> <c...>\n",
        "the suite: 3 passed in 0.12s, see above\nprint('Ran 3 tests in 1s')\n3 apples in 2s\n",
    ],
)
def test_stable_output_keeps_other_text(text):
    assert stable_output(text) == text.replace("at 0xdeadbeef12", "at 0x...")


def test_file_tools_edit_the_workspace(sb):
    assert call(sb, "write_file", path="notes/a.txt", content="one two two") == (
        "wrote 11 characters to notes/a.txt",
        True,
        False,
        None,
    )
    assert call(sb, "read_file", path="/workspace/notes/a.txt").content == "one two two"
    assert call(sb, "str_replace", path="notes/a.txt", old="one", new="1").ok
    assert call(sb, "bash", command="cat notes/a.txt").content == "exit code: 0\nstdout:\n1 two two"
    assert sb.diff().created == ["notes/a.txt"]


@pytest.mark.parametrize(
    "name, args, message",
    [
        ("rm_rf", {}, "error: unknown tool 'rm_rf'; available tools: bash, read_file"),
        ("bash", "{not json", "error: arguments of bash are not valid JSON"),
        ("bash", "[1, 2]", "error: arguments of bash must be a JSON object, got list"),
        ("bash", {}, "error: bash is missing required argument(s): command"),
        ("read_file", {"path": "a", "mode": "r"}, "error: read_file got unknown argument(s): mode"),
        ("write_file", {"path": "a", "content": 3}, "error: argument 'content' of write_file must be a string"),
        ("read_file", {"path": "/etc/passwd"}, "error: path '/etc/passwd' is absolute"),
        ("read_file", {"path": "minilib/../../x"}, "error: path 'minilib/../../x' leaves the workspace"),
        ("write_file", {"path": "../x", "content": ""}, "error: path '../x' leaves the workspace"),
        ("read_file", {"path": "missing.py"}, "error: cannot read missing.py"),
        ("read_file", {"path": "minilib"}, "error: 'minilib' is a directory"),
        (
            "str_replace",
            {"path": "minilib/core.py", "old": "return", "new": "x"},
            "error: `old` occurs 9 times in 'minilib/core.py'; it must occur exactly once",
        ),
        ("str_replace", {"path": "minilib/core.py", "old": "nowhere", "new": "x"}, "error: `old` occurs 0 times"),
    ],
)
def test_bad_calls_become_error_observations(sb, name, args, message):
    before = sb.snapshot()
    out = execute_tool_call(sb, name, args if isinstance(args, str) else json.dumps(args))
    assert out.content.startswith(message), out.content
    assert (out.ok, out.ended) == (False, False)
    assert sb.snapshot() == before


def test_symlink_out_of_workspace_is_not_followed(sb):
    assert call(sb, "bash", command="ln -s /etc/passwd leak").ok
    out = call(sb, "read_file", path="leak")
    assert out.content.startswith("error: ") and "root:" not in out.content


def test_huge_output_is_truncated_with_marker(sb):
    out = execute_tool_call(sb, "bash", json.dumps({"command": "seq 1 20000"}), max_output=1000)
    assert len(out.content) < 1100
    assert out.content.startswith("exit code: 0\nstdout:\n1\n2\n")
    assert "[... truncated " in out.content
    assert out.content.endswith("[... stdout cut by the sandbox: 108894 bytes in total ...]\n")
    small = execute_tool_call(sb, "bash", json.dumps({"command": "seq 1 2000"}), max_output=1000).content
    assert "[... truncated " in small and small.endswith("1999\n2000\n")


def test_submit_ends_and_empty_arguments_are_accepted(sb):
    for raw in ("{}", "", None):
        assert execute_tool_call(sb, "submit", raw) == ("submitted", True, True, None)


def test_same_calls_on_fresh_sandboxes_give_same_observations(simple_task):
    calls = [
        ("bash", {"command": "ls -R; python -c 'print(2**10)'"}),
        ("str_replace", {"path": "minilib/core.py", "old": "if x <= hi:", "new": "if x > hi:"}),
        ("read_file", {"path": "minilib/core.py"}),
        ("bash", {"command": "git status --short 2>&1; cat minilib/core.py | wc -l"}),
    ]
    runs = []
    for _ in range(2):
        with open_sandbox(simple_task.workspace_dir, backend="bwrap") as sb:
            runs.append([execute_tool_call(sb, n, json.dumps(a)) for n, a in calls])
    assert runs[0] == runs[1]
