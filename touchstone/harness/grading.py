"""Harness-controlled pytest runs and the parsing of their per-test results
(the low level of `touchstone.harness`: use `HiddenSuite` / `run_hidden_tests`).

The command line, configuration, environment and plugin are all the
harness's: `-c` points at a harness-owned ini, `-o addopts=` empties any
injected options, plugin autoload and the cache provider are off, the
environment is built from nothing (`env -i`), `confcutdir` is the workspace
root, and the interpreter runs with `-s` (no user site). Results come from two
channels the harness opened before collection — the plugin's JSONL stream and
pytest's JUnit XML — never from stdout or the exit code. Every required test
must have been collected and *passed* in both; missing, skipped, xfailed,
xpassed and errored all count as failures.
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import select
import shlex
import shutil
import tempfile
import threading
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from touchstone.harness.testfiles import TEST_MODULE_PATTERNS
from touchstone.sandbox.environment import Environment
from touchstone.sandbox.errors import WorkspaceRefused
from touchstone import pyast

RESULTS_FILE = "results.jsonl"
FAKETIME_LIB = "libfaketime.so.1"
JUNIT_FILE = "junit.xml"
MAX_REPORT_BYTES = 20 * 1024 * 1024
# The writable output dir: the JUnit report (up to MAX_REPORT_BYTES read, twice
# that written before pytest sees ENOSPC), the results FIFO, a status file.
OUT_DIR_BYTES, OUT_DIR_FILES = 2 * MAX_REPORT_BYTES, 64


@dataclass
class TestRunSpec:
    """Where things are inside the grading sandbox, and how to order/seed."""

    test_files: list[str]
    plugin_module: str  # random name: a workspace file cannot shadow it
    harness_dir: str  # read-only mount holding the plugin and the ini
    out_dir: str  # writable mount outside the workspace
    hash_seed: int = 0
    order: str = "forward"
    env: dict[str, str] = field(default_factory=dict)  # more variables for a harness plugin

    def command(self) -> str:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": str(self.hash_seed),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONPATH": self.harness_dir,
            "TOUCHSTONE_RESULTS": f"{self.out_dir}/{RESULTS_FILE}",
            "TOUCHSTONE_ORDER": self.order,
            **self.env,
        }
        argv = [
            "env", "-i", *(f"{k}={v}" for k, v in env.items()),
            "python3", "-s", "-m", "pytest",
            "-c", f"{self.harness_dir}/pytest.ini",
            "--rootdir=/workspace", "--confcutdir=/workspace",
            "-o", "addopts=", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-p", self.plugin_module,
            f"--junitxml={self.out_dir}/{JUNIT_FILE}", "-o", "junit_family=xunit1",
            "-q", "-rN", "--no-header", "-p", "no:warnings",
            "--", *self.test_files,
        ]  # fmt: skip
        return "cd /workspace && " + shlex.join(argv)


# ----------------------------------------------------------------- expected ids


def test_functions(path: str, source: str) -> list[str]:
    """Node-id prefixes of the test functions in a (pristine) test file:
    `path::test_x`, `path::TestC::test_y` (nested classes too), and methods of
    `unittest.TestCase` subclasses whatever their name, as pytest collects
    them. Parametrized ids extend these with `[...]`. Trusted because the file
    is the task's, not the agent's."""
    try:
        tree = pyast.parse(source, filename=path)
    except SyntaxError:
        return []  # nothing trusted to expect; `evaluate` fails an empty requirement
    return _collect(tree.body, path)


def _is_test_class(node: ast.ClassDef) -> bool:
    bases = [ast.unparse(b) for b in node.bases]
    return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


def _collect(body: list[ast.stmt], prefix: str) -> list[str]:
    ids = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            ids.append(f"{prefix}::{node.name}")
        elif isinstance(node, ast.ClassDef) and _is_test_class(node):
            ids.extend(_collect(node.body, f"{prefix}::{node.name}"))
    return ids


def _covers(expected: str, nodeid: str) -> bool:
    return nodeid == expected or nodeid.startswith(expected + "[")


# ---------------------------------------------------------------------- results


@dataclass
class TestRunResult:
    """Outcome of one harness test run. `status`: pass (every required test
    passed in both result channels), fail, or error (no answer: timeout)."""

    status: str
    evidence: str
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # required id -> why (the parser's one-line reason)
    messages: dict[str, str] = field(default_factory=dict)  # failed id -> the failure's `E` lines, else why
    total: int = 0
    wall_s: float = 0.0
    timed_out: bool = False
    collected: list[str] = field(default_factory=list)
    collect_errors: dict[str, str] = field(default_factory=dict)  # file -> error lines
    raised_at: dict[str, str] = field(default_factory=dict)  # failed id -> "path:line" the exception came from
    reads: list[str] = field(default_factory=list)  # data files outside the tests the tests read (record_reads)
    observations: dict[str, list] = field(default_factory=dict)  # isolated, observed: test -> values it got

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def fraction(self) -> float:
        return len(self.passed) / self.total if self.total else 0.0


@dataclass
class Stream:
    """What the harness plugin's stream says, plus the signs of forging."""

    collected: list[str] | None = None
    phases: dict[str, dict] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)
    collect_raised: dict[str, dict] = field(default_factory=dict)  # file -> what its import raised
    finishes: list[object] = field(default_factory=list)  # exit statuses of finish records
    reads: list[str] = field(default_factory=list)  # workspace data files test code read (record_reads runs)
    problems: list[str] = field(default_factory=list)


