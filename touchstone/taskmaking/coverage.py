"""Which tests cover which functions of a seed project: its suite runs once,
in the sandbox and the project's environment, under a per-test profile hook
(coverage_plugin.py). The mutation proposer then mutates only functions some
passing test calls: a mutant of uncovered code can never make a test fail."""

from __future__ import annotations

import json
import shlex
import tempfile
from collections import defaultdict
from pathlib import Path

from touchstone.sandbox import Environment, Limits, SandboxError, open_sandbox
from touchstone.tasks.seeding import Seed, copy_clean

_PLUGIN = Path(__file__).with_name("coverage_plugin.py")
_MODULE = "_touchstone_coverage"
_OUT = ".touchstone-coverage.json"


def covered_functions(
    seed: Seed, *, environment: Environment | None, backend: str, timeout: float = 300
) -> dict[str, dict[str, list[str]]]:
    """{source path: {qualified name: [passing tests that call it]}}; empty when
    the run produced nothing (the caller then mutates every function)."""
    test_files = [t for t in seed.tests if t.rsplit("/", 1)[-1] not in ("conftest.py", "__init__.py")]
    with tempfile.TemporaryDirectory(prefix="touchstone-coverage-") as tmp:
        tree = Path(tmp) / "tree"
        copy_clean(seed.root, tree)
        (tree / f"{_MODULE}.py").write_bytes(_PLUGIN.read_bytes())
        command = shlex.join([
            "python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", _MODULE, "-o", "addopts=",
            "--rootdir=/workspace", "--", *test_files,
        ])  # fmt: skip
        with open_sandbox(tree, backend=backend, limits=Limits(timeout_s=timeout + 30), environment=environment) as sb:
            sb.exec(command, timeout=timeout, env={"TOUCHSTONE_COVERAGE_OUT": f"/workspace/{_OUT}"})
            try:
                per_test = json.loads(sb.read_file(_OUT))
            except (SandboxError, ValueError):  # no report: no coverage knowledge
                return {}
    sources = set(seed.sources)
    out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for test, functions in per_test.items():
        for entry in functions:
            path, _, qualname = entry.partition("::")
            if path in sources:
                out[path][qualname].append(test)
    return {path: dict(funcs) for path, funcs in out.items()}
