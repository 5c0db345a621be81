"""Red team: the results FIFO's path is in the test process's environment,
where candidate code runs. Whatever it writes there, the harness holds a
fixed budget of it and calls a flood what it is: report tampering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from touchstone.harness import grading

# 512 MiB into the results pipe while the tests import the candidate's module.
FLOOD_AT_IMPORT = """import os

fd = os.open(os.environ["TOUCHSTONE_RESULTS"], os.O_WRONLY)
chunk = b"x" * (1 << 20)
try:
    for _ in range(512):
        os.write(fd, chunk)
except OSError:
    pass  # the harness closed its end: EPIPE, never a blocked writer


def answer():
    return 42
"""
TEST = "from pkg.mod import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"

# A fresh interpreter grades the tree and reports its own peak memory: the
# harness process's, not the test process's (that one runs in the sandbox).
# VmHWM, the peak of its own address space: ru_maxrss would also count the
# forking pytest process's memory, which Linux carries across exec.
_GRADE = """
import json, sys
from pathlib import Path
from touchstone.harness import grading
tree, backend = Path(sys.argv[1]), sys.argv[2]
prefixes = grading.test_functions("tests/test_t.py", (tree / "tests" / "test_t.py").read_text())
res = grading.run_tests(tree, ["tests/test_t.py"], None, prefixes, timeout=120, backend=backend)
peak = int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))) * 1024
print(json.dumps({"status": res.status, "evidence": res.evidence, "peak_bytes": peak}))
"""
# The harness process's peak must stay far below the flood: imports, the
# sandbox, and at most MAX_REPORT_BYTES of results (parsed from disk).
PEAK_BUDGET = 256 << 20


def _tree(tmp_path: Path, candidate: str) -> Path:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "pkg" / "__init__.py").write_text("")
    (tree / "pkg" / "mod.py").write_text(candidate)
    (tree / "tests" / "test_t.py").write_text(TEST)
    return tree


def _grade_in_fresh_process(tree: Path, backend: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _GRADE, str(tree), backend],
                          capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_flood_into_the_results_pipe_is_tampering_and_memory_stays_bounded(tmp_path, sandbox_backend):
    out = _grade_in_fresh_process(_tree(tmp_path, FLOOD_AT_IMPORT), sandbox_backend)
    assert out["status"] == "fail"
    assert "report tampering" in out["evidence"] and "bound" in out["evidence"]
    assert out["peak_bytes"] < PEAK_BUDGET, f"harness peak {out['peak_bytes'] >> 20} MiB"


def test_the_same_candidate_without_the_flood_passes(tmp_path, sandbox_backend):
    """The control: only the flood fails the run above."""
    quiet = FLOOD_AT_IMPORT.replace("range(512)", "range(0)")
    out = _grade_in_fresh_process(_tree(tmp_path, quiet), sandbox_backend)
    assert out["status"] == "pass", out["evidence"]


def test_capture_keeps_what_arrived_up_to_its_bound_and_then_stops_reading(tmp_path):
    """The capture on its own: under the cap every byte lands in `dest`; past
    it the FIFO is gone and a writer gets EPIPE instead of blocking."""
    fifo, dest = tmp_path / "fifo", tmp_path / "dest"
    with grading.StreamCapture(fifo, dest, cap=1 << 20) as stream:
        with open(fifo, "wb", buffering=0) as writer:
            writer.write(b'{"event": "finish"}\n')
            try:
                for _ in range(64):
                    writer.write(b"y" * (1 << 16))
                raised = None
            except BrokenPipeError as exc:
                raised = exc
    assert stream.overflow and raised is not None and not fifo.exists()
    assert dest.read_bytes().startswith(b'{"event": "finish"}\n')
    assert dest.stat().st_size <= 1 << 20
    assert "report tampering" in stream.overflow_result(1.0).evidence
