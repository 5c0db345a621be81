"""The ordinary mistakes of a working day end in one line that names the input
and the fix, with exit status 1 or 2 and no traceback (unless `--debug`), and
before anything is written. (A binary file given as a run: tests/agent/test_importers.py;
a second writer: tests/orchestration/test_one_writer.py.)"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import main
from tests.verify.test_pipeline import SOLVE, _call, _hand_written_task
from touchstone.episode.trajectory import write_messages_jsonl

NO_AWS = {  # an s3:// home on a machine with no credentials (and no metadata service to ask)
    "AWS_ACCESS_KEY_ID": None,
    "AWS_SECRET_ACCESS_KEY": None,
    "AWS_SESSION_TOKEN": None,
    "AWS_PROFILE": None,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
}


def _run(args: list[str], env: dict | None = None, code: tuple[int, ...] = (1, 2)) -> str:
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code in code, result.output
    assert isinstance(result.exception, (SystemExit, type(None))), result.exception
    # click's usage errors (exit 2) come after its "Usage: ..." and "Try ... --help" lines
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith(("Usage:", "Try '"))]
    assert "Traceback" not in result.output and len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize(("count", "named"), [("0", "add --control"), ("-1", "x>=0")])
def test_round_run_refuses_a_count_that_runs_nothing(tmp_path, count, named):
    line = _run(["round", "run", "--rounds", count], env={"TOUCHSTONE_HOME": str(tmp_path / "home")}, code=(2,))
    assert named in line
    assert not (tmp_path / "home").exists()  # nothing started


def test_data_release_refuses_a_backwards_range(tmp_path):
    line = _run(["data", "release", "--rounds", "r5..r2", "--out", str(tmp_path / "out")], code=(2,))
    assert "'r5..r2' runs backwards: write r2..r5" in line
    assert not (tmp_path / "out").exists()


def test_data_release_with_an_s3_home_reads_the_store_not_the_local_folder(tmp_path, monkeypatch):
    """The round exists in ./.touchstone only: a release of the s3:// home must not pick it up."""
    for asset in ("raw_trajectories", "verification_reports"):
        (tmp_path / ".touchstone" / "rounds" / "r000" / asset).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    line = _run(
        ["data", "release", "--rounds", "r000", "--out", str(tmp_path / "out")],
        env={"TOUCHSTONE_HOME": "s3://no-such-bucket/touchstone", **NO_AWS},
    )
    assert "s3://no-such-bucket/touchstone" in line and "AWS_ACCESS_KEY_ID" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["db", "SELECT 1"], ["round", "run"]])
def test_an_s3_home_without_credentials_says_what_to_set(tmp_path, command):
    env = {"TOUCHSTONE_HOME": "s3://bucket/touchstone", "TOUCHSTONE_LOCAL_HOME": str(tmp_path), **NO_AWS}
    line = _run(command, env=env, code=(1,))
    assert line.startswith("Error: data root s3://bucket/touchstone cannot be read or written (NoCredentialsError")
    assert "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in line


def test_an_unwritable_dagster_home_is_named(tmp_path):
    (tmp_path / "a-file").write_text("")
    home = tmp_path / "a-file" / "dagster_home"  # below a file: nobody, root included, can create it
    line = _run(["round", "list"], env={"DAGSTER_HOME": str(home)}, code=(1,))
    assert f"DAGSTER_HOME={home}: cannot write the Dagster instance there" in line
    assert "export DAGSTER_HOME as a directory you can write" in line


def test_a_call_of_an_unknown_tool_is_named_in_the_verdict(tmp_path):
    task = _hand_written_task(tmp_path)
    run = write_messages_jsonl(
        tmp_path / "run.jsonl", [{"role": "user", "content": "fix"}, *_call(0, "rm_everything", path="x"), *SOLVE]
    )
    result = CliRunner().invoke(main, ["verify", str(task), str(run), "--replays", "1", "--backend", "bwrap", "--json"])
    replay = next(c for c in json.loads(result.output)["checks"] if c["name"] == "replay")
    assert replay["evidence"].startswith("1 calls refused (step 0: unknown tool 'rm_everything')"), replay


def test_an_unexpected_error_is_one_line_unless_debug(tmp_path):
    line = _run(["data", "summary", str(tmp_path)], code=(1,))
    assert line.startswith("error: FileNotFoundError: ") and "`touchstone --debug ...`" in line
    debug = CliRunner().invoke(main, ["--debug", "data", "summary", str(tmp_path)])
    assert isinstance(debug.exception, FileNotFoundError)  # raised, with its traceback


def test_a_failed_round_says_its_cause_first(tmp_path):
    """Not ~190 lines of Dagster log before the cause: the cause, then where the log is."""
    config = tmp_path / "run.yaml"
    config.write_text("ops:\n  seed_sources:\n    config:\n      seeds: [no-such-seed]\n")
    env = {"TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    result = CliRunner().invoke(main, ["round", "run", "-c", str(config)], env=env)
    assert result.exit_code == 1 and "Traceback" not in result.output
    failure = result.output[result.output.index("sources failed") :].splitlines()
    assert failure[0].startswith("sources failed: step seed_sources: "), failure
    assert "SeedError: seed 'no-such-seed' is neither a directory" in failure[0]
    assert len(failure) == 2 and "touchstone --debug round run" in failure[1]
