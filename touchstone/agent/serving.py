"""Serve a checkpoint over the OpenAI API for the length of a step.

`serve_checkpoint(spec)` is a context manager yielding the policy spec
`openai:URL#<checkpoint content hash>`: the server is started under the
checkpoint's content hash as its model name (vLLM/SGLang `--served-model-name`;
`transformers serve` pins the model under the name it was given, so it is
started on a link named after the hash), and nothing is yielded before
`/v1/models` lists that name. The policy records the name as the trajectory's
`checkpoint_hash`, so lineage names the model that actually answered.

Kinds: `transformers` | `vllm` | `sglang` start a server (own process group,
SIGTERM'd on exit from the block, also on errors; Linux parent-death signal for
a killed step) on a port that must be free — a server already answering there is
stale (another checkpoint, maybe) and is refused, never reused. `external`
starts nothing: the user's server must list the expected hash.
"""

from __future__ import annotations

import contextlib
import functools
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from touchstone.agent.policies.spec import PolicySpec

ServerKind = Literal["transformers", "vllm", "sglang", "external"]

# Tool-call parsers for the Qwen2.5 / Hermes `<tool_call>` format of the default
# template (docs/TRAINING.md); set `tool_call_parser` for other model families.
DEFAULT_TOOL_PARSER = {"vllm": "hermes", "sglang": "qwen25"}
_PR_SET_PDEATHSIG = 1


class ServingError(RuntimeError):
    """The server could not be started, is not serving the expected checkpoint, or the port is taken."""


@dataclass
class ServerSpec:
    """What to serve and how. `checkpoint` is the weights directory (unused by
    `external`); `checkpoint_hash` its content hash, the served model name."""

    kind: ServerKind
    checkpoint_hash: str
    checkpoint: Path | None = None
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    url: str = ""  # external: the server's base URL (…/v1)
    command: list[str] = field(default_factory=list)  # replaces the default executable
    args: list[str] = field(default_factory=list)  # appended to the command line
    gpus: str = ""  # CUDA_VISIBLE_DEVICES for the server; empty: inherited
    tool_call_parser: str = ""  # empty: the kind's default
    startup_timeout_s: float = 900.0
    log_dir: Path | None = None  # server.log goes here (default: a temp dir)


@contextlib.contextmanager
def serve_checkpoint(spec: ServerSpec) -> Iterator[PolicySpec]:
    """Yield `openai:URL#HASH` while a server answers for `spec.checkpoint_hash`."""
    if spec.kind == "external":
        if not spec.url:
            raise ServingError("external server: no url configured")
        check_served(spec.url, spec.checkpoint_hash)
        yield PolicySpec("openai", f"{spec.url.rstrip('/')}#{spec.checkpoint_hash}")
        return
    if spec.checkpoint is None or not Path(spec.checkpoint).is_dir():
        raise ServingError(f"{spec.kind} server: checkpoint directory {spec.checkpoint} does not exist")
    port = spec.port or free_port(spec.host)
    ensure_port_free(spec.host, port)
    with tempfile.TemporaryDirectory(prefix="touchstone-serve-") as tmp:
        argv, cwd = server_command(spec, port, Path(tmp))
        log_path = (spec.log_dir or Path(tmp)) / "server.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = _start(argv, cwd, log, spec.gpus)
        try:
            url = f"http://{spec.host}:{port}/v1"
            _wait_healthy(proc, spec.host, port, spec.startup_timeout_s, log_path)
            check_served(url, spec.checkpoint_hash)
            yield PolicySpec("openai", f"{url}#{spec.checkpoint_hash}")
        finally:
            stop(proc)


def server_command(spec: ServerSpec, port: int, workdir: Path) -> tuple[list[str], Path]:
    """(argv, cwd) that start `spec.kind` on `port` serving the checkpoint as its hash."""
    common = ["--host", spec.host, "--port", str(port)]
    ckpt, name = str(Path(spec.checkpoint).resolve()), spec.checkpoint_hash
    parser = spec.tool_call_parser or DEFAULT_TOOL_PARSER.get(spec.kind, "")
    if spec.kind == "transformers":
        # A pinned `transformers serve` answers (and lists) only the name it got; a
        # relative link named HASH in its cwd makes that name the hash.
        (workdir / name).symlink_to(ckpt, target_is_directory=True)
        exe = spec.command or [_script("transformers"), "serve"]
        return [*exe, name, *common, *spec.args], workdir
    if spec.kind == "vllm":
        exe = spec.command or [_script("vllm"), "serve"]
        return [
            *exe,
            ckpt,
            "--served-model-name",
            name,
            *common,
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            parser,
            *spec.args,
        ], workdir
    if spec.kind == "sglang":
        exe = spec.command or [sys.executable, "-m", "sglang.launch_server"]
        return [
            *exe,
            "--model-path",
            ckpt,
            "--served-model-name",
            name,
            *common,
            "--tool-call-parser",
            parser,
            *spec.args,
        ], workdir
    raise ServingError(f"unknown server kind {spec.kind!r}: expected transformers, vllm, sglang or external")


def _script(name: str) -> str:
    """A console script of this environment, else from PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        raise ServingError(f"`{name}` is not installed; install it or set the server's `command`")
    return found


def _die_with_parent(parent: int) -> None:
    """In the child: SIGTERM when the parent dies (a SIGKILLed step leaves no server).
    A parent that died between fork and prctl never sends it (prctl(2)): then the
    child is already someone else's and ends itself before exec."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _start(argv: list[str], cwd: Path, log, gpus: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=functools.partial(_die_with_parent, os.getpid()) if sys.platform == "linux" else None,
        )
    except OSError as exc:
        raise ServingError(f"cannot start {argv[0]}: {exc}") from exc


def stop(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the server's process group (workers included), SIGKILL after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ensure_port_free(host: str, port: int) -> None:
    """Refuse a port something already listens on: a leftover server may serve another model."""
    with socket.socket() as s:
        s.settimeout(1)
        if s.connect_ex((host, port)) == 0:
            raise ServingError(
                f"port {port} on {host} is already in use (a stale server?); it is not reused: stop it or pick "
                "another port"
            )


def _wait_healthy(proc: subprocess.Popen, host: str, port: int, timeout_s: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise ServingError(f"server exited with {proc.returncode} before answering:\n{_tail(log_path)}")
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            stop(proc)
            raise ServingError(f"server did not answer /health within {timeout_s:.0f} s:\n{_tail(log_path)}")
        time.sleep(0.5)


def served_models(url: str, timeout_s: float = 10.0) -> list[str]:
    """Model ids listed at `URL/models` (URL is the OpenAI base URL, …/v1)."""
    request = urllib.request.Request(url.rstrip("/") + "/models")
    if key := os.environ.get("OPENAI_API_KEY"):
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            body = json.load(resp)
    except (OSError, ValueError) as exc:
        raise ServingError(f"{url}/models: no model list ({exc})") from exc
    return [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]


def check_served(url: str, checkpoint_hash: str) -> None:
    """Refuse to roll out unless the server lists the expected checkpoint hash."""
    names = served_models(url)
    if checkpoint_hash not in names:
        raise ServingError(
            f"{url} serves {names or 'no model'}, not checkpoint {checkpoint_hash}: refusing to roll out with "
            "a model other than the round's checkpoint (start the server with --served-model-name <hash>)"
        )


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"
