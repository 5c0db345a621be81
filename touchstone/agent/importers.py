"""Other agents' trajectories as Touchstone trajectories, so the verifier can
replay them and `data build` can train on what it accepts.

Each format's actions are mapped onto Touchstone's five tools (docs/formats/
imported-trajectories.md has the tables). What cannot be mapped (an editor's
`insert` or `undo_edit`, SWE-agent 0.x's windowed `edit`, ...) is not guessed:
it is dropped from the replayable calls and kept as evidence in the import
index, so the verifier grades what the mapped actions reproduce and the user
sees what was left out. Recorded observations become tool messages (evidence
only: the verifier never trusts them).

    OUT/trajectories.parquet, OUT/steps.parquet   what `verify-batch` and `data build` read
    OUT/jsonl/<task>/<trajectory>.jsonl           the file form
    OUT/import_index.parquet                      one row per input run: id or skip reason, unmapped actions
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel

from touchstone import __version__
from touchstone import atomic, tables
from touchstone.agent.loop import SYSTEM_PROMPT
from touchstone.episode.tools import TOOL_SCHEMAS
from touchstone.episode.trajectory import (
    Sampling,
    Trajectory,
    read_text,
    trajectory_id,
    write_messages_jsonl,
    write_tables,
)
from touchstone.tasks.schema import Task

Format = Literal["openhands", "swe-agent", "openai-jsonl"]
FORMATS: tuple[str, ...] = Format.__args__  # type: ignore[attr-defined]
INDEX_FILE = "import_index.parquet"
# Workspace roots other harnesses use; paths below them become workspace-relative.
WORKSPACE_ROOTS = ("/workspace", "/testbed", "/repo", "/app", "/code")


class TrajectoryImportError(ValueError):
    """An input file that is not in the format it was said to be in."""


class SourceAction(BaseModel):
    """One action of the source agent: mapped to a Touchstone tool call, or not."""

    tool: str | None  # bash | read_file | write_file | str_replace | submit; None = unmapped
    arguments: dict[str, str] = {}
    thought: str = ""
    observation: str | None = None
    source: str  # the original action, as evidence


class SourceRun(BaseModel):
    """A run as read from a file, before it is bound to a task."""

    source: str  # file (and record) it came from
    task_id: str | None
    statement: str | None
    model: str | None = None
    actions: list[SourceAction]


class ImportRow(BaseModel):
    source: str
    format: str
    task_id: str | None
    trajectory_id: str | None
    skipped: str | None  # why no trajectory was written
    mapped: int
    unmapped: int
    unmapped_actions: str  # JSON list of {index, source}


# ---------------------------------------------------------------- mapping helpers


def workspace_path(path: str, roots: tuple[str, ...] = WORKSPACE_ROOTS) -> str:
    """'/testbed/pkg/a.py' -> 'pkg/a.py'; relative paths stay; others unchanged
    (the tool will refuse them in replay, as it would have refused the agent)."""
    norm = posixpath.normpath(path)
    for root in roots:
        if norm == root:
            return "."
        if norm.startswith(root + "/"):
            return norm[len(root) + 1 :]
    return path


def editor_action(args: dict[str, Any], source: str, thought: str = "", observation: str | None = None) -> SourceAction:
    """An Anthropic-style `str_replace_editor` call (OpenHands, SWE-agent 1.x)."""
    cmd, path = args.get("command"), workspace_path(str(args.get("path", "")))
    mapped: tuple[str | None, dict[str, str]] = (None, {})
    if cmd == "view" and not args.get("view_range"):
        mapped = ("read_file", {"path": path})
    elif cmd == "create" and args.get("file_text") is not None:
        mapped = ("write_file", {"path": path, "content": str(args["file_text"])})
    elif cmd == "str_replace" and args.get("old_str") is not None:
        mapped = ("str_replace", {"path": path, "old": str(args["old_str"]), "new": str(args.get("new_str") or "")})
    return SourceAction(tool=mapped[0], arguments=mapped[1], thought=thought, observation=observation, source=source)


_ALIASES = {
    "execute_bash": "bash",
    "bash": "bash",
    "run": "bash",
    "shell": "bash",
    "execute_command": "bash",
    "finish": "submit",
    "submit": "submit",
    "read_file": "read_file",
    "write_file": "write_file",
    "str_replace": "str_replace",
}


def tool_call_action(
    name: str, args: dict[str, Any], thought: str = "", observation: str | None = None
) -> SourceAction:
    """A function call of another agent's tool set."""
    source = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    if name in ("str_replace_editor", "edit_file", "file_editor"):
        return editor_action(args, source, thought, observation)
    tool = _ALIASES.get(name)
    if tool == "bash" and isinstance(args.get("command"), str):
        return SourceAction(
            tool="bash", arguments={"command": args["command"]}, thought=thought, observation=observation, source=source
        )
    if tool == "submit":
        return SourceAction(tool="submit", thought=thought, observation=observation, source=source)
    if tool in ("read_file", "write_file", "str_replace"):
        keys = {"read_file": ("path",), "write_file": ("path", "content"), "str_replace": ("path", "old", "new")}[tool]
        if all(isinstance(args.get(k), str) for k in keys):
            mapped = {k: workspace_path(args[k]) if k == "path" else args[k] for k in keys}
            return SourceAction(tool=tool, arguments=mapped, thought=thought, observation=observation, source=source)
    return SourceAction(tool=None, thought=thought, observation=observation, source=source)


