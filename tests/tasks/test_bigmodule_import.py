"""Importing a SWE-bench-format instance of realistic size (tests/tasks/bigmodule_fixture.py:
a 6,400-line module whose fix is one line of one method of a 3,400-line class): the
mutants come from that method only, and the human-written tests keep the task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tasks.bigmodule_fixture import ENV_SPECS, make_instance
from touchstone.taskmaking.proposers.common import VERDICTS_FILE
from touchstone.taskmaking.proposers.swebench import import_swebench
from touchstone.taskmaking.validate import Validation, ValidationConfig


@pytest.mark.slow
def test_a_one_line_fix_in_a_big_class_is_imported_and_kept(tmp_path: Path) -> None:
    repos, jsonl, _inst, _own_s = make_instance(tmp_path)
    spec = tmp_path / "env.json"
    spec.write_text(json.dumps(ENV_SPECS))
    cfg = ValidationConfig(backend="bwrap", cross_backend=False)
    result = import_swebench(jsonl, repos, tmp_path / "out", env_spec=spec, cfg=cfg)
    v = Validation.model_validate_json((tmp_path / "out" / VERDICTS_FILE).read_text().splitlines()[0])
    assert result.kept == 1, v.detail
    mutation = v.check("mutation")
    assert 0 < mutation.evidence["sites"] <= 12  # the method's sites, not the class's thousands
    assert all("Decimal._round_half_down" in m for m in mutation.evidence["mutants"])
    assert v.mutation_score is not None and v.check("leak_probe").status == "not_run"
