"""The trajectory record: JSONL round trip, validation, table form, replay rule."""

from __future__ import annotations

import json

import pytest

from touchstone.episode.tools import NOT_EXECUTED, TOOL_SCHEMAS
from touchstone.episode.trajectory import (
    Sampling,
    StepRecord,
    Trajectory,
    TrajectoryError,
    TurnRecord,
    executed_tool_calls,
    read_messages_jsonl,
    read_tables,
    trajectory_id,
    write_messages_jsonl,
    write_tables,
)
from touchstone.sandbox import WorkspaceDiff


def call(cid, name, arguments):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


MESSAGES = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "fix `f` — ünïcode ✓"},
    {"role": "assistant", "content": "look", "tool_calls": [call("c0", "bash", '{"command": "ls"}')]},
    {"role": "tool", "tool_call_id": "c0", "content": "exit code: 0\nstdout:\na.py\n"},
    {"role": "assistant", "content": "no call here", "reasoning_content": "hmm"},
    {"role": "user", "content": "error: your reply contained no tool call."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [call("c1", "read_file", '{"path": "a.py"'), call("c2", "submit", "{}")],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "error: arguments of read_file are not valid JSON"},
    {"role": "tool", "tool_call_id": "c2", "content": NOT_EXECUTED},
    {"role": "assistant", "content": None, "tool_calls": [call("c3", "submit", "{}")]},
    {"role": "tool", "tool_call_id": "c3", "content": "submitted"},
    {"role": "assistant", "content": "after the end", "tool_calls": [call("c4", "bash", '{"command": "rm -rf ."}')]},
]


def test_jsonl_round_trip_is_identical(tmp_path):
    path = write_messages_jsonl(tmp_path / "a" / "t.jsonl", MESSAGES)
    assert read_messages_jsonl(path) == MESSAGES
    assert len(path.read_text(encoding="utf-8").splitlines()) == len(MESSAGES)
    assert [p.name for p in path.parent.iterdir()] == ["t.jsonl"]  # no temp file left