def _records(path: Path) -> Iterator[dict]:
    """The JSON objects of a JSONL file, one line at a time (split on \\n only)."""
    with open(path, "rb") as lines:
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:  # a torn last line (or bytes that are not UTF-8): its phases are missing anyway
                continue
            if isinstance(rec, dict):
                yield rec


def _read_stream(path: Path) -> Stream:
    """Parse the stream. The real plugin writes exactly one collection record
    before any test report and exactly one finish record, with pytest's exit
    status: anything else is forged or an aborted session."""
    st = Stream()
    if not path.is_file() or path.stat().st_size > MAX_REPORT_BYTES:
        return st
    n_collected = 0
    for rec in _records(path):
        event = rec.get("event")
        if event == "collected":
            n_collected += 1
            st.collected = st.collected if st.collected is not None else [str(i) for i in rec.get("ids", [])]
        elif event == "report":
            if st.collected is None:
                st.problems.append("a test report before the collection record (report tampering)")
            entry = st.phases.setdefault(str(rec.get("nodeid")), {})
            when = str(rec.get("when"))
            if when in entry:  # a second report for the same phase is forged
                entry["duplicate"] = True
            entry[when] = rec
        elif event == "collect_error":
            st.collect_errors[str(rec.get("nodeid"))] = str(rec.get("longrepr", ""))
            if isinstance(rec.get("raised"), dict):
                st.collect_raised[str(rec.get("nodeid"))] = rec["raised"]
        elif event == "finish":
            st.finishes.append(rec.get("exitstatus"))
        elif event == "read" and isinstance(rec.get("path"), str):
            st.reads.append(rec["path"])
    if n_collected > 1:
        st.problems.append(f"{n_collected} collection records (report tampering)")
    if not st.finishes:
        st.problems.append("no session-finish record (process ended early)")
    elif len(st.finishes) > 1:
        st.problems.append(f"{len(st.finishes)} session-finish records (report tampering)")
    elif st.finishes[0] not in (0, 1):
        st.problems.append(f"pytest ended with status {st.finishes[0]} (interrupted, internal or usage error)")
    return st


def _phase_verdict(entry: dict | None) -> str | None:
    """None when the test passed; else the reason it did not."""
    if entry is None:
        return "not run"
    if entry.get("duplicate"):
        return "duplicate result records (report tampering)"
    for when in ("setup", "call", "teardown"):
        rec = entry.get(when)
        if rec is None:
            return f"no {when} record (process ended early?)"
        if rec.get("wasxfail"):
            return "xfail/xpass does not count as passed"
        if rec.get("outcome") != "passed":
            raised = describe_raised(rec.get("raised"))
            detail = rec.get("longrepr", "").strip().splitlines()[-1:] or [""]
            return f"{when} {rec.get('outcome')}: {raised or detail[0][:200]}"
    return None


def describe_raised(raised: object, where: bool = True) -> str | None:
    """`module.Error: message (raised at pkg/mod.py:12 in function)` from a
    report's `raised` record (the result plugin's), or None when it has none.
    `where=False` leaves the location out: `messages` and `collect_errors` feed
    task statements, which must not point at the line to fix (it is in
    `raised_at`)."""
    if not isinstance(raised, dict) or not raised.get("type"):
        return None
    text = f"{raised['type']}: {raised.get('message') or ''}".rstrip(": ")[:300]
    if where and raised.get("at"):
        text += f" (raised at {raised['at']}" + (f" in {raised['in']})" if raised.get("in") else ")")
    return text