# ---------------------------------------------------------------- readers


def _json_records(path: Path) -> list[Any]:
    """A JSON document, or JSON Lines (one record per line)."""
    text = read_text(path, "an imported run is a JSON or JSON Lines file")
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        pass
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TrajectoryImportError(f"{path}:{n}: neither a JSON document nor JSON Lines: {exc}") from None
    return records


def read_openhands(path: Path) -> Iterator[SourceRun]:
    """OpenHands event streams: a list of events, a `{"history": [...]}`
    record, or an evaluation `output.jsonl` (one record per instance)."""
    for i, rec in enumerate(_json_records(path)):
        events = rec if isinstance(rec, list) else rec.get("history") if isinstance(rec, dict) else None
        if not isinstance(events, list):
            raise TrajectoryImportError(f"{path} record {i}: no OpenHands event list (a list, or a 'history' field)")
        meta = rec if isinstance(rec, dict) else {}
        actions, statement, pending = [], meta.get("instruction"), None
        for ev in events:
            if not isinstance(ev, dict):
                continue
            kind, args = ev.get("action"), ev.get("args") or {}
            if "observation" in ev and pending is not None:
                pending.observation = str(ev.get("content", ""))
                pending = None
                continue
            if kind == "message" and ev.get("source") == "user":
                statement = statement or args.get("content") or ev.get("message")
                continue
            thought = str(args.get("thought") or "")
            source = json.dumps({"action": kind, "args": args}, ensure_ascii=False)
            if kind == "run" and isinstance(args.get("command"), str):
                act = SourceAction(tool="bash", arguments={"command": args["command"]}, thought=thought, source=source)
            elif kind == "read" and args.get("path"):
                act = SourceAction(
                    tool="read_file", arguments={"path": workspace_path(args["path"])}, thought=thought, source=source
                )
            elif kind == "write" and args.get("path") and isinstance(args.get("content"), str):
                act = SourceAction(
                    tool="write_file",
                    arguments={"path": workspace_path(args["path"]), "content": args["content"]},
                    thought=thought,
                    source=source,
                )
            elif kind == "edit" and args.get("command"):
                act = editor_action(args, source, thought)
            elif kind == "finish":
                act = SourceAction(
                    tool="submit", thought=thought or str(args.get("final_thought") or ""), source=source
                )
            elif kind in ("message", "think", "system", "recall", "condensation", None):
                continue  # talk and bookkeeping, no action on the workspace
            else:
                act = SourceAction(tool=None, thought=thought, source=source)
            actions.append(act)
            pending = act
        yield SourceRun(
            source=f"{path}#{i}",
            task_id=meta.get("instance_id"),
            statement=statement,
            model=(meta.get("metadata") or {}).get("llm_config", {}).get("model")
            if isinstance(meta.get("metadata"), dict)
            else None,
            actions=actions,
        )


