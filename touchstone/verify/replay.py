"""Replay: re-execute a trajectory's executed tool calls in a fresh sandbox
from the pristine workspace, with `touchstone.episode.tools.execute_tool_call`
(the very function the agent loop used), so replay has rollout semantics.
Recorded tool outputs are never trusted: the replayed state is what gets
graded and audited.

Per step it keeps what the later checks need: the action-log records the step
caused (for the action audit), the text the step added to files (audited),
and which protected paths were touched; with --progress, the files changed
so far are written to disk for grading. It holds digests and a fixed budget
of text, never the workspace's contents step after step: a run that adds
more text than the audit reads, or leaves a tree the harness will not walk
(`WorkspaceRefused`), is `refused`, the agent's outcome.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from touchstone.episode.tools import DEFAULT_TIMEOUT_S, call_error, execute_tool_call, stable_output
from touchstone.episode.trajectory import executed_tool_calls
from touchstone.sandbox import (
    ActionRecord,
    Environment,
    Limits,
    WorkspaceDiff,
    WorkspaceRefused,
    is_regular,
    open_sandbox,
)
from touchstone.audit.action_audit import ActionEvent, events_from_records
from touchstone.harness import diff_snapshots, is_cache

MAX_CONTENT_BYTES = 1 << 20  # text of a changed file kept for audit/grading
MAX_AUDITED_BYTES = 32 << 20  # text added to files over a whole replay that the action audit reads


@dataclass
class StepState:
    """Workspace after a state-changing step (for per-turn progress), on disk."""

    turn: int
    step: int
    tool: str
    changed: Path  # a directory holding every created/modified regular file vs pristine, at this step
    deleted: list[str]  # pristine paths gone at this step


@dataclass
class ReplayResult:
    pristine: dict[str, str]
    final: dict[str, str]
    diff: WorkspaceDiff
    files: dict[str, bytes]  # created/modified regular files of the final state
    events: list[ActionEvent] = field(default_factory=list)
    states: list[StepState] = field(default_factory=list)
    touched: dict[str, int] = field(default_factory=dict)  # path -> first step that changed it
    n_steps: int = 0
    submitted: bool = False
    divergent_steps: list[int] = field(default_factory=list)  # replayed output != recorded
    refused: str | None = None  # why the run's workspace or output is more than the harness handles
    refused_calls: list[str] = field(
        default_factory=list
    )  # "step N: why" for calls the tools refused (unknown tool...)


class _LogTail:
    """Reads the action-log records appended since the last call."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def read(self) -> list[ActionRecord]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        return [ActionRecord.model_validate_json(line) for line in data[:end].splitlines() if line.strip()]


def _read_changed(sb: Any, diff: WorkspaceDiff, snapshot: dict[str, str]) -> dict[str, bytes]:
    """The created/modified regular files of `diff`, `snapshot` being the tree it ends in."""
    return {rel: sb.read_file(rel) for rel in _changed_files(diff, snapshot)}


def _changed_files(diff: WorkspaceDiff, snapshot: dict[str, str]) -> list[str]:
    return [rel for rel in diff.created + diff.modified if is_regular(snapshot.get(rel))]


class _ContentAudit:
    """Text the run added to files (lines absent from the pristine version), so
    a library file the agent fixes is judged by its new lines only; read one
    file at a time, and at most MAX_AUDITED_BYTES of it over the replay."""

    def __init__(self, baseline: Callable[[str], bytes | None]):
        self.baseline, self.seen, self.kept = baseline, set(), 0
        self.over: str | None = None

    def events(self, sb: Any, step: int, diff: WorkspaceDiff, snapshot: dict[str, str]) -> list[ActionEvent]:
        out = []
        for rel in _changed_files(diff, snapshot):
            key = (rel, snapshot[rel])
            if key in self.seen or self.over:
                continue
            self.seen.add(key)
            data = sb.read_blob(rel, snapshot[rel], MAX_CONTENT_BYTES)
            if data is None:  # larger than a text file the audit reads
                continue
            text = data.decode("utf-8", errors="replace")
            before = self.baseline(rel)
            if before is not None:
                old = set(before.decode("utf-8", errors="replace").splitlines())
                text = "\n".join(line for line in text.splitlines() if line not in old)
            self.kept += len(text)
            if self.kept > MAX_AUDITED_BYTES:
                self.over = (f"step {step}: the run added more than {MAX_AUDITED_BYTES >> 20} MiB of text to "
                             f"files (at {rel}), more than the action audit reads")  # fmt: skip
                continue
            out.append(ActionEvent(step, "content", text, where=rel))
        return out