def _junit_outcomes(path: Path) -> dict[str, str] | None:
    """name-with-class -> passed/failed/error/skipped, or None when unreadable."""
    if not path.is_file() or path.stat().st_size > MAX_REPORT_BYTES:
        return None
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return None
    out = {}
    for case in root.iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = child.tag
                break
        if key in out and out[key] != "passed":
            continue  # teardown errors add a second entry: keep the failure
        out[key] = status
    return out


def _junit_key(nodeid: str) -> str:
    """JUnit (xunit1) classname::name for a node id."""
    cut = nodeid.find("[")  # parameter ids may contain "::" themselves
    base, params = (nodeid[:cut], nodeid[cut:]) if cut >= 0 else (nodeid, "")
    parts = base.split("::")
    parts[-1] += params
    module = re.sub(r"\.py$", "", parts[0]).replace("/", ".")
    return f"{'.'.join([module, *parts[1:-1]])}::{parts[-1]}"


def evaluate(
    results: Path, junit_path: Path, required: list[str] | None, expected_prefixes: list[str]
) -> TestRunResult:
    """Decide a test run from the harness's result channels.

    `required`: exact node ids (task's fail_to_pass + pass_to_pass), or None =
    every test function of the hidden test files (`expected_prefixes`, from
    their AST) must be collected and every collected instance of it pass."""
    stream = _read_stream(results)
    collected, phases = stream.collected, stream.phases
    if collected is None:
        return TestRunResult(
            "fail",
            "no collection record from the harness plugin: "
            "the test process never finished collecting (crash or early exit)",
        )
    collected_set = set(collected)
    if required is not None:
        targets = list(required)
    else:
        targets = [c for c in collected if any(_covers(p, c) for p in expected_prefixes)]
        for prefix in expected_prefixes:
            if not any(_covers(prefix, c) for c in collected):
                targets.append(prefix)  # expected but not collected: counts as failed
    if not targets:
        return TestRunResult("fail", "no required tests: the task names none and its hidden tests define none")
    junit = _junit_outcomes(junit_path)
    result = TestRunResult("pass", "", total=len(targets))
    for nodeid in targets:
        why = "not collected" if nodeid not in collected_set else _phase_verdict(phases.get(nodeid))
        if why is None and junit is not None and junit.get(_junit_key(nodeid)) != "passed":
            why = f"JUnit report says {junit.get(_junit_key(nodeid), 'missing')} (result channels disagree)"
        if why is None:
            result.passed.append(nodeid)
        else:
            result.failed[nodeid] = why
    problems = list(dict.fromkeys(stream.problems))
    if junit is None:
        problems.append("no readable JUnit report (pytest did not finish)")
    if stream.collect_errors:
        raised = describe_raised(next(iter(stream.collect_raised.values()), None))
        problems.append(f"collection errors in {', '.join(sorted(stream.collect_errors))[:300]}"
                        + (f" (first: {raised})" if raised else ""))  # fmt: skip
    if result.failed or junit is None or stream.problems:
        result.status = "fail"
        first = list(result.failed.items())[:3]
        parts = [f"{len(result.passed)}/{len(targets)} required tests passed"]
        parts += [f"{k}: {v}" for k, v in first] + problems
        result.evidence = "; ".join(parts)
    else:
        result.evidence = f"{len(result.passed)}/{len(targets)} required tests passed"
    return result


# ------------------------------------------------------------------- running

HARNESS_SRC = Path(__file__).with_name("sandbox_files")
# Harness-owned pytest configuration (passed with -c): no addopts, default
# discovery, strict xfail; nothing the workspace's configuration can inject.
HARNESS_INI = f"[pytest]\naddopts =\npython_files = {' '.join(TEST_MODULE_PATTERNS)}\nxfail_strict = true\n"


@contextmanager
def harness_mounts(
    *files: tuple[str, str], out_files: int = OUT_DIR_FILES
) -> Iterator[tuple[str, str, list, Path, str]]:
    """A read-only harness dir (the given `(source name, dest name)` files plus
    the ini) and a writable output dir (at most `out_files` files), both
    outside the workspace, with a random name per run so no workspace file can
    anticipate or shadow them. Yields (harness target, out target, mounts,
    host out dir, nonce)."""
    from touchstone.sandbox import Mount
    from touchstone.sandbox.workspace import bounded_dir

    nonce = secrets.token_hex(6)
    with tempfile.TemporaryDirectory(prefix="touchstone-grade-") as tmp, \
            bounded_dir(Path(tmp) / "out", OUT_DIR_BYTES, out_files, mode=0o777) as out:  # fmt: skip
        # (0o777: the sandbox user writes results there)
        harness = Path(tmp) / "harness"
        harness.mkdir()
        (harness / "pytest.ini").write_text(HARNESS_INI)
        for src, dest in files:
            shutil.copyfile(HARNESS_SRC / src, harness / dest.format(nonce=nonce))
        h_target, o_target = f"/mnt/th{nonce}", f"/mnt/to{nonce}"
        mounts = [Mount(host=harness, target=h_target), Mount(host=out, target=o_target, read_only=False)]
        yield h_target, o_target, mounts, out, nonce