def _swe_agent_action(text: str, thought: str, observation: str | None) -> SourceAction:
    stripped = text.strip()
    if stripped == "submit" or stripped.startswith("submit "):
        return SourceAction(tool="submit", thought=thought, observation=observation, source=text)
    if stripped.startswith("str_replace_editor "):
        try:
            words = shlex.split(stripped)
        except ValueError:
            return SourceAction(tool=None, thought=thought, observation=observation, source=text)
        args: dict[str, Any] = {
            "command": words[1] if len(words) > 1 else None,
            "path": words[2] if len(words) > 2 else "",
        }
        flags = words[3:]
        for k in range(0, len(flags) - 1, 2):
            if flags[k].startswith("--"):
                args[flags[k][2:]] = flags[k + 1]
        return editor_action(args, text, thought, observation)
    first = stripped.split(None, 1)[0] if stripped else ""
    if first in (
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "edit",
        "create",
        "search_file",
        "search_dir",
        "find_file",
        "filemap",
        "undo_edit",
        "insert",
    ):
        if first == "open" and len(stripped.split()) == 2:  # SWE-agent 0.x windowed viewer
            return SourceAction(
                tool="read_file",
                arguments={"path": workspace_path(stripped.split()[1])},
                thought=thought,
                observation=observation,
                source=text,
            )
        return SourceAction(tool=None, thought=thought, observation=observation, source=text)
    return SourceAction(tool="bash", arguments={"command": text}, thought=thought, observation=observation, source=text)


def read_swe_agent(path: Path) -> Iterator[SourceRun]:
    """SWE-agent `.traj` files: `trajectory` steps with `action` strings."""
    for i, rec in enumerate(_json_records(path)):
        steps = rec.get("trajectory") if isinstance(rec, dict) else None
        if not isinstance(steps, list):
            raise TrajectoryImportError(f"{path} record {i}: no SWE-agent 'trajectory' list")
        actions = [
            _swe_agent_action(str(s.get("action", "")), str(s.get("thought") or ""), s.get("observation"))
            for s in steps
            if isinstance(s, dict) and str(s.get("action", "")).strip()
        ]
        info = rec.get("info") or {}
        statement = next(
            (
                m.get("content")
                for m in rec.get("history") or []
                if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
            ),
            None,
        )
        task = rec.get("instance_id") or info.get("instance_id") or (path.stem if path.suffix == ".traj" else None)
        yield SourceRun(
            source=f"{path}#{i}",
            task_id=task,
            statement=statement,
            model=(info.get("model_stats") or {}).get("model"),
            actions=actions,
        )


def read_openai_jsonl(path: Path) -> Iterator[SourceRun]:
    """OpenAI chat messages: one message per line (a single run), or one run
    per line as `{"messages": [...], "task_id"|"instance_id": ...}`."""
    records = _json_records(path)
    runs = [records] if records and all(isinstance(r, dict) and "role" in r for r in records) else records
    for i, run in enumerate(runs):
        messages = run if isinstance(run, list) else run.get("messages") if isinstance(run, dict) else None
        if not isinstance(messages, list):
            raise TrajectoryImportError(f"{path} record {i}: neither chat messages nor a record with 'messages'")
        meta = run if isinstance(run, dict) else {}
        outputs = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
        actions, statement = [], None
        for m in messages:
            if m.get("role") == "user" and statement is None:
                statement = m.get("content")
            for call in m.get("tool_calls") or [] if m.get("role") == "assistant" else []:
                fn = call.get("function") or {}
                raw = fn.get("arguments") or "{}"
                try:
                    args = json.loads(raw) if isinstance(raw, str) else raw
                except json.JSONDecodeError:
                    args = None
                if not isinstance(args, dict):
                    actions.append(SourceAction(tool=None, source=json.dumps(fn, ensure_ascii=False)))
                    continue
                actions.append(
                    tool_call_action(
                        str(fn.get("name")), args, str(m.get("content") or ""), outputs.get(call.get("id"))
                    )
                )
        yield SourceRun(
            source=f"{path}#{i}",
            task_id=meta.get("task_id") or meta.get("instance_id"),
            statement=statement,
            model=meta.get("model"),
            actions=actions,
        )


