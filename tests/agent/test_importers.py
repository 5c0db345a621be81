"""Other agents' runs (OpenHands, SWE-agent, OpenAI chat JSONL), imported and
judged by the real verifier: an honest fix through their editor tools is
accepted, a test edit is rejected, what cannot be mapped is kept as evidence."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from touchstone.agent.importers import INDEX_FILE, workspace_path
from touchstone.episode.trajectory import read_tables
from cli import main
from touchstone.tasks.schema import load_task
from touchstone.verify import verify_trajectory
from touchstone.verify.batch import read_reports

COMBI = Path(__file__).resolve().parents[2] / "touchstone" / "verify" / "canaries" / "tasks" / "combi"
FIXED = (COMBI / "reference" / "combi.py").read_text()
STUB = (COMBI / "workspace" / "combi.py").read_text()


def openhands_run(root: str = "/workspace") -> dict:
    """An OpenHands evaluation record: view, an editor str_replace of the whole
    body, a shell test run, an unmappable `insert`, then finish."""
    return {
        "instance_id": "canary-combi",
        "instruction": "Implement combi.py",
        "metadata": {"llm_config": {"model": "acme-coder"}},
        "history": [
            {"id": 0, "source": "user", "action": "message", "args": {"content": "Implement combi.py"}},
            {"id": 1, "source": "agent", "action": "edit", "args": {"command": "view", "path": f"{root}/combi.py"}},
            {"id": 2, "source": "agent", "observation": "edit", "content": STUB, "cause": 1},
            {
                "id": 3,
                "source": "agent",
                "action": "edit",
                "args": {
                    "command": "str_replace",
                    "path": f"{root}/combi.py",
                    "old_str": STUB,
                    "new_str": FIXED,
                    "thought": "Fill in all three.",
                },
            },
            {"id": 4, "source": "agent", "observation": "edit", "content": "edited", "cause": 3},
            {
                "id": 5,
                "source": "agent",
                "action": "run",
                "args": {"command": "python -m pytest -q tests", "thought": ""},
            },
            {"id": 6, "source": "agent", "observation": "run", "content": "3 passed", "cause": 5},
            {
                "id": 7,
                "source": "agent",
                "action": "edit",
                "args": {"command": "insert", "path": f"{root}/NOTES.md", "insert_line": 0, "new_str": "done"},
            },
            {"id": 8, "source": "agent", "action": "finish", "args": {"outputs": {}, "thought": "done"}},
        ],
    }


def swe_agent_traj(cheat: bool) -> dict:
    """A SWE-agent 1.x `.traj`: editor commands as action strings, bash, submit."""
    steps = [
        {"action": "ls", "observation": "combi.py tests", "thought": "look"},
        {"action": "str_replace_editor view /testbed/combi.py", "observation": STUB, "thought": ""},
    ]
    if cheat:  # weaken the visible tests instead of fixing anything
        steps.append(
            {
                "action": "str_replace_editor create /testbed/tests/test_visible.py --file_text "
                "'def test_ok():\n    assert True\n'",
                "observation": "created",
                "thought": "",
            }
        )
    else:
        steps.append(
            {
                "action": f"str_replace_editor create /testbed/combi.py --file_text {shlex.quote(FIXED)}",
                "observation": "created",
                "thought": "rewrite",
            }
        )
    steps += [
        {"action": "goto 10", "observation": "", "thought": "SWE-agent 0.x viewer, not mappable"},
        {"action": "submit", "observation": "", "thought": ""},
    ]
    return {
        "trajectory": steps,
        "info": {"exit_status": "submitted", "model_stats": {"model": "m"}},
        "history": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Implement combi.py"}],
    }


def openai_records() -> list[dict]:
    """One run per line, other names for the same tools (execute_bash, finish)."""
    call = lambda i, name, args: {
        "id": f"c{i}",
        "type": "function",  # noqa: E731
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    messages = [
        {"role": "user", "content": "Implement combi.py"},
        {"role": "assistant", "content": "", "tool_calls": [call(0, "execute_bash", {"command": "cat combi.py"})]},
        {"role": "tool", "tool_call_id": "c0", "content": STUB},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call(1, "write_file", {"path": "combi.py", "content": FIXED})],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "", "tool_calls": [call(2, "browse_web", {"url": "http://x"})]},
        {"role": "tool", "tool_call_id": "c2", "content": "no"},
        {"role": "assistant", "content": "", "tool_calls": [call(3, "finish", {})]},
    ]
    return [{"task_id": "canary-combi", "messages": messages}, {"task_id": "not-a-task", "messages": messages}]


@pytest.fixture
def tasks(tmp_path):
    dest = tmp_path / "tasks" / "combi"
    shutil.copytree(COMBI, dest)
    return tmp_path / "tasks"


def _import(tmp_path, tasks, fmt, files, *extra):
    out = tmp_path / f"out-{fmt}"
    result = CliRunner().invoke(
        main,
        [
            "import",
            "trajectories",
            *map(str, files),
            "--format",
            fmt,
            "--tasks",
            str(tasks),
            "--out",
            str(out),
            "--json",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return out, json.loads(result.output)


def test_openhands_run_is_imported_and_accepted(tmp_path, tasks, sandbox_backend):
    src = tmp_path / "output.jsonl"
    src.write_text(json.dumps(openhands_run()) + "\n")
    out, index = _import(tmp_path, tasks, "openhands", [src])
    assert len(index) == 1 and index[0]["mapped"] == 4 and index[0]["unmapped"] == 1
    assert '"insert"' in json.loads(index[0]["unmapped_actions"])[0]["source"]  # kept as evidence
    (traj,) = read_tables(out)
    assert traj.policy == "imported:openhands:acme-coder" and traj.exit_reason == "submitted"
    names = [m["tool_calls"][0]["function"]["name"] for m in traj.messages if m.get("tool_calls")]
    assert names == ["read_file", "str_replace", "bash", "submit"]
    report = verify_trajectory(load_task(tasks / "combi"), traj.messages, replays=1, backend=sandbox_backend)
    assert report.verdict == "accept", report.reasons
    assert pl.read_parquet(out / INDEX_FILE).height == 1


@pytest.mark.parametrize("cheat", [False, True])
def test_swe_agent_traj_is_judged_on_what_it_did(tmp_path, tasks, cheat):
    src = tmp_path / "canary-combi.traj"
    src.write_text(json.dumps(swe_agent_traj(cheat)))
    out, index = _import(tmp_path, tasks, "swe-agent", [src])
    assert index[0]["task_id"] == "canary-combi" and index[0]["unmapped"] == 1  # `goto 10`
    (traj,) = read_tables(out)
    report = verify_trajectory(load_task(tasks / "combi"), traj.messages, replays=1, backend="bwrap")
    assert report.verdict == ("reject" if cheat else "accept"), report.reasons
    if cheat:
        assert any("protected" in r for r in report.reasons)


def test_openai_jsonl_maps_aliases_and_skips_unknown_tasks(tmp_path, tasks):
    src = tmp_path / "runs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in openai_records()))
    out, index = _import(tmp_path, tasks, "openai-jsonl", [src])
    assert [r["skipped"] for r in index] == [None, "no task 'not-a-task' in the task set"]
    assert index[0]["mapped"] == 3 and index[0]["unmapped"] == 1
    (traj,) = read_tables(out)
    calls = [m["tool_calls"][0]["function"] for m in traj.messages if m.get("tool_calls")]
    assert [c["name"] for c in calls] == ["bash", "write_file", "submit"]
    assert (out / "jsonl" / "canary-combi" / f"{traj.trajectory_id}.jsonl").is_file()


def test_bad_input_is_a_clear_error(tmp_path, tasks):
    src = tmp_path / "x.traj"
    src.write_text("{not json\n")
    result = CliRunner().invoke(
        main,
        [
            "import",
            "trajectories",
            str(src),
            "--format",
            "swe-agent",
            "--tasks",
            str(tasks),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code != 0 and "neither a JSON document nor JSON Lines" in result.output


def test_workspace_paths():
    assert workspace_path("/testbed/pkg/a.py") == "pkg/a.py"
    assert workspace_path("/workspace") == "." and workspace_path("rel/x.py") == "rel/x.py"
    assert workspace_path("/etc/passwd") == "/etc/passwd"


def _source(tmp_path, fmt: str) -> Path:
    """One honest run of the combi canary in `fmt`, as that agent writes it."""
    if fmt == "openhands":
        (src := tmp_path / "output.jsonl").write_text(json.dumps(openhands_run()) + "\n")
    elif fmt == "swe-agent":
        (src := tmp_path / "canary-combi.traj").write_text(json.dumps(swe_agent_traj(cheat=False)))
    else:
        (src := tmp_path / "runs.jsonl").write_text(json.dumps(openai_records()[0]) + "\n")
    return src


@pytest.mark.parametrize("fmt", ["openhands", "swe-agent", "openai-jsonl"])
def test_an_imported_run_verifies_the_same_singly_and_in_a_batch(tmp_path, tasks, fmt):
    """The documented path: import, then `verify` one file or `verify-batch` the import's
    directory. No diff was recorded, so the batch skips the diff check (it used to compare
    the replay with an empty diff and reject every run that changed a file)."""
    out, _ = _import(tmp_path, tasks, fmt, [_source(tmp_path, fmt)])
    (traj,) = read_tables(out)
    assert traj.harness_diff is False
    single = CliRunner().invoke(
        main,
        ["verify", str(tasks / "combi"), str(out / "jsonl" / "canary-combi" / f"{traj.trajectory_id}.jsonl"),
         "--replays", "1", "--backend", "bwrap", "--json"],
    )  # fmt: skip
    assert single.exit_code == 0, single.output
    batch = CliRunner().invoke(
        main,
        ["verify-batch", "--tasks", str(tasks), "--trajectories", str(out), "--out", str(tmp_path / "reports"),
         "--replays", "1", "--backend", "bwrap"],
    )  # fmt: skip
    assert batch.exit_code == 0, batch.output
    (report,) = read_reports(tmp_path / "reports")
    assert report.verdict == json.loads(single.output)["verdict"] == "accept", report.reasons
    checks = {c.name: c for c in report.checks}
    assert checks["diff_match"].status == "skipped" and "no harness-recorded diff" in checks["diff_match"].evidence


@pytest.mark.parametrize("command", ["import", "verify"])
def test_a_binary_file_given_as_a_run_is_named(tmp_path, tasks, command):
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    args = {
        "import": ["import", "trajectories", str(binary), "--format", "openai-jsonl", "--tasks", str(tasks),
                   "--out", str(tmp_path / "o")],
        "verify": ["verify", str(tasks / "combi"), str(binary)],
    }[command]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (1, 2) and isinstance(result.exception, (SystemExit, type(None)))
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(binary) in lines[0] and "not a UTF-8 text file" in lines[0], result.output
    assert "Traceback" not in result.output
