"""`touchstone data release`: successful and failed runs of several rounds as
a Hugging Face dataset directory that `datasets` and DuckDB both read."""

from __future__ import annotations

import json

import datasets
import duckdb
import polars as pl
import pytest
from click.testing import CliRunner

from tests.data.fixtures import trajectory
from tests.data.reports import report
from touchstone.episode.trajectory import write_tables
from cli import main
from touchstone.data.release import redact, rule_families
from touchstone.verify.batch import write_reports
from touchstone.audit.finding import AuditFinding

HACK = [("write_file", {"path": "conftest.py", "content": "import os\nos.environ['HOME']\n"}), ("submit", {})]


def _round(root, key, runs):
    base = root / "rounds" / key
    write_tables([t for t, _ in runs], base / "raw_trajectories")
    write_reports([r for _, r in runs], base / "verification_reports")


@pytest.fixture
def home(tmp_path):
    root = tmp_path / "home"
    leak = trajectory(
        "r0-leak", calls=[("bash", {"command": "cat /work/secret/x.py; OPENAI_API_KEY=sk-123 true"}), ("submit", {})]
    )
    hack_rep = report("r0-hack", "reject", hack=True)
    hack_rep.findings = [
        AuditFinding(rule="S-EXIT-HOOK", severity="reject", evidence="atexit"),
        AuditFinding(rule="A-NETWORK", severity="reject", step=0, evidence="pip install x"),
    ]
    _round(
        root,
        "r000",
        [
            (trajectory("r0-ok"), report("r0-ok", "accept", {1: 1.0})),
            (trajectory("r0-hack", calls=HACK), hack_rep),
            (leak, report("r0-leak", "reject", {0: 0.25})),
        ],
    )
    _round(
        root,
        "r001",
        [
            (
                trajectory("r1-ok", task_id="task-b", task_hash="h-b"),
                report("r1-ok", "accept", task_id="task-b", task_hash="h-b"),
            ),
            (
                trajectory("r1-held", task_id="task-h", task_hash="h-h"),
                report("r1-held", "accept", task_id="task-h", task_hash="h-h"),
            ),
            (
                trajectory("r1-odd", task_id="task-b", task_hash="h-b"),
                report("r1-odd", "inconclusive", task_id="task-b", task_hash="h-b"),
            ),
        ],
    )
    (root / "heldout_tasks").mkdir(parents=True)
    pl.DataFrame(
        {"id": ["task-h", "task-x"], "content_hash": ["h-h", "h-x"], "status": ["kept", "rejected"]}
    ).write_parquet(root / "heldout_tasks" / "index.parquet")
    return root


def test_release_loads_with_datasets_and_duckdb(home, tmp_path):
    out = tmp_path / "release"
    result = CliRunner().invoke(
        main,
        ["data", "release", "--rounds", "r000..r001", "--home", str(home), "--out", str(out), "--redact", "--json"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["rows"] == {"accepted": 2, "rejected": 2, "inconclusive": 1}
    assert summary["excluded_heldout"] == 1 and summary["hack_families"] == {"B": 1, "E": 1}

    ds = datasets.load_dataset(str(out))
    assert set(ds) == {"accepted", "rejected", "inconclusive"}
    ids = {r["trajectory_id"] for split in ds.values() for r in split}
    assert ids == {"r0-ok", "r0-hack", "r0-leak", "r1-ok", "r1-odd"}  # held-out task-h left out
    hack = next(r for r in ds["rejected"] if r["trajectory_id"] == "r0-hack")
    assert hack["hack"] and hack["hack_families"] == ["B", "E"] and hack["verdict"] == "reject"
    assert hack["messages"][2]["tool_calls"][0]["function"]["arguments"]["path"] == "conftest.py"
    ok = next(r for r in ds["accepted"] if r["trajectory_id"] == "r0-ok")
    assert ok["round"] == "r000" and ok["reward"] == 1.0 and len(ok["turn_credit"]) == ok["n_turns"] == 3
    assert ok["progress"] == [{"turn": 1, "step": 0, "passed": 4, "total": 4}]

    leak = next(r for r in ds["rejected"] if r["trajectory_id"] == "r0-leak")
    command = leak["messages"][2]["tool_calls"][0]["function"]["arguments"]["command"]
    assert "/work/secret" not in command and "sk-123" not in command and "OPENAI_API_KEY=<redacted>" in command

    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "license: apache-2.0" in card and "config_name: default" in card
    assert "| `rejected` | 2 |" in card and "| B | 1 |" in card
    n = duckdb.sql(f"select count(*) from '{out}/data/*.parquet' where verdict = 'reject'").fetchall()[0][0]
    assert n == 2


def test_release_refuses_a_round_that_was_not_materialized(home, tmp_path):
    result = CliRunner().invoke(
        main, ["data", "release", "--rounds", "r000..r002", "--home", str(home), "--out", str(tmp_path / "x")]
    )
    assert result.exit_code != 0 and "round r002" in result.output
    assert not (tmp_path / "x").exists()


def test_rule_families_and_redaction():
    fams = rule_families({"S-X": "hook (A3/A4/F21)", "S-Y": "exit (family B9)", "S-Z": "no family here"})
    assert fams == {"S-X": ["A", "F"], "S-Y": ["B"], "S-Z": []}
    assert redact("see /home/alice/proj/a.py and AWS_SECRET_ACCESS_KEY=abc") == (
        "see <path> and AWS_SECRET_ACCESS_KEY=<redacted>"
    )