READERS = {"openhands": read_openhands, "swe-agent": read_swe_agent, "openai-jsonl": read_openai_jsonl}


# ---------------------------------------------------------------- to trajectories


def to_trajectory(run: SourceRun, task: Task, fmt: str, attempt: int) -> Trajectory:
    policy = f"imported:{fmt}" + (f":{run.model}" if run.model else "")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.statement},
    ]
    mapped = [a for a in run.actions if a.tool is not None]
    for n, act in enumerate(mapped):
        call_id = f"call_{n}"
        messages.append(
            {
                "role": "assistant",
                "content": act.thought,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": act.tool, "arguments": json.dumps(act.arguments, ensure_ascii=False)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": act.observation or ""})
    submitted = bool(mapped) and mapped[-1].tool == "submit"
    return Trajectory(
        trajectory_id=trajectory_id(task.id, task.content_hash, policy, attempt, 0),
        task_id=task.id,
        task_hash=task.content_hash,
        attempt=attempt,
        policy=policy,
        sampling=Sampling(),
        backend="imported",
        harness_diff=False,  # the source harness's final diff is not in these formats
        messages=messages,
        tools=TOOL_SCHEMAS,
        exit_reason="submitted" if submitted else "policy_error",
        error=None if submitted else f"imported {fmt} run did not end with a finish/submit action",
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        wall_s=0.0,
        policy_s=0.0,
        sandbox_s=0.0,
        touchstone_version=__version__,
    )


def import_trajectories(
    files: list[Path], fmt: str, tasks: dict[str, Task], out: Path, task_id: str | None = None
) -> list[ImportRow]:
    """Read `files` in format `fmt`, bind each run to its task (its own
    instance id, or `task_id` for all), write the trajectory tables and the
    import index into `out`. Runs without a known task are skipped with a reason."""
    if fmt not in READERS:
        raise TrajectoryImportError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    trajectories, index, attempts = [], [], {}
    for path in files:
        for run in READERS[fmt](Path(path)):
            unmapped = [{"index": i, "source": a.source} for i, a in enumerate(run.actions) if a.tool is None]
            row = dict(
                source=run.source,
                format=fmt,
                task_id=task_id or run.task_id,
                trajectory_id=None,
                skipped=None,
                mapped=len(run.actions) - len(unmapped),
                unmapped=len(unmapped),
                unmapped_actions=json.dumps(unmapped, ensure_ascii=False),
            )
            task = tasks.get(row["task_id"] or "")
            if task is None:
                row["skipped"] = (
                    f"no task {row['task_id']!r} in the task set"
                    if row["task_id"]
                    else "the run names no task: pass --task"
                )
            elif row["mapped"] == 0:
                row["skipped"] = "no action could be mapped onto the verifier's tools"
            else:
                attempts[task.id] = attempts.get(task.id, -1) + 1
                traj = to_trajectory(run, task, fmt, attempts[task.id])
                trajectories.append(traj)
                row["trajectory_id"] = traj.trajectory_id
            index.append(ImportRow(**row))
    out.mkdir(parents=True, exist_ok=True)
    for traj in trajectories:
        write_messages_jsonl(out / "jsonl" / traj.task_id / f"{traj.trajectory_id}.jsonl", traj.messages)
    write_tables(trajectories, out)
    frame = pl.DataFrame([tables.to_row(r) for r in index], schema=tables.polars_schema(ImportRow), orient="row")
    atomic.write_parquet(frame, out / INDEX_FILE)
    return index
