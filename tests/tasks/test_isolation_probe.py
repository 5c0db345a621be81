"""Isolation on real tasks: the shipped canary tasks and a mutation task from
`touchstone propose mutation` run isolated with their reference (the honest
solution), on both backends; the probe's record is tied to the task's content."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from touchstone.harness import HiddenSuite
from touchstone.tasks.isolation import probe_isolation, record_isolation, recorded_isolation
from touchstone.tasks.schema import load_task
from touchstone.verify.canaries import TASKS

INFLECTION = "inflection==0.5.1#sha256=1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417"


def test_canary_references_run_isolated(sandbox_backend: str, tmp_path: Path):
    for task_dir in sorted(d for d in TASKS.iterdir() if (d / "reference").is_dir()):
        shipped = recorded_isolation(load_task(task_dir))
        assert shipped is not None and shipped.status == "isolated", (
            f"{task_dir.name}: its isolation.json is missing or from another isolation harness: re-probe it "
            "(touchstone.tasks.isolation.probe_isolation(load_task(dir), 'bwrap'))"
        )
        task = load_task(shutil.copytree(task_dir, tmp_path / task_dir.name))
        (task.dir / "isolation.json").unlink()
        assert recorded_isolation(task) is None
        verdict = probe_isolation(task, sandbox_backend)
        assert verdict.status == "isolated" and verdict.ok, (task.id, verdict.detail)
        assert recorded_isolation(task) == verdict  # recorded by the probe
        record_isolation(task, verdict)  # idempotent
        assert load_task(task.dir).content_hash == task.content_hash  # the record is not part of the task
    # decided by another isolation harness (before a fix to it): probed again
    record_isolation(task, verdict.model_copy(update={"judge": "an-older-harness"}))
    assert recorded_isolation(task) is None
    (task.dir / "task.json").write_text(json.dumps({**json.loads((task.dir / "task.json").read_text()),
                                                    "statement": "changed"}))  # fmt: skip
    assert recorded_isolation(load_task(task.dir)) is None  # probed on other content: not trusted


def test_a_task_whose_reference_fails_isolated_is_not_isolated(tmp_path: Path):
    """A test that reads the candidate's source cannot run isolated (the
    judge holds no candidate file): the probe says so, and records it."""
    task = load_task(shutil.copytree(TASKS / "libfix", tmp_path / "libfix"))
    (task.dir / "isolation.json").unlink()
    (task.hidden_tests_dir / "tests" / "test_source.py").write_text(
        "import inspect\nfrom lib import clamp\n\ndef test_short():\n    assert len(inspect.getsource(clamp)) < 500\n"
    )
    task = load_task(task.dir)
    verdict = probe_isolation(task, "bwrap")
    assert verdict.status == "not_isolated" and "test_short" in verdict.detail, verdict.detail
    assert recorded_isolation(task) == verdict


@pytest.mark.slow
def test_a_proposed_mutation_task_runs_isolated(tmp_path: Path, sandbox_backends: list[str]):
    res = CliRunner().invoke(main, ["propose", "mutation", "--seed", INFLECTION, "--n", "1", "--k", "1",
                                    "--out", str(tmp_path), "--workers", "1", "--backend", "bwrap"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (task_dir,) = [p for p in tmp_path.iterdir() if (p / "task.json").is_file()]
    task = load_task(task_dir)
    for backend in sandbox_backends:
        verdict = probe_isolation(task, backend)
        assert verdict.status == "isolated", (backend, verdict.detail)
    # the unfixed mutant fails isolated, on exactly the tests the mutation broke
    suite = HiddenSuite(task, task.required_tests)
    with tempfile.TemporaryDirectory() as tmp:
        mutant = suite.run_isolated(suite.compose_isolated(Path(tmp)), 0, backend="bwrap")
    assert mutant.status == "fail" and set(mutant.failed) == set(task.fail_to_pass), mutant.evidence
