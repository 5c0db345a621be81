"""The agent's action space: tool schemas (OpenAI format) and their execution.

`execute_tool_call` is the single place where a tool call turns into sandbox
operations and an observation. The agent loop and the verifier's replay both
call it, so the observation text must be a pure function of the sandbox state
and the call: no timestamps, durations or random ids go into `content`
(`stable_output` drops the ones test runners print).
Bad calls (unknown tool, malformed JSON, missing or extra arguments, paths that
leave the workspace, missing files) become error observations (`ok=False`),
never exceptions; only a failure of the sandbox itself (`SandboxError` from
`exec`) propagates. `SandboxError` from the file operations names a bad path
(missing file, a symlink, a directory) and becomes an observation.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any, NamedTuple

from touchstone.sandbox.errors import SandboxError

DEFAULT_MAX_OUTPUT = 8000  # characters of observation kept per call
DEFAULT_TIMEOUT_S = 60.0  # wall-clock limit of one bash call
WORKSPACE = "/workspace"
ERROR_PREFIX = "error: "


def _schema(name: str, description: str, **params: str) -> dict[str, Any]:
    """An OpenAI function-tool schema whose parameters are all required strings."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
                "required": list(params),
                "additionalProperties": False,
            },
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _schema(
        "bash",
        "Run a bash command in the workspace (cwd = workspace root). Returns the exit code, stdout and stderr.",
        command="The command line to run with bash -c.",
    ),
    _schema("read_file", "Read a text file of the workspace.", path="Path relative to the workspace root."),
    _schema(
        "write_file",
        "Create or overwrite a file of the workspace with the given content.",
        path="Path relative to the workspace root.",
        content="The complete new file content.",
    ),
    _schema(
        "str_replace",
        "Replace the single occurrence of `old` by `new` in a workspace file. "
        "Fails if `old` occurs zero or several times.",
        path="Path relative to the workspace root.",
        old="Exact text to replace; must occur exactly once.",
        new="Replacement text.",
    ),
    _schema("submit", "Finish the task: the current workspace is your answer."),
]
TOOL_NAMES = tuple(s["function"]["name"] for s in TOOL_SCHEMAS)
_PARAMS = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS}


class ToolOutcome(NamedTuple):
    content: str  # observation shown to the policy (already truncated)
    ok: bool  # False for every error observation and for a failing bash command
    ended: bool  # True when the call ends the episode (submit)
    exit_code: int | None = None  # bash exit code; None for the file tools and errors


class _ToolError(Exception):
    """A bad call: becomes an error observation."""


def truncate(text: str, max_output: int) -> str:
    """Keep the head and tail of `text`, with an explicit marker of what was cut."""
    if len(text) <= max_output:
        return text
    head = max_output // 2
    tail = max_output - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... truncated {cut} characters ...]\n{text[len(text) - tail :]}"


def _parse_arguments(name: str, arguments_json: str | dict | None) -> dict[str, str]:
    """Validate the call against its schema: a JSON object of exactly the declared strings."""
    if name not in _PARAMS:
        raise _ToolError(f"unknown tool {name!r}; available tools: {', '.join(TOOL_NAMES)}")
    if isinstance(arguments_json, dict):
        args: Any = arguments_json
    elif arguments_json is None or not arguments_json.strip():
        args = {}
    else:
        try:
            args = json.loads(arguments_json)
        except json.JSONDecodeError as exc:
            raise _ToolError(f"arguments of {name} are not valid JSON: {exc}") from None
    if not isinstance(args, dict):
        raise _ToolError(f"arguments of {name} must be a JSON object, got {type(args).__name__}")
    params = _PARAMS[name]
    missing = [p for p in params["required"] if p not in args]
    if missing:
        raise _ToolError(f"{name} is missing required argument(s): {', '.join(missing)}")
    extra = sorted(set(args) - set(params["properties"]))
    if extra:
        raise _ToolError(f"{name} got unknown argument(s): {', '.join(extra)}")
    for key, value in args.items():
        if not isinstance(value, str):
            raise _ToolError(f"argument {key!r} of {name} must be a string, got {type(value).__name__}")
    return args


def call_error(name: str, arguments_json: str | dict | None) -> str | None:
    """Why a tool call does not match its schema (unknown tool, bad JSON, missing
    or extra arguments), or None for a well-formed call. Evaluation counts the
    well-formed calls a model samples; execution may still fail (a missing file)."""
    try:
        _parse_arguments(name, arguments_json)
    except _ToolError as exc:
        return str(exc)
    return None


def is_valid_call(message: dict) -> bool:
    """Whether an assistant message's first tool call (the one the loop executes)
    matches its schema. A message for which this is False changed nothing: its
    call was never run."""
    calls = message.get("tool_calls") or []
    fn = calls[0].get("function") or {} if calls else None
    return fn is not None and call_error(str(fn.get("name") or ""), fn.get("arguments")) is None


def workspace_path(path: str) -> str:
    """Normalize a tool path to a workspace-relative POSIX path, or raise `_ToolError`.

    `/workspace/x` is accepted as `x` (the sandbox's own view); any other absolute
    path, or one whose `..` leaves the workspace, is refused."""
    if not path.strip():
        raise _ToolError("path is empty")
    if path == WORKSPACE or path.startswith(WORKSPACE + "/"):
        path = path[len(WORKSPACE) :].lstrip("/") or "."
    if path.startswith("/"):
        raise _ToolError(f"path {path!r} is absolute; use a path relative to the workspace root")
    norm = posixpath.normpath(path)
    if norm == ".." or norm.startswith("../"):
        raise _ToolError(f"path {path!r} leaves the workspace")
    if norm == ".":
        raise _ToolError(f"path {path!r} is the workspace root, not a file")
    return norm


