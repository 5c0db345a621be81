"""`make bench`: run every area's benchmark and write its figures to docs/BENCHMARKS.md.

    python -m benchmarks.run [AREA ...]        # default: every benchmarks/bench_<area>.py

Each `benchmarks/bench_<area>.py` is a script (`python -m benchmarks.bench_<area>`)
that prints, as the last thing on stdout, one JSON object:
    {"bench": AREA, "results": [row, ...], "notes": ["...", ...]}   (notes optional)
Rows are flat dicts; rows with the same keys form one table. Each area gets its own
section of docs/BENCHMARKS.md, between markers, replaced on every run of that area
and stamped with the machine and the date, so areas can be re-run one at a time."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "BENCHMARKS.md"
FIRST = ["sandbox"]  # everything else depends on it, so it leads the page
TIMEOUT_S = 3600
HEADER = """# Benchmarks

Written by `make bench` (`python -m benchmarks.run [AREA ...]`); each section is
replaced when its area is re-run. Figures are from the machine named in each
section, under whatever else it was running (the load average is recorded).
"""


def areas() -> list[str]:
    found = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))
    return [a for a in FIRST if a in found] + [a for a in found if a not in FIRST]


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    mem_kb = int(
        next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    )
    return (
        f"{os.cpu_count()} × {cpu}, {mem_kb / 2**20:.0f} GiB RAM, Linux {platform.release()}, "
        f"Python {platform.python_version()}; load average {load_average()}"
    )


def load_average() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def run_area(area: str) -> tuple[dict | None, str]:
    """(parsed JSON, error text) of one area's benchmark script."""
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.bench_{area}"], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    if done.returncode != 0:
        return None, f"exit status {done.returncode}:\n{done.stderr[-2000:]}"
    start = done.stdout.rfind("\n{") + 1  # the last top-level JSON object
    try:
        return json.loads(done.stdout[start:]), ""
    except json.JSONDecodeError as exc:
        return None, f"no JSON result on stdout ({exc}):\n{done.stdout[-2000:]}"


def tables(rows: list[dict]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(row)
    out = []
    for keys, members in groups.items():
        out.append("| " + " | ".join(keys) + " |")
        out.append("|" + " --- |" * len(keys))
        out += ["| " + " | ".join(_cell(row[k]) for k in keys) + " |" for row in members]
        out.append("")
    return "\n".join(out)


def _cell(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def section(area: str, result: dict | None, error: str, started: str, wall_s: float, where: str) -> str:
    body = [f"## {area}", "", f"_{started} UTC, {wall_s:.0f} s — {where}_", ""]
    if result is None:
        body += ["**The benchmark failed**:", "", "```", error.strip(), "```", ""]
    else:
        body.append(tables(result.get("results", [])))
        body += [f"- {note}" for note in result.get("notes", [])]
        body.append("")
    return "\n".join([f"<!-- bench:{area} start -->", *body, f"<!-- bench:{area} end -->"])


def write_section(area: str, text: str) -> None:
    """Replace (or add, keeping the area order) one area's section of the page."""
    doc = DOC.read_text() if DOC.exists() else HEADER
    pattern = re.compile(rf"<!-- bench:{re.escape(area)} start -->.*?<!-- bench:{re.escape(area)} end -->", re.S)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: text, doc)
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    DOC.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("areas", nargs="*", help=f"default: all ({', '.join(areas())})")
    chosen = parser.parse_args(argv).areas or areas()
    unknown = sorted(set(chosen) - set(areas()))
    if unknown:
        parser.error(f"no benchmark for {', '.join(unknown)}; known: {', '.join(areas())}")
    from rich.console import Console

    console, failed = Console(stderr=True), []
    for n, area in enumerate(chosen, 1):
        where = machine()
        started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        t0 = time.monotonic()
        with console.status(f"bench {n}/{len(chosen)}: {area}"):
            try:
                result, error = run_area(area)
            except subprocess.TimeoutExpired:
                result, error = None, f"timed out after {TIMEOUT_S} s"
        where += f" at the start, {load_average()} at the end"  # a load that changed mid-run skews comparisons
        write_section(area, section(area, result, error, started, time.monotonic() - t0, where))
        console.print(f"bench {area}: {'ok' if result else 'FAILED'} ({time.monotonic() - t0:.0f} s)")
        if result is None:
            failed.append(area)
    console.print(f"figures written to {DOC.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
