"""`touchstone experiment ... --set`: JSON values, and bad LoRA settings refused before anything runs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cli import main


@pytest.mark.parametrize("command", ["filter-ablation", "credit"])
@pytest.mark.parametrize(
    ("value", "named"),
    [('{"rank": 4}', "unknown key(s) rank"), ("lora", "expected a mapping"), ('{"r": 4', "peft: not JSON")],
)
def test_a_bad_peft_setting_is_named_and_nothing_runs(command, value, named, tmp_path):
    out = tmp_path / "out"
    printed = CliRunner().invoke(main, ["experiment", command, "--out", str(out), f"--set=peft={value}"])
    assert printed.exit_code == 2 and named in printed.output, printed.output
    assert not out.exists()


def test_a_json_value_reaches_the_config_as_json(tmp_path):
    from cli.experiment import set_fields
    from touchstone.experiments.filter_ablation import AblationConfig

    fields = set_fields(('peft={"r": 16, "top_layers": 16}', "max_steps=3", "backend=bwrap"))
    cfg = AblationConfig.model_validate(fields)
    assert cfg.peft == {"r": 16, "top_layers": 16} and cfg.max_steps == 3 and cfg.backend == "bwrap"
