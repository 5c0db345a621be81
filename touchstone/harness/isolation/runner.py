"""Host side of an isolated test run: two sandboxes, one socket.

    judge sandbox      /workspace = the task's tests only (pristine visible +
                       hidden); pytest + the harness plugins; the results
                       mount (FIFO + JUnit); the socket directory.
    candidate sandbox  /workspace = pristine workspace + the candidate's diff,
                       no hidden tests; the protocol server; the socket
                       directory. Not the results mount.

The candidate's server runs in a thread (a sandbox exec is synchronous), the
judge's pytest in this one; pass/fail is decided from the judge's result
channels exactly as for an in-process run (`grading.evaluate`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shlex
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from touchstone.harness import grading
from touchstone.harness.testfiles import is_test_file
from touchstone.harness.tree import compose_tree
from touchstone.sandbox.environment import Environment
from touchstone.sandbox.errors import WorkspaceRefused
from touchstone.sandbox.workspace import bounded_dir

REMOTE_SRC = Path(__file__).with_name("remote")
# The tests' temporary files (pytest's basetemp): each sandbox has its own copy
# at the same path, kept alike through the wire (`remote/tmpsync.py`), so a
# test's tmp_path is where candidate code reads and writes while no folder of
# the judge's is ever in the candidate's sandbox; a tmpfs of this size each
# where the harness may mount one.
SHARED_TMP_BYTES, SHARED_TMP_FILES = 64 << 20, 4096
IPC_DIR_BYTES, IPC_DIR_FILES = 64 << 10, 16  # one socket
STATUS_FILE = "isolation.json"
OBSERVATIONS_FILE = "observations.jsonl"
CONNECT_TIMEOUT_S = 120  # a cold Docker start of the candidate's sandbox included


@functools.cache
def judge_code_digest() -> str:
    """The isolation harness's own code (both sides' files and this host side): what an
    isolation probe's verdict and the reference's observations were decided under."""
    h = hashlib.sha256()
    for src in [*sorted(REMOTE_SRC.glob("*.py")), Path(__file__)]:
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class IsolatedTrees:
    """The two workspaces of an isolated run and the module listing that
    tells the judge which imports are the candidate's."""

    candidate: Path
    judge: Path
    modules: list[str]
    # candidate classes whose own protocol decides operations on their instances (the task's
    # declaration, `source.meta.oracle.own_protocol`); every other object is judged by its plain view
    own_protocol: tuple[str, ...] = ()


def compose_trees(pristine: Path, files: dict[str, bytes], deleted: list[str], hidden: Path | None,
                  dest: Path, own_protocol: tuple[str, ...] = ()) -> IsolatedTrees:  # fmt: skip
    """candidate = pristine + `files` - `deleted` (no hidden tests);
    judge = the test files of that tree (`is_test_file`) + the hidden tests.
    `files` must not hold test files (the verifier drops the candidate's)."""
    candidate, judge, full = dest / "candidate", dest / "judge", dest / "full"
    compose_tree(candidate, pristine, files=files, deleted=deleted)
    compose_tree(full, pristine, files=files, deleted=deleted, tests=hidden)
    for path in sorted(full.rglob("*")):
        rel = path.relative_to(full).as_posix()
        if path.is_file() and is_test_file(rel):
            (judge / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, judge / rel)
    judge.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(full)
    modules = sorted(p.relative_to(candidate).as_posix() for p in candidate.rglob("*.py") if p.is_file())
    return IsolatedTrees(candidate, judge, [m for m in modules if not is_test_file(m)], tuple(own_protocol))


def _server_command(package: str, harness_dir: str, socket_path: str, hash_seed: int, random_seed: int,
                    tmp_dir: str) -> str:  # fmt: skip
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "PYTHONHASHSEED": str(hash_seed), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": harness_dir}  # fmt: skip
    argv = ["env", "-i", *(f"{k}={v}" for k, v in env.items()),
            "python3", "-s", "-m", f"{package}.server", socket_path, "/workspace", str(random_seed), tmp_dir]  # fmt: skip
    return "cd /workspace && " + shlex.join(argv)


def _copy_remote(dest: Path, with_judge: bool) -> None:
    dest.mkdir(parents=True)
    for src in REMOTE_SRC.glob("*.py"):
        if with_judge or src.name != "judge.py":
            shutil.copyfile(src, dest / src.name)


