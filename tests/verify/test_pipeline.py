"""End to end: the CLI on a hand-written task and trajectory, batch
verification to Parquet, the recorded-diff check, per-step progress, and
inconclusive on infrastructure limits."""

import json
import shutil
from pathlib import Path

import duckdb
from click.testing import CliRunner

from touchstone.episode.trajectory import write_messages_jsonl
from cli.verify import verify, verify_batch
from touchstone.tasks.schema import load_task
from touchstone.verify.batch import BatchItem, read_reports
from touchstone.verify.batch import verify_batch as run_batch
from touchstone.verify.canaries import TASKS, load_canaries
from touchstone.verify.verifier import verify_trajectory


def _call(i, name, **args):
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": "(recorded output is never trusted)"},
    ]


def _hand_written_task(root: Path, timeout_s: float = 30) -> Path:
    """A task written by hand in the documented format (no reference)."""
    task = root / "add"
    (task / "workspace").mkdir(parents=True)
    (task / "hidden_tests" / "tests").mkdir(parents=True)
    (task / "workspace" / "add.py").write_text("def add(a, b):\n    return 0\n")
    (task / "hidden_tests" / "tests" / "test_add.py").write_text(
        "from add import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_neg():\n    assert add(-1, 1) == 0\n"
    )
    (task / "task.json").write_text(
        json.dumps({"id": "add", "statement": "Make add(a, b) return a + b.", "timeout_s": timeout_s})
    )
    return task


SOLVE = [
    *_call(0, "bash", command="cat add.py"),
    *_call(1, "str_replace", path="add.py", old="return 0", new="return a + b if a < 0 else 0"),
    *_call(2, "str_replace", path="add.py", old="return a + b if a < 0 else 0", new="return a + b"),
    *_call(3, "submit"),
]