def faketime_env(harness_dir: str, offset_s: int) -> dict[str, str]:
    """`TestRunSpec.env` for a run whose wall clock is `offset_s` seconds ahead;
    the library must have been copied into the harness dir as FAKETIME_LIB.
    Monotonic clocks move by the same constant offset, so durations hold.
    (FAKETIME_DONT_FAKE_MONOTONIC breaks `time.sleep`: libfaketime's
    clock_nanosleep then fails with EINVAL, and every honest reference that
    sleeps would look flaky.)"""
    return {"LD_PRELOAD": f"{harness_dir}/{FAKETIME_LIB}", "FAKETIME": f"+{offset_s}"}


def faketime_library() -> Path | None:
    """The host's libfaketime (Debian package `libfaketime`; same glibc as the
    sandbox root, which is built from the same Debian release), or None."""
    found = sorted(Path("/usr/lib").glob(f"*/faketime/{FAKETIME_LIB}")) + sorted(
        Path("/usr/lib/faketime").glob(FAKETIME_LIB)
    )
    return found[0] if found else None


class StreamCapture:
    """The plugin's result stream, as a FIFO the harness drains live from the
    host: what the plugin wrote can be neither rewritten nor truncated later
    (a finalizer or thread of the candidate that "fixes" the results at
    interpreter shutdown can only *add* records, and a second record for a
    phase is itself a failure). Captured bytes go to `dest`, outside every
    mount, as they arrive: the harness never holds the stream in memory.

    The FIFO's path is in the test process's environment, where candidate
    code runs, so the stream is bounded: past `cap` bytes (far more than the
    real plugin writes) the harness stops reading, closes its end and removes
    the FIFO, so a writer gets EPIPE instead of blocking, and `overflow` is
    set; the run then fails as report tampering (`overflow_result`)."""

    def __init__(self, fifo: Path, dest: Path, cap: int = MAX_REPORT_BYTES):
        os.mkfifo(fifo)
        fifo.chmod(0o666)  # the sandbox user opens it for writing
        # O_RDWR: never blocks, and reads wait for data instead of seeing EOF
        self.fd: int | None = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        self.fifo, self.cap, self.received, self.overflow = fifo, cap, 0, False
        self.out = open(dest, "wb")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)

    def _read_available(self) -> bool:
        """Move what the FIFO holds to `dest`; False when it holds nothing (or no more is read)."""
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return False
        if self.received + len(data) > self.cap:
            self.overflow = True
            self._stop_reading()
            return False
        self.received += len(data)
        self.out.write(data)
        return bool(data)

    def _stop_reading(self) -> None:
        os.close(self.fd)
        self.fd = None
        self.fifo.unlink(missing_ok=True)

    def _drain(self) -> None:
        while not self.stop.is_set() and self.fd is not None:
            if select.select([self.fd], [], [], 0.05)[0]:
                self._read_available()
        while self.fd is not None and self._read_available():
            pass

    def __enter__(self) -> "StreamCapture":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        if self.fd is not None:
            os.close(self.fd)
        self.out.close()

    def overflow_result(self, wall_s: float) -> TestRunResult | None:
        """The run's verdict when the stream overflowed (None when it did not):
        a failure naming the tampering, whatever else the run did (a writer
        stopped by EPIPE may well end in a timeout)."""
        if not self.overflow:
            return None
        return TestRunResult("fail", f"the result stream passed its {self.cap}-byte bound (report tampering: "
                                     "only the harness plugin writes there, and far less)", wall_s=wall_s)  # fmt: skip


def refused_tree(exc: Exception) -> TestRunResult:
    """The verdict on a tree to grade that no sandbox takes (over the workspace
    limits: the candidate's files, with the tests, at their apparent size):
    a failure with the reason, never an infrastructure error."""
    return TestRunResult("fail", f"the tree to grade is refused: {exc}")


