"""Red team: what the sandbox produces step after step must not pile up in the
harness. Snapshots keep digests, not contents; a replay keeps a fixed budget
of the text it audits. Peak memory is measured in a fresh interpreter (the
harness's own process, not the sandbox's), as a bound, not a timing: its
VmHWM, the peak of its own address space (ru_maxrss would also count the
forking pytest process's memory, which Linux carries across exec)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FILES, FILE_BYTES = 128, 64 << 10  # 8 MiB of small text files, all rewritten at every step
# A step's command: every file rewritten with text no earlier step wrote.
REWRITE = (
    'python3 -c "import sys\nfor i in range({files}):\n'
    "    open('f%03d.txt' % i, 'w').write(('step {step:03d} file %03d line %09d\\n' % (i, 0)) * {lines})\""
)


def _rewrite(step: int) -> str:
    return REWRITE.format(files=FILES, step=step, lines=FILE_BYTES // 32)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(FILES):
        (ws / f"f{i:03d}.txt").write_text(f"pristine {i}\n" * (FILE_BYTES // 16))
    return ws


# The peak resident size of this process's address space, in bytes.
PEAK = "int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:'))) * 1024"


def _fresh(script: str, ws: Path, backend: str, steps: int) -> dict:
    """Run `script` in a fresh interpreter on (workspace, backend, the steps' commands as JSON)."""
    commands = json.dumps([_rewrite(step) for step in range(steps)])
    done = subprocess.run([sys.executable, "-c", script.replace("PEAK", PEAK), str(ws), backend, commands],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_SESSION = """
import json, sys
from pathlib import Path
from touchstone.sandbox import open_sandbox
peaks = []
with open_sandbox(Path(sys.argv[1]), sys.argv[2]) as sb:
    for command in json.loads(sys.argv[3]):
        assert sb.exec(command).exit_code == 0
        sb.snapshot()
        d = sb.diff()
        assert len(d.modified) == 128 and not d.binary
        peaks.append(PEAK)
print(json.dumps({"peaks": peaks}))
"""


def test_snapshots_and_diffs_after_every_step_do_not_accumulate(tmp_path, sandbox_backend):
    """16 steps, each rewriting the whole 8 MiB workspace with new text, a
    snapshot and a diff after each: the peak stops growing after the first
    steps. While contents were kept it grew by a workspace's worth per step
    (about 96 MiB over steps 4-16); a diff's 16 MiB patch landing in fresh
    memory once may still move the peak by that much."""
    peaks = _fresh(_SESSION, _workspace(tmp_path), sandbox_backend, 16)["peaks"]
    grown = peaks[-1] - peaks[3]
    assert grown < 4 * FILES * FILE_BYTES, f"peak grew {grown >> 20} MiB over steps 4-16: {[p >> 20 for p in peaks]}"


_REPLAY = """
import json, sys
from pathlib import Path
from touchstone.verify.replay import replay
messages = [{"role": "user", "content": "rewrite"}]
for s, command in enumerate(json.loads(sys.argv[3])):
    args = json.dumps({"command": command})
    call = {"id": f"c{s}", "type": "function", "function": {"name": "bash", "arguments": args}}
    messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
rep = replay(Path(sys.argv[1]), messages, backend=sys.argv[2])
peak = PEAK
print(json.dumps({"steps": rep.n_steps, "refused": rep.refused, "peak": peak, "files": len(rep.files)}))
"""
REPLAY_PEAK_BUDGET = 256 << 20  # interpreter, imports, one step's files, the 32 MiB audit budget


def test_a_replay_keeps_a_fixed_budget_of_text_and_refuses_past_it(tmp_path, sandbox_backend):
    """24 steps x 8 MiB of new text: more than the audit reads. The run is
    refused with the reason (the agent's outcome) and the harness's peak stays
    under a fixed budget (about 400 MiB were kept before: every step's text
    in audit events, every small file's contents in the sandbox)."""
    out = _fresh(_REPLAY, _workspace(tmp_path), sandbox_backend, 24)
    assert out["refused"] and "more than the action audit reads" in out["refused"], out
    assert out["peak"] < REPLAY_PEAK_BUDGET, f"replay peak {out['peak'] >> 20} MiB"


def test_a_replay_within_the_budget_is_not_refused(tmp_path, sandbox_backend):
    out = _fresh(_REPLAY, _workspace(tmp_path), sandbox_backend, 3)
    assert out["refused"] is None and out["steps"] == 3 and out["files"] == FILES, out
