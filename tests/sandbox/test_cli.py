"""`touchstone sandbox run`: the command people and checks use to debug sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli import main

JSON_KEYS = {
    "exit_code",
    "timed_out",
    "oom_killed",
    "wall_s",
    "stdout",
    "stderr",
    "stdout_bytes",
    "stderr_bytes",
    "backend",
}


def _run(*args: str):
    return CliRunner().invoke(main, ["sandbox", "run", *args], catch_exceptions=False)


def test_run_json(sandbox_backend: str):
    result = _run("--backend", sandbox_backend, "--json", "--", "python3", "-c", "print(1)")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert JSON_KEYS <= set(data)
    assert (data["stdout"], data["exit_code"], data["backend"]) == ("1\n", 0, sandbox_backend)


def test_run_passes_exit_code_timeout_and_workspace(sandbox_backend: str, workspace: Path):
    result = _run("--backend", sandbox_backend, "--workspace", str(workspace), "--", "cat", "notes.txt")
    assert (result.exit_code, result.stdout) == (0, "first line\n")
    result = _run("--backend", sandbox_backend, "--timeout", "1", "--json", "--", "sleep", "30")
    data = json.loads(result.stdout)
    assert result.exit_code == 137 and data["timed_out"]
    assert _run("--backend", sandbox_backend, "--", "bash", "-c", "exit 4").exit_code == 4


def test_run_memory_limit(sandbox_backend: str):
    hog = "x = bytearray(400 << 20); x[::4096] = b'1' * len(x[::4096])"
    data = json.loads(
        _run("--backend", sandbox_backend, "--memory", "128m", "--json", "--", "python3", "-c", hog).stdout
    )
    assert data["oom_killed"]


def test_run_bad_input(tmp_path: Path):
    result = _run("--backend", "bwrap", "--workspace", str(tmp_path / "missing"), "--", "true")
    assert result.exit_code == 1 and "workspace directory does not exist" in result.output
    result = _run("--backend", "bwrap", "--memory", "lots", "--", "true")
    assert result.exit_code == 1 and "not a size" in result.output
    assert _run("--backend", "podman", "--", "true").exit_code == 2