def _save_state(sb: Any, call: Any, pristine: dict[str, str], current: dict[str, str], dest: Path) -> StepState:
    """The files changed since pristine, written below `dest` one at a time."""
    whole = diff_snapshots(pristine, current)
    for rel in _changed_files(whole, current):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(sb.read_file(rel))
    dest.mkdir(parents=True, exist_ok=True)
    return StepState(call.turn, call.step, call.name, dest, whole.deleted)


# Run times ("3 passed in 0.12s", "(0:00:01)") and object addresses are the honest
# differences between a rollout's observation and its replay. The tools drop the test
# runners' own (`stable_output`); a trajectory recorded elsewhere, or a command that
# prints other times, still has them, so both sides are masked before comparing.
_TIMING = re.compile(r"\b\d+(?:\.\d+)?s\b|\(\d+:\d\d:\d\d\)")


def _masked(output: str) -> str:
    return _TIMING.sub("<t>", stable_output(output))


def _same_output(replayed: str, recorded: str) -> bool:
    return _masked(replayed) == _masked(recorded)


def replay(
    workspace: Path,
    messages: list[dict[str, Any]],
    *,
    backend: str = "auto",
    limits: Limits | None = None,
    states_dir: Path | None = None,
    is_protected: Any = lambda rel: False,
    tool_timeout: float = DEFAULT_TIMEOUT_S,
    baseline: Callable[[str], bytes | None] = lambda rel: None,
    environment: Environment | None = None,
) -> ReplayResult:
    """Replay in a fresh sandbox. `SandboxError` propagates (infrastructure),
    except `WorkspaceRefused`: the run's own tree, reported in `refused`.
    `states_dir`: where to keep the workspace after each state-changing step
    (per-step progress; None: not kept). `tool_timeout` must be the rollout's
    (EpisodeLimits.tool_timeout_s); `baseline(rel)` gives pristine file
    contents (None for new files)."""
    calls = executed_tool_calls(messages)
    with tempfile.TemporaryDirectory(prefix="touchstone-replay-") as tmp:
        log_path = Path(tmp) / "actions.jsonl"
        with open_sandbox(
            workspace, backend=backend, limits=limits, action_log=log_path, environment=environment
        ) as sb:
            tail = _LogTail(log_path)
            pristine = sb.snapshot()
            result = ReplayResult(pristine, pristine, WorkspaceDiff(), {})
            previous, content = pristine, _ContentAudit(baseline)
            try:
                for call in calls:
                    outcome = execute_tool_call(sb, call.name, call.arguments, timeout=tool_timeout)
                    result.n_steps += 1
                    if refused := call_error(call.name, call.arguments):
                        result.refused_calls.append(f"step {call.step}: {refused.split(';')[0]}")
                    result.events += events_from_records(tail.read(), call.step)
                    if call.recorded_output is not None and not _same_output(outcome.content, call.recorded_output):
                        result.divergent_steps.append(call.step)
                    current = sb.snapshot()
                    if current != previous:
                        step_diff = diff_snapshots(previous, current)
                        for rel in step_diff.changed:
                            result.touched.setdefault(rel, call.step)
                            if is_protected(rel):
                                result.events.append(ActionEvent(call.step, "protected", rel))
                        result.events += content.events(sb, call.step, step_diff, current)
                        if states_dir is not None:
                            dest = states_dir / f"step-{call.step}"
                            result.states.append(_save_state(sb, call, pristine, current, dest))
                        tail.read()  # the harness's own reads are not the agent's actions
                        previous = current
                    if outcome.ended:
                        result.submitted = True
                        break
            except WorkspaceRefused as exc:
                result.refused = f"step {result.n_steps - 1}: {exc}"
            result.refused = result.refused or content.over
            result.final = previous
            result.diff = diff_snapshots(pristine, previous)
            if not result.refused:
                result.files = _read_changed(sb, result.diff, previous)
    return result


def recorded_diff_matches(replayed: WorkspaceDiff, recorded: dict[str, Any]) -> tuple[bool, str]:
    """Compare the harness-recorded final diff (created/modified/deleted lists,
    as in trajectories.parquet) with the replayed one."""
    mine = {k: sorted(getattr(replayed, k)) for k in ("created", "modified", "deleted")}
    theirs = {k: sorted(p for p in recorded.get(k) or [] if not is_cache(p)) for k in mine}
    if mine == theirs:
        return True, f"replayed diff matches the recorded one ({replayed.summary()})"
    return False, f"replayed {json.dumps(mine)[:300]} != recorded {json.dumps(theirs)[:300]}"