def run_tests(
    tree: Path,
    test_files: list[str],
    required: list[str] | None,
    expected_prefixes: list[str],
    *,
    timeout: float,
    backend: str = "auto",
    hash_seed: int = 0,
    order: str = "forward",
    readonly: dict[str, Path] | None = None,
    environment: Environment | None = None,
    clock_offset_s: int = 0,
    record_reads: bool = False,
) -> TestRunResult:
    """One harness-controlled pytest run over `tree` in a fresh sandbox.
    `readonly`: workspace path -> host dir or file mounted read-only there (the tests, their inputs).
    `record_reads`: the result's `reads` lists the data files outside the tests that test code read.
    `environment`: the task's built environment (None: base).
    `clock_offset_s`: run with the wall clock that many seconds ahead (libfaketime).
    status error = the harness could not get an answer (timeout)."""
    from touchstone.sandbox import Limits, Mount, open_sandbox

    with harness_mounts(("pytest_plugin.py", "th_{nonce}.py")) as (h_dir, o_dir, mounts, out, nonce):
        mounts += [Mount(host=host, target=f"/workspace/{d}") for d, host in (readonly or {}).items()]
        env = faketime_env(h_dir, clock_offset_s) if clock_offset_s else {}
        env.update({"TOUCHSTONE_RECORD_READS": "1"} if record_reads else {})
        spec = TestRunSpec(test_files, f"th_{nonce}", h_dir, o_dir, hash_seed=hash_seed, order=order, env=env)
        if clock_offset_s:
            lib = faketime_library()
            if lib is None:
                raise RuntimeError("a shifted clock needs libfaketime (apt-get install libfaketime)")
            shutil.copyfile(lib, mounts[0].host / FAKETIME_LIB)
        captured = out.parent / "captured-results.jsonl"
        try:
            with StreamCapture(out / RESULTS_FILE, captured) as stream:
                with open_sandbox(
                    tree, backend=backend, mounts=mounts, limits=Limits(timeout_s=timeout + 30), environment=environment
                ) as sb:
                    res = sb.exec(spec.command(), timeout=timeout)
        except WorkspaceRefused as exc:
            return refused_tree(exc)
        if tampered := stream.overflow_result(res.wall_s):
            return tampered
        if res.timed_out:
            return TestRunResult("error", f"harness timeout: tests did not finish in {timeout:g} s",
                                 wall_s=res.wall_s, timed_out=True)  # fmt: skip
        result = evaluate(captured, out / JUNIT_FILE, required, expected_prefixes)
        if result.status == "fail":
            tail = (res.stdout + res.stderr).strip()[-300:]
            result.evidence += f" [seed {hash_seed}, order {order}] output tail: {tail}"
        add_details(result, captured, res.wall_s)
        return result


_E_LINE = re.compile(r"^E\s+(.*)$")
_WHERE_LINE = re.compile(r"^(\S+\.py):(\d+): \S")  # a traceback entry's location, in pytest's long format


def _error_lines(longrepr: str) -> str:
    """The `E ...` lines of a pytest failure: what behaviour was wrong."""
    lines = [m.group(1) for line in longrepr.splitlines() if (m := _E_LINE.match(line))]
    return "\n".join(lines[:6])


def add_details(result: TestRunResult, captured: Path, wall_s: float) -> None:
    """What the verdict leaves out but a proposer or validation reports: the
    collected ids, collection errors, and each failure's assertion message
    (the parser's one-line reason when it has none)."""
    stream = _read_stream(captured)
    result.wall_s, result.collected, result.reads = wall_s, stream.collected or [], sorted(set(stream.reads))
    result.collect_errors = {k: describe_raised(stream.collect_raised.get(k), where=False) or _error_lines(v) or v.strip()[-300:]
                             for k, v in stream.collect_errors.items()}  # fmt: skip
    result.messages = dict(result.failed)
    for nodeid in result.failed:
        for rec in (stream.phases.get(nodeid) or {}).values():
            if isinstance(rec, dict) and rec.get("outcome") == "failed":
                longrepr, raised = str(rec.get("longrepr", "")), rec.get("raised")
                if where := (raised.get("at") if isinstance(raised, dict) else None) or _raise_site(longrepr):
                    result.raised_at[nodeid] = where
                # the E lines of an exception from the candidate's process are its remote traceback's
                crossed = isinstance(raised, dict) and raised.get("crossed")
                if lines := (None if crossed else _error_lines(longrepr)) or describe_raised(raised, where=False):
                    result.messages[nodeid] = lines
                    break


def _raise_site(longrepr: str) -> str | None:
    """Where a failure's exception was raised: the innermost traceback entry's
    `path:line` (the last location line), e.g. a guard in the code under test
    rather than the test's own assert."""
    sites = [f"{m.group(1)}:{m.group(2)}" for line in longrepr.splitlines() if (m := _WHERE_LINE.match(line))]
    return sites[-1] if sites else None