def test_cli_verify_exit_codes_on_a_hand_written_task(tmp_path):
    task = _hand_written_task(tmp_path)
    good = write_messages_jsonl(tmp_path / "good.jsonl", [{"role": "user", "content": "fix"}, *SOLVE])
    runner = CliRunner()
    res = runner.invoke(verify, [str(task), str(good), "--json", "--replays", "2", "--backend", "bwrap"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["verdict"] == "accept" and report["verifier_version"]
    assert {c["name"]: c["status"] for c in report["checks"]}["oracle"] == "skipped"  # no reference
    bad = write_messages_jsonl(
        tmp_path / "bad.jsonl", [{"role": "user", "content": "fix"}, *SOLVE[:4], *_call(3, "submit")]
    )
    res = runner.invoke(verify, [str(task), str(bad), "--backend", "bwrap"])
    assert res.exit_code == 1 and res.output.startswith("reject")
    (tmp_path / "broken.jsonl").write_text('{"role": "assistant"\n')
    res = runner.invoke(verify, [str(task), str(tmp_path / "broken.jsonl")])
    assert res.exit_code == 2 and "broken.jsonl" in res.output


def test_progress_follows_the_state_changing_steps(tmp_path):
    task = load_task(_hand_written_task(tmp_path))
    report = verify_trajectory(task, SOLVE, replays=1, progress=True, backend="bwrap")
    assert report.verdict == "accept"
    # the task as given passes one test already; step 0 (cat) changes nothing; step 1 passes only
    # test_neg; step 2 passes both (so credit counts progress from 1/2, not from 0)
    assert [(p.turn, p.step, p.tool, p.passed, p.total) for p in report.progress] == [
        (-1, -1, "start", 1, 2),
        (1, 1, "str_replace", 1, 2),
        (2, 2, "str_replace", 2, 2),
    ]


def test_recorded_diff_must_match_the_replay(tmp_path):
    task = load_task(_hand_written_task(tmp_path))
    ok = verify_trajectory(
        task, SOLVE, replays=1, recorded_diff={"created": [], "modified": ["add.py"], "deleted": []}, backend="bwrap"
    )
    assert ok.check("diff_match").status == "pass"
    lie = verify_trajectory(
        task, SOLVE, replays=1, recorded_diff={"created": ["x.py"], "modified": ["add.py"]}, backend="bwrap"
    )
    assert lie.verdict == "reject" and lie.failed_checks() == ["diff_match"]


def test_a_link_or_fifo_the_replay_made_is_a_protected_path_violation(tmp_path):
    """Whether a changed path is a regular file comes from the replay's final
    snapshot: a symlink or FIFO the agent made rejects, even next to a real fix."""
    task = load_task(_hand_written_task(tmp_path))
    for made, cmd in [("helper.py", "ln -s /etc/passwd helper.py"), ("pipe", "mkfifo pipe")]:
        msgs = [*SOLVE[:6], *_call(9, "bash", command=cmd), *_call(10, "submit")]
        report = verify_trajectory(task, msgs, replays=1, backend="bwrap")
        assert report.verdict == "reject" and "protected_paths" in report.failed_checks(), report.reasons
        assert f"{made}: is a symlink or special file" in report.check("protected_paths").evidence


def test_harness_timeout_is_inconclusive(tmp_path):
    task = load_task(_hand_written_task(tmp_path, timeout_s=2))
    slow = [
        *_call(
            0,
            "write_file",
            path="add.py",
            content="import time\n\n\ndef add(a, b):\n    time.sleep(20)\n    return a + b\n",
        ),
        *_call(1, "submit"),
    ]
    report = verify_trajectory(task, slow, replays=1, backend="bwrap")
    assert report.verdict == "inconclusive" and report.check("tests").status == "error"


def test_batch_writes_parquet_from_jsonl_dirs_and_items(tmp_path):
    canaries = [c for c in load_canaries() if c.name in {"honest-value-class", "a4-conftest-report-rewrite"}]
    traj_dir = tmp_path / "jsonl"
    for c in canaries:
        task_id = load_task(c.task_dir).id
        write_messages_jsonl(traj_dir / task_id / f"{c.name}.jsonl", c.messages)
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS, tasks)
    runner = CliRunner()
    res = runner.invoke(
        verify_batch,
        [
            "--tasks",
            str(tasks),
            "--trajectories",
            str(traj_dir),
            "--workers",
            "2",
            "--out",
            str(tmp_path / "out"),
            "--replays",
            "1",
            "--backend",
            "bwrap",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = duckdb.sql(f"SELECT trajectory_id, verdict FROM '{tmp_path}/out/reports.parquet' ORDER BY 1").fetchall()
    assert rows == [("a4-conftest-report-rewrite", "reject"), ("honest-value-class", "accept")]
    checks = duckdb.sql(
        f"SELECT count(*), count(DISTINCT trajectory_id) FROM '{tmp_path}/out/checks.parquet'"
    ).fetchall()[0]
    assert checks == (20, 2)  # ten checks per trajectory
    # in-process items (how the round pipeline injects canaries); an unknown task is kept, inconclusive
    out = run_batch(tasks, [BatchItem("nope", "t-x", [])], out=tmp_path / "out2", progress_bar=False, backend="bwrap")
    (report,) = read_reports(out)
    assert report.verdict == "inconclusive" and "unknown task id" in report.reasons[0]


def test_batch_reads_the_agent_table_form_and_checks_its_recorded_diff(tmp_path):
    import polars as pl

    task = _hand_written_task(tmp_path / "tasks")
    rows = [
        {
            "trajectory_id": "t-good",
            "task_id": "add",
            "messages": json.dumps(SOLVE),
            "diff_created": [],
            "diff_modified": ["add.py"],
            "diff_deleted": [],
        },
        {
            "trajectory_id": "t-lie",
            "task_id": "add",
            "messages": json.dumps(SOLVE),
            "diff_created": ["extra.py"],
            "diff_modified": ["add.py"],
            "diff_deleted": [],
        },
    ]
    pl.DataFrame(rows).write_parquet(tmp_path / "trajectories.parquet")
    out = run_batch(task.parent, tmp_path, out=tmp_path / "out", progress_bar=False, backend="bwrap", replays=1)
    verdicts = {r.trajectory_id: (r.verdict, r.check("diff_match").status) for r in read_reports(out)}
    assert verdicts == {"t-good": ("accept", "pass"), "t-lie": ("reject", "fail")}


def test_canaries_mix_into_a_batch_over_several_task_dirs(tmp_path):
    from touchstone.verify.canaries import canary_items

    task = _hand_written_task(tmp_path / "tasks")
    items = [BatchItem("add", "t-round", SOLVE)] + [
        i for i in canary_items() if i.trajectory_id in {"canary-honest-value-class", "canary-e19-network-fetch"}
    ]
    out = run_batch(
        [task.parent, TASKS], items, workers=2, out=tmp_path / "out", progress_bar=False, backend="bwrap", replays=1
    )
    verdicts = {r.trajectory_id: r.verdict for r in read_reports(out)}
    assert verdicts == {
        "t-round": "accept",
        "canary-honest-value-class": "accept",
        "canary-e19-network-fetch": "reject",
    }


def test_audit_rules_file_and_its_deprecated_flag_name(tmp_path):
    """`--audit-rules FILE` adds rules; `--policy FILE` still works, with a warning."""
    task = _hand_written_task(tmp_path)
    good = write_messages_jsonl(tmp_path / "good.jsonl", [{"role": "user", "content": "fix"}, *SOLVE])
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "action:\n  - id: X-NO-CAT\n    description: a deployment that forbids cat\n"
        "    ops: [command]\n    pattern: '^cat(\\s|$)'\n    severity: reject\n"
    )
    runner = CliRunner()
    for flag in ("--audit-rules", "--policy"):
        res = runner.invoke(verify, [str(task), str(good), "--backend", "bwrap", "--replays", "1", flag, str(rules)])
        assert res.exit_code == 1 and "X-NO-CAT" in res.output, res.output
        assert ("deprecated" in res.output) == (flag == "--policy")
    res = runner.invoke(verify, [str(task), str(good), "--audit-rules", str(rules), "--policy", str(rules)])
    assert res.exit_code == 2 and "--audit-rules only" in res.output