# What differs between two runs of the same command on the same files: test runners'
# run times (pytest's `3 passed in 0.12s`, unittest's `Ran 3 tests in 0.004s`) and
# CPython's object addresses (`<function f at 0x7f37e33d0cc0>`, also where pytest cuts
# one short). Left in, the same seed gave another rollout, training row and
# checkpoint on every run, and a rematerialized round did not reproduce its data.
_COUNT = r"\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
PYTEST_COUNTS = rf"{_COUNT}(?:, {_COUNT})*"  # pytest's summary: `3 failed, 1 error, 9 passed`
_RUN_TIME = re.compile(
    rf"^(=* ?(?:{PYTEST_COUNTS}|no tests ran)|Ran \d+ tests?) in \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d\))?", re.M
)
_ADDRESS = re.compile(
    r"(?<= at )0x(?:[0-9a-fA-F]{8,}|[0-9a-fA-F]*(?=\.\.\.$))"  # whole, or cut at the line's end
    r"|(?<=\.\.\.)(?:a?t)? ?0?x?[0-9a-fA-F]{4,}(?=>|\.\.\.$)",  # the tail of a repr pytest cut in the middle
    re.M,
)


def stable_output(text: str) -> str:
    """`text` without run times of test runners and object addresses (`0x...`).

    Only these forms are touched: `at 0x` + 8 or more hex digits (or fewer, cut
    by pytest's `...` at the end of a line); 4 or more hex digits between `...`
    and `>` or a line-ending `...` (a repr pytest cut in the middle:
    `<function te...7efecc1077e0>`); the run time of a pytest or unittest
    summary line."""
    return _ADDRESS.sub("0x...", _RUN_TIME.sub(r"\1", text))


def _text(data: bytes | str) -> str:
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def _read_text(sandbox: Any, path: str) -> str:
    try:
        data = sandbox.read_file(path)
    except FileNotFoundError:
        raise _ToolError(f"file {path!r} does not exist") from None
    except IsADirectoryError:
        raise _ToolError(f"{path!r} is a directory") from None
    except (SandboxError, ValueError, OSError) as exc:
        raise _ToolError(str(exc) if isinstance(exc, SandboxError) else f"cannot read {path!r}: {exc}") from None
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _ToolError(f"file {path!r} is not UTF-8 text ({len(data)} bytes)") from None


def _write_text(sandbox: Any, path: str, content: str) -> None:
    try:
        sandbox.write_file(path, content)
    except (SandboxError, ValueError, OSError) as exc:
        raise _ToolError(str(exc) if isinstance(exc, SandboxError) else f"cannot write {path!r}: {exc}") from None


def _bash(sandbox: Any, command: str, timeout: float) -> tuple[str, int]:
    result = sandbox.exec(command, timeout=timeout)
    stdout, stderr = stable_output(_text(result.stdout)), stable_output(_text(result.stderr))
    # The sandbox keeps only the head of a huge stream; say so, with the true size.
    if getattr(result, "stdout_truncated", False):
        stdout += f"\n[... stdout cut by the sandbox: {result.stdout_bytes} bytes in total ...]\n"
    if getattr(result, "stderr_truncated", False):
        stderr += f"\n[... stderr cut by the sandbox: {result.stderr_bytes} bytes in total ...]\n"
    parts = [f"exit code: {result.exit_code}"]
    if getattr(result, "timed_out", False):
        parts[0] += f" (timed out after {timeout:g} s)"
    if stdout:
        parts.append(f"stdout:\n{stdout}")
    if stderr:
        parts.append(f"stderr:\n{stderr}")
    return "\n".join(parts), result.exit_code


def _str_replace(sandbox: Any, path: str, old: str, new: str) -> str:
    if not old:
        raise _ToolError("`old` is empty")
    text = _read_text(sandbox, path)
    count = text.count(old)
    if count != 1:
        raise _ToolError(f"`old` occurs {count} times in {path!r}; it must occur exactly once")
    _write_text(sandbox, path, text.replace(old, new, 1))
    return f"replaced 1 occurrence in {path}"


def execute_tool_call(
    sandbox: Any,
    name: str,
    arguments_json: str | dict | None,
    max_output: int = DEFAULT_MAX_OUTPUT,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> ToolOutcome:
    """Run one tool call in `sandbox` and return its observation.

    `arguments_json` is the JSON string of an OpenAI tool call (a dict is
    accepted too). Deterministic given the sandbox state; `SandboxError`
    (the sandbox itself failed) is the only exception that escapes."""
    try:
        args = _parse_arguments(name, arguments_json)
        if name == "submit":
            return ToolOutcome("submitted", ok=True, ended=True)
        if name == "bash":
            content, code = _bash(sandbox, args["command"], timeout)
            return ToolOutcome(truncate(content, max_output), ok=code == 0, ended=False, exit_code=code)
        path = workspace_path(args["path"])
        if name == "read_file":
            content = _read_text(sandbox, path)
        elif name == "write_file":
            _write_text(sandbox, path, args["content"])
            content = f"wrote {len(args['content'])} characters to {path}"
        else:
            content = _str_replace(sandbox, path, args["old"], args["new"])
        return ToolOutcome(truncate(content, max_output), ok=True, ended=False)
    except _ToolError as exc:
        return ToolOutcome(truncate(ERROR_PREFIX + str(exc), max_output), ok=False, ended=False)


# Observations the loop records for model output that cannot be executed.
NOT_EXECUTED = ERROR_PREFIX + "only one tool call per turn is allowed; this call was not executed"
NO_TOOL_CALL = (
    ERROR_PREFIX + "your reply contained no tool call. Reply with exactly one tool call; "
    "call submit when the task is done."
)
