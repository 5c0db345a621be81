"""What the harness holds of what a sandbox produces: snapshot time and the
harness process's peak memory on a 64 MiB workspace, this tree against a
baseline checkout (today's main, before the bounds of issue 34), side by side.

    python -m benchmarks.bench_snapshot [--baseline DIR] [--repeats 3]

Each figure comes from a fresh interpreter per checkout (peak RSS is its
VmHWM, the peak of its own address space: the sandbox's processes are not in
it, nor, as with ru_maxrss, the memory of the process that started it), the two
checkouts run in alternation so that both see the same machine load; medians
over --repeats. Measures (bwrap: the walks and reads are the harness's, on the
host, whichever backend runs the commands):
- snapshot: `Sandbox.snapshot()` of an unchanged 64 MiB workspace (512 text
  files), the median of 15 in each process;
- session: 8 steps, each rewriting the whole workspace with new text and
  taking a snapshot (as a replay does), then the final diff (as the agent loop
  does): peak RSS. This tree refuses that diff (a 128 MiB patch);
- replay: the same 8 steps replayed by the verifier's `replay`: peak RSS
  (this tree refuses the run at its 32 MiB audit budget);
- replay-small: 8 steps rewriting 2 MiB each, within every bound: peak RSS;
- results flood: an in-process grading run whose candidate writes 512 MiB into
  the results pipe at import: peak RSS."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
FILES, FILE_BYTES, STEPS = 512, 128 << 10, 8  # a 64 MiB workspace of small text files
SMALL_STEP_FILES = 16  # 2 MiB rewritten per step: within every bound of this tree
REWRITE = (
    'python3 -c "import sys\nfor i in range({files}):\n'
    "    open('f%03d.txt' % i, 'w').write(('step {step:03d} file %03d line\\n' % i) * {lines})\""
)
FLOOD = (
    "import os\nfd = os.open(os.environ['TOUCHSTONE_RESULTS'], os.O_WRONLY)\n"
    "try:\n    for _ in range(512):\n        os.write(fd, b'x' * (1 << 20))\nexcept OSError:\n    pass\n"
)

# One measurement in a fresh interpreter of one checkout (its PYTHONPATH and cwd);
# prints {"value": ..., "outcome": ...}. Uses only APIs both checkouts have.
_WORKER = """
import json, statistics, sys, time
from pathlib import Path
measure, ws, commands = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
peak = lambda: int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:"))) / 1024
if measure == "snapshot":
    from touchstone.sandbox import open_sandbox
    with open_sandbox(ws, "bwrap") as sb:
        times = []
        for _ in range(15):
            t = time.perf_counter(); sb.snapshot(); times.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"value": statistics.median(times), "outcome": f"{len(sb._initial)} files"}))
elif measure == "session":
    from touchstone.sandbox import SandboxError, open_sandbox
    with open_sandbox(ws, "bwrap") as sb:
        for command in commands:
            assert sb.exec(command).exit_code == 0
            sb.snapshot()
        try:
            outcome = sb.diff().summary()
        except SandboxError as exc:
            outcome = f"refused ({str(exc)[:60]}...)"
    print(json.dumps({"value": peak(), "outcome": outcome}))
elif measure in ("replay", "replay-small"):
    from touchstone.verify.replay import replay
    messages = [{"role": "user", "content": "rewrite"}]
    for s, command in enumerate(commands):
        call = {"id": f"c{s}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    rep = replay(ws, messages, backend="bwrap")
    refused = getattr(rep, "refused", None)
    print(json.dumps({"value": peak(), "outcome": f"refused ({refused[:60]}...)" if refused else rep.diff.summary()}))
elif measure == "flood":
    from touchstone.harness import grading
    prefixes = grading.test_functions("tests/test_t.py", (ws / "tests" / "test_t.py").read_text())
    res = grading.run_tests(ws, ["tests/test_t.py"], None, prefixes, timeout=120, backend="bwrap")
    print(json.dumps({"value": peak(), "outcome": f"{res.status}: {res.evidence[:60]}"}))
"""
MEASURES = [  # (measure, label, unit)
    ("snapshot", "snapshot of an unchanged 64 MiB workspace (512 files)", "ms"),
    ("session", "harness peak, 8 steps (all 64 MiB rewritten, snapshot) then a diff", "MiB"),
    ("replay", "harness peak, replay of the same 8 steps", "MiB"),
    ("replay-small", "harness peak, replay of 8 steps rewriting 2 MiB each", "MiB"),
    ("flood", "harness peak, grading run with 512 MiB into the results pipe", "MiB"),
]


def workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    for i in range(FILES):
        (ws / f"f{i:03d}.txt").write_text(f"pristine {i:03d} line\n" * (FILE_BYTES // 20))
    return ws


def flood_tree(root: Path) -> Path:
    tree = root / "flood"
    (tree / "pkg").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "pkg" / "__init__.py").write_text("")
    (tree / "pkg" / "mod.py").write_text(FLOOD)
    (tree / "tests" / "test_t.py").write_text("import pkg.mod\n\n\ndef test_a():\n    pass\n")
    return tree


def measure_once(checkout: Path, measure: str, ws: Path) -> dict:
    files = SMALL_STEP_FILES if measure == "replay-small" else FILES
    commands = [REWRITE.format(files=files, step=s, lines=FILE_BYTES // 20) for s in range(STEPS)]
    done = subprocess.run([sys.executable, "-c", _WORKER, measure, str(ws), json.dumps(commands)], cwd=checkout,
                          env={**os.environ, "PYTHONPATH": str(checkout)}, capture_output=True, text=True,
                          timeout=900)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{measure} in {checkout}: {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def commit_of(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or checkout.name


def compare(baseline: Path | None, repeats: int) -> list[dict]:
    sides = [("this tree", ROOT)] + ([(f"baseline {commit_of(baseline)}", baseline)] if baseline else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"flood": flood_tree(Path(tmp))}
        ws = workspace(Path(tmp))
        for measure, label, unit in MEASURES:
            samples: dict[str, list[dict]] = {name: [] for name, _ in sides}
            for i in tqdm(range(repeats), desc=measure):
                for name, checkout in sides[i % 2 :] + sides[: i % 2]:  # alternate which goes first
                    samples[name].append(measure_once(checkout, measure, trees.get(measure, ws)))
            row = {"measure": label, "unit": unit}
            for name, _ in reversed(sides):  # baseline first
                row[f"{name} median"] = round(statistics.median(s["value"] for s in samples[name]), 1)
                row[f"{name} outcome"] = samples[name][-1]["outcome"]
            rows.append(row)
    return rows


def notes(rows: list[dict]) -> list[str]:
    out = []
    for row in rows:
        before = next((v for k, v in row.items() if k.startswith("baseline") and k.endswith("median")), None)
        after = row["this tree median"]
        if before:
            out.append(f"{row['measure']}: {before:g} → {after:g} {row['unit']} ({after / before:.2f}×)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=os.environ.get("TOUCHSTONE_BENCH_BASELINE"),
        help="a checkout to measure too, side by side (e.g. /work/main before issue 34)",
    )
    args = parser.parse_args()
    rows = compare(args.baseline, args.repeats)
    print(json.dumps({"bench": "snapshot", "results": rows, "notes": notes(rows)}, indent=2))


if __name__ == "__main__":
    main()