def run_isolated(
    trees: IsolatedTrees,
    test_files: list[str],
    required: list[str] | None,
    expected_prefixes: list[str],
    *,
    timeout: float,
    backend: str = "auto",
    hash_seed: int = 0,
    order: str = "forward",
    environment: Environment | None = None,
    observe: bool = False,
    random_seed: int | None = None,
) -> grading.TestRunResult:
    """One isolated test run (`environment`: the task's built one, mounted in
    both sandboxes; `observe`: the result's `observations` hold every value
    test code got from the candidate's process, per test, for the lockstep
    comparison with the reference; `random` in the candidate's process is
    seeded with `random_seed`, else `hash_seed`). status error = the harness could not get an answer
    (timeout, or the candidate's server never came up: no candidate code runs
    before the judge connects, so that is infrastructure)."""
    from touchstone.sandbox import HostUser, Limits, Mount, open_sandbox

    with grading.harness_mounts(("pytest_plugin.py", "th_{nonce}.py")) as (h_dir, o_dir, mounts, out, nonce), \
            ExitStack() as stack:  # fmt: skip
        tmp, package = out.parent, f"ti_{nonce}"
        _copy_remote(tmp / "harness" / package, with_judge=True)
        _copy_remote(tmp / "candidate-harness" / package, with_judge=False)
        # 0o777: both sandbox users use the socket and the tests' temporary files
        ipc = stack.enter_context(bounded_dir(tmp / "ipc", IPC_DIR_BYTES, IPC_DIR_FILES, mode=0o777))
        judge_tmp, candidate_tmp = (
            stack.enter_context(bounded_dir(tmp / name, SHARED_TMP_BYTES, SHARED_TMP_FILES, mode=0o777))
            for name in ("judge-tmp", "candidate-tmp")
        )
        ipc_dir, socket_path, shared_dir = f"/mnt/ti{nonce}", f"/mnt/ti{nonce}/s", f"/mnt/ts{nonce}"
        config = {"grading_plugin": f"th_{nonce}", "socket": socket_path, "root": "/workspace",
                  "modules": trees.modules, "status_file": f"{o_dir}/{STATUS_FILE}", "shared_tmp": shared_dir,
                  "connect_timeout": CONNECT_TIMEOUT_S, "own_protocol": list(trees.own_protocol),
                  "observations": f"{o_dir}/{OBSERVATIONS_FILE}" if observe else None}  # fmt: skip
        (tmp / "harness" / package / "config.json").write_text(json.dumps(config))
        socket_mount = Mount(host=ipc, target=ipc_dir, read_only=False)
        judge_mounts = [*mounts, socket_mount, Mount(host=judge_tmp, target=shared_dir, read_only=False)]
        candidate_mounts = [Mount(host=tmp / "candidate-harness", target=h_dir), socket_mount,
                            Mount(host=candidate_tmp, target=shared_dir, read_only=False)]  # fmt: skip
        spec = grading.TestRunSpec(test_files, f"{package}.judge", h_dir, o_dir, hash_seed=hash_seed, order=order)
        limits = Limits(timeout_s=timeout + 30)
        # One host user for both sandboxes: the socket and each side's temporary folder need no wider rights.
        host_user = stack.enter_context(HostUser.acquire()) if os.geteuid() == 0 else None
        captured = tmp / "captured-results.jsonl"
        try:
            with grading.StreamCapture(out / grading.RESULTS_FILE, captured) as stream, ExitStack() as sandboxes:
                with ThreadPoolExecutor(2) as pool:  # the two sandboxes start concurrently
                    futures = [
                        pool.submit(
                            open_sandbox,
                            tree,
                            backend,
                            mounts=m,
                            limits=limits,
                            environment=environment,
                            host_user=host_user,
                        )
                        for tree, m in ((trees.candidate, candidate_mounts), (trees.judge, judge_mounts))
                    ]
                    for f in futures:  # register every sandbox that opened, then raise the first failure
                        if f.exception() is None:
                            sandboxes.enter_context(f.result())
                    candidate_sb, judge_sb = (f.result() for f in futures)
                command = _server_command(package, h_dir, socket_path, hash_seed,
                                          hash_seed if random_seed is None else random_seed, shared_dir)  # fmt: skip
                server = _Server(candidate_sb, command, timeout + 30)
                judged = judge_sb.exec(spec.command(), timeout=timeout)
                server.finish()
        except WorkspaceRefused as exc:
            return grading.refused_tree(exc)
        if tampered := stream.overflow_result(judged.wall_s):
            return tampered
        return _decide(judged, server, out, captured, required, expected_prefixes, timeout, hash_seed, order)


class _Server:
    """The candidate's server, run in a thread. It ends by itself when the
    judge's connection closes; `finish` gives it a moment, then the caller's
    sandbox close kills whatever is left (a call still looping)."""

    def __init__(self, sandbox, command: str, timeout: float):
        self.result, self.error = None, None
        self.thread = threading.Thread(target=self._run, args=(sandbox, command, timeout), daemon=True)
        self.thread.start()

    def _run(self, sandbox, command: str, timeout: float) -> None:
        try:
            self.result = sandbox.exec(command, timeout=timeout)
        except Exception as exc:  # the sandbox was closed under it, or failed: reported, never raised
            self.error = exc

    def finish(self, grace: float = 5.0) -> None:
        self.thread.join(grace)

    def tail(self) -> str:
        if self.result is None:
            return f"server: {self.error or 'still running'}"
        return (self.result.stdout + self.result.stderr).strip()[-300:]


def _decide(judged, server: _Server, out: Path, captured: Path, required, prefixes, timeout: float,
            hash_seed: int, order: str) -> grading.TestRunResult:  # fmt: skip
    if judged.timed_out:
        return grading.TestRunResult("error", f"harness timeout: isolated tests did not finish in {timeout:g} s")
    status = _read_status(out / STATUS_FILE)
    if not status.get("connected"):
        why = status.get("error", "the judge never started")
        return grading.TestRunResult("error", f"isolation: the judge could not reach the candidate's process "
                                              f"({why}); {server.tail()}")  # fmt: skip
    result = grading.evaluate(captured, out / grading.JUNIT_FILE, required, prefixes)
    grading.add_details(result, captured, judged.wall_s)
    result.observations = read_observations(out / OBSERVATIONS_FILE)
    if status.get("broken"):
        result.evidence += f"; isolation: the candidate's process failed ({status['broken']})"
    if result.status == "fail":
        tail = (judged.stdout + judged.stderr).strip()[-300:]
        result.evidence += f" [isolated, seed {hash_seed}, order {order}] output tail: {tail}"
    else:
        result.evidence += " [isolated]"
    return result


def read_observations(path: Path) -> dict[str, list]:
    """test node id ("" for collection) -> [[op, canonical value], ...] in order."""
    out: dict[str, list] = {}
    if not path.is_file() or path.stat().st_size > grading.MAX_REPORT_BYTES:
        return out
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        out.setdefault(rec.get("t") or "", []).append([rec.get("op"), rec.get("v")])
    return out


def _read_status(path: Path) -> dict:
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}