@pytest.mark.parametrize(
    "line, problem",
    [
        ('{"role": "user", "content": "x"}\n{oops\n', "t.jsonl:2: not valid JSON"),
        ("[1, 2]\n", "t.jsonl:1: expected a JSON object, got list"),
        ('{"role": "robot", "content": "x"}\n', "message 0 is not an OpenAI chat message"),
        ('{"role": "tool", "content": "x"}\n', "message 0 (role tool) has no tool_call_id"),
        (
            '{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "bash"}}]}\n',
            "message 0 is not an OpenAI chat message",
        ),
    ],
)
def test_malformed_jsonl_is_refused_with_location(tmp_path, line, problem):
    path = tmp_path / "t.jsonl"
    path.write_text(line)
    with pytest.raises(TrajectoryError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read_messages_jsonl(path)


def test_replay_rule_executes_first_call_per_turn_until_submit():
    calls = executed_tool_calls(MESSAGES)
    assert [(c.turn, c.step, c.tool_call_id, c.name) for c in calls] == [
        (0, 0, "c0", "bash"),
        (2, 1, "c1", "read_file"),
        (3, 2, "c3", "submit"),
    ]
    assert calls[1].arguments == '{"path": "a.py"' and calls[1].recorded_output.startswith("error: ")


def sample_trajectory(tid: str, steps: int = 2) -> Trajectory:
    return Trajectory(
        trajectory_id=tid,
        task_id="task-a",
        task_hash="h" * 64,
        attempt=1,
        policy="hf:/ckpt",
        checkpoint_hash="c" * 64,
        sampling=Sampling(temperature=0.5, seed=8),
        backend="bwrap",
        image_digest="sha256:abc",
        messages=MESSAGES,
        tools=TOOL_SCHEMAS,
        turns=[
            TurnRecord(turn=0, prompt_ids=[1, 2], completion_ids=[3], logprobs=[-0.5], completion_tokens=1),
            TurnRecord(turn=1),
        ],
        steps=[
            StepRecord(
                step=i,
                turn=i,
                tool_call_id=f"c{i}",
                tool="bash",
                arguments="{}",
                ok=i == 0,
                ended=False,
                exit_code=i,
                output_chars=10,
                duration_s=0.25,
            )
            for i in range(steps)
        ],
        exit_reason="max_turns",
        diff=WorkspaceDiff(modified=["a.py"], patch="--- a/a.py\n+++ b/a.py\n"),
        started_at="2026-01-01T00:00:00+00:00",
        wall_s=1.5,
        policy_s=0.5,
        sandbox_s=1.0,
        touchstone_version="0.1.0",
    )


def test_table_round_trip(tmp_path):
    bare = sample_trajectory("t-a", steps=0).model_copy(
        update={"checkpoint_hash": None, "image_digest": None, "turns": [], "diff": WorkspaceDiff()}
    )
    failed = sample_trajectory("t-c").model_copy(
        update={
            "exit_reason": "sandbox_error",
            "error": "sandbox error: ünïcode",
            "environment_digest": "sha256:env",
            "diff": WorkspaceDiff(created=["b.bin", "ln"], deleted=["c.py"], binary=["b.bin", "ln"]),
        }
    )
    trajs = [sample_trajectory("t-b"), bare, failed]
    write_tables(trajs, tmp_path)
    back = read_tables(tmp_path)
    assert [t.trajectory_id for t in back] == ["t-a", "t-b", "t-c"]
    assert back == [bare, trajs[0], failed]
    assert json.loads(json.dumps(back[1].messages)) == MESSAGES


def test_the_table_columns_are_the_documented_ones(tmp_path):
    """The columns derive from the model: the sampling and the diff flattened,
    chat and turns as JSON text, counts of turns and steps."""
    import polars as pl

    write_tables([sample_trajectory("t-a")], tmp_path)
    row = pl.read_parquet(tmp_path / "trajectories.parquet").row(0, named=True)
    assert (row["temperature"], row["seed"], row["n_turns"], row["n_steps"]) == (0.5, 8, 2, 2)
    assert (row["diff_modified"], row["diff_binary"]) == (["a.py"], [])
    assert json.loads(row["turns"])[0]["logprobs"] == [-0.5] and json.loads(row["messages"]) == MESSAGES
    assert "steps" not in row and "sampling" not in row and "diff" not in row
    steps = pl.read_parquet(tmp_path / "steps.parquet")
    assert steps.columns[:3] == ["trajectory_id", "task_id", "step"] and steps["task_id"].to_list() == ["task-a"] * 2


def test_a_table_written_before_a_column_existed_still_reads(tmp_path):
    import polars as pl

    t = sample_trajectory("t-a")
    write_tables([t], tmp_path)
    path = tmp_path / "trajectories.parquet"
    pl.read_parquet(path).drop("environment_digest", "diff_binary").write_parquet(path)
    assert read_tables(tmp_path) == [t]
    pl.read_parquet(path).drop("exit_reason").write_parquet(path)
    with pytest.raises(TrajectoryError, match="exit_reason"):
        read_tables(tmp_path)


def test_empty_tables_have_the_columns(tmp_path):
    import polars as pl

    write_tables([], tmp_path)
    assert "exit_reason" in pl.read_parquet(tmp_path / "trajectories.parquet").columns
    assert "duration_s" in pl.read_parquet(tmp_path / "steps.parquet").columns


def test_trajectory_id_is_deterministic_and_sensitive():
    base = trajectory_id("t", "h", "teacher", 0, 0)
    assert base == trajectory_id("t", "h", "teacher", 0, 0)
    assert (
        len(
            {
                base,
                trajectory_id("t", "h2", "teacher", 0, 0),
                trajectory_id("t", "h", "hf:x", 0, 0),
                trajectory_id("t", "h", "teacher", 1, 0),
                trajectory_id("t", "h", "teacher", 0, 1),
            }
        )
        == 5
    )


def test_streamed_tables_hold_one_row_group_not_the_batch(tmp_path):
    """Peak Python memory while writing 4096 trajectories from a generator is about
    that of 1024 (both past one row group): the table is never assembled
    (rollout.solve streams its records)."""
    import tracemalloc

    import polars as pl

    from touchstone.episode.trajectory import stream_tables

    def peak(n: int) -> int:
        records = lambda: (sample_trajectory(f"t-{i:05d}") for i in range(n))  # noqa: E731
        tracemalloc.start()
        stream_tables(records, tmp_path / str(n))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    peak(10)  # first use: imports and caches
    small, large = peak(1024), peak(4096)
    assert large < 1.3 * small, (small, large)
    back = pl.read_parquet(tmp_path / "4096" / "trajectories.parquet", columns=["trajectory_id"])
    assert back["trajectory_id"].to_list() == [f"t-{i:05d}" for i in range(4096)]
    assert pl.read_parquet(tmp_path / "4096" / "steps.parquet").height == 4096 * len(sample_trajectory("t").steps)


def test_the_prompt_window_leaves_room_for_the_completion_but_keeps_half():
    assert Sampling().prompt_window() is None  # the whole conversation
    assert Sampling(max_tokens=192, context_window=1024).prompt_window() == 832
    assert Sampling(max_tokens=4096, context_window=1024).prompt_window() == 512
    with pytest.raises(ValueError):
        Sampling(context_window=-1)
