"""`touchstone data export`: a built round as TRL, OpenAI and ShareGPT JSONL."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.data.fixtures import trajectory, write_round
from tests.data.reports import report
from cli import main
from touchstone.data.build import build_datasets

FIX = [("read_file", {"path": "calc.py"}), ("str_replace", {"path": "calc.py", "old": "-", "new": "+"}), ("submit", {})]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    trajs = [trajectory("ok", calls=FIX), trajectory("bad", calls=FIX[:1] + [("submit", {})])]
    files = write_round(tmp, trajs, [report("ok", "accept", {1: 1.0}), report("bad", "reject")])
    build_datasets(*files, tmp / "data", round_key="r7")
    return tmp / "data"


def _export(built, tmp_path, *args):
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["data", "export", str(built), "--out", str(out), *args])
    return result, [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def test_openai_format_has_string_arguments(built, tmp_path):
    result, rows = _export(built, tmp_path, "--format", "openai")
    assert result.exit_code == 0, result.output
    (row,) = rows
    call = row["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "read_file", "arguments": '{"path": "calc.py"}'}
    assert row["messages"][3] == {"role": "tool", "tool_call_id": "call_0", "content": "read_file output 0"}
    assert row["tools"][0]["function"]["name"] == "bash" and row["lineage"]["round"] == "r7"


def test_sharegpt_turns(built, tmp_path):
    _, (row,) = _export(built, tmp_path, "--format", "sharegpt")
    roles = [t["from"] for t in row["conversations"]]
    assert roles == [
        "human",
        "function_call",
        "observation",
        "function_call",
        "observation",
        "function_call",
        "observation",
    ]
    assert json.loads(row["conversations"][1]["value"]) == {"name": "read_file", "arguments": {"path": "calc.py"}}
    assert row["system"] == "You are a coding agent." and json.loads(row["tools"])[0]["type"] == "function"


def test_trl_format_covers_preference_data(built, tmp_path):
    result, rows = _export(built, tmp_path, "--format", "trl", "--dataset", "dpo")
    assert result.exit_code == 0, result.output
    (row,) = rows
    assert set(row) >= {"prompt", "chosen", "rejected", "tools", "lineage"}
    assert row["chosen"][0]["tool_calls"][0]["function"]["arguments"] == {"path": "calc.py"}
    assert "tool_call_id" not in row["chosen"][0]  # no null keys for templates to trip on


def test_formats_that_cannot_hold_pairs_say_so(built, tmp_path):
    result, _ = _export(built, tmp_path, "--format", "sharegpt", "--dataset", "dpo")
    assert result.exit_code != 0 and "conversations only" in result.output
