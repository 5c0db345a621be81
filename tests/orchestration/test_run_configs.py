"""Shipped run configs load and validate against the round job; unknown keys
and values outside a closed choice are refused by name; the schedule carries
the configured run config."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from orchestration.definitions import defs
from orchestration.run_config import RunConfigError, load_run_config, load_run_configs, merge_run_configs
from orchestration.schedules import next_round_request
from touchstone.agent.policies.spec import PolicySpec

DEPLOY = Path(__file__).parents[2] / "orchestration" / "deploy"
CLUSTER_ENV = {"TOUCHSTONE_DATA_ROOT": "s3://bucket/touchstone", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}


@pytest.fixture
def round_job():
    return defs.resolve_job_def("round")


@pytest.mark.parametrize("name", ["cluster.yaml", "local-served.yaml", "local-selfplay.yaml"])
def test_shipped_run_configs_validate_against_the_round_job(round_job, monkeypatch, name):
    for key, value in CLUSTER_ENV.items():
        monkeypatch.setenv(key, value)
    assert dg.validate_run_config(round_job, load_run_config(DEPLOY / name))


def test_the_selfplay_config_turns_self_proposal_on_next_to_procedural_tasks():
    from orchestration.resources import DataBuildConfig, ProposeConfig

    ops = load_run_config(DEPLOY / "local-selfplay.yaml")["ops"]
    mix = ProposeConfig(**ops["proposed_tasks"]["config"]).mix()
    assert mix.procedural > 0 and mix.self_play.n > 0 and mix.self_play.group_size >= 2
    assert DataBuildConfig(**ops["training_data"]["config"]).data_config().proposer.invalid_penalty < 0
    with pytest.raises(ValueError, match="invalid_penalty"):  # a penalty is never a reward
        DataBuildConfig(proposer_invalid_penalty=0.5).data_config()


def test_the_smollm2_config_is_expert_iteration_on_the_models_own_runs(round_job):
    from orchestration.resources import HeldoutConfig, PolicyResource, TrainerResource, WarmStartConfig
    from orchestration.runner import _run_config_for
    from training.base_models import BASE_MODELS

    run = load_run_config(DEPLOY / "local-smollm2.yaml")
    # `touchstone round run` passes each run the ops config of its own assets: held-out tasks run apart
    assert dg.validate_run_config(round_job, _run_config_for(list(round_job.graph.node_dict), run))
    assert HeldoutConfig(**run["ops"]["heldout_tasks"]["config"]).n_tasks >= 12
    # the brief warm start on teacher runs happens before round 0, and its rows are not replayed into the rounds
    assert WarmStartConfig(**run["ops"]["base_model"]["config"]).of_configured_base
    policy = PolicyResource(**run["resources"]["policy"]["config"])
    trainer = TrainerResource(**run["resources"]["trainer"]["config"])
    assert trainer.base_checkpoint in BASE_MODELS and trainer.trainer_config()["peft"]  # LoRA on the real base
    assert not trainer.replay_warm_start
    # every round samples its own checkpoint, round 0 included, and no teacher attempt is added
    assert policy.round_policies("r000", "/base", 4) == {PolicySpec("hf", "/base"): 4}
    assert policy.round_policies("r002", "/ckpt", 4) == {PolicySpec("hf", "/ckpt"): 4}
    assert run["ops"]["proposed_tasks"]["config"]["level"] == run["ops"]["heldout_tasks"]["config"]["level"]
    # the held-out libraries are held out whole, and some library is left to train on
    seeds = run["ops"]["seed_sources"]["config"]
    assert seeds["heldout"] and set(seeds["heldout"]) < set(seeds["seeds"])


def test_a_run_config_laid_over_another_merges_mappings_and_replaces_everything_else():
    recipe = {"ops": {"a": {"config": {"attempts": 2, "level": "fix"}}},
              "resources": {"server": {"config": {"kind": "none", "args": ["--x"]}}, "trainer": {"config": {"base_checkpoint": "small"}}}}  # fmt: skip
    overlay = {"resources": {"server": {"config": {"kind": "vllm", "args": ["--y"]}},
                             "trainer": {"config": {"base_checkpoint": {"env": "BASE"}}}}}  # fmt: skip
    merged = merge_run_configs(recipe, overlay)
    assert merged["ops"] == recipe["ops"]  # what the overlay does not name stays the recipe's
    assert merged["resources"]["server"]["config"] == {
        "kind": "vllm",
        "args": ["--y"],
    }  # a list is replaced, not joined
    assert merged["resources"]["trainer"]["config"]["base_checkpoint"] == {"env": "BASE"}
    assert recipe["resources"]["server"]["config"]["kind"] == "none"  # neither input is changed


def test_the_gpu_overlay_serves_the_smollm2_recipe_and_leaves_the_recipe_alone(round_job, monkeypatch):
    """orchestration/deploy/gpu-vllm.yaml over local-smollm2.yaml: the same tasks, curriculum,
    held-out libraries and gate, with vLLM serving every sampling step and a base from the
    environment; the merged config validates against the round job."""
    from orchestration.resources import TrainerResource
    from orchestration.runner import _run_config_for

    monkeypatch.setenv("TOUCHSTONE_BASE_CHECKPOINT", "/models/coder")
    recipe = load_run_config(DEPLOY / "local-smollm2.yaml")
    run = load_run_configs([DEPLOY / "local-smollm2.yaml", DEPLOY / "gpu-vllm.yaml"])
    assert dg.validate_run_config(round_job, _run_config_for(list(round_job.graph.node_dict), run))
    assert run["resources"]["server"]["config"]["kind"] == "vllm"
    assert run["resources"]["policy"]["config"]["spec"] == recipe["resources"]["policy"]["config"]["spec"]
    for op in ("seed_sources", "heldout_tasks", "proposed_tasks", "base_model"):
        assert run["ops"][op] == recipe["ops"][op]
    gate = run["ops"]["round_evaluation"]["config"]
    assert (
        gate["promotion_rule"] == "paired" and gate["attempts"] == run["ops"]["base_evaluation"]["config"]["attempts"]
    )
    trainer = run["resources"]["trainer"]["config"]
    assert trainer["base_checkpoint"] == {"env": "TOUCHSTONE_BASE_CHECKPOINT"} and trainer["peft"]["enabled"]
    assert TrainerResource(**{**trainer, "base_checkpoint": "/models/coder"}).trainer_config()["peft"]


def test_a_study_seed_reaches_sampling_and_training_and_leaves_the_recipe_alone(round_job):
    from orchestration.resources import PolicyResource, TrainerResource
    from orchestration.run_config import with_seed
    from orchestration.runner import _run_config_for

    run = load_run_config(DEPLOY / "local-smollm2.yaml")
    seeded = with_seed(run, 1000)
    assert dg.validate_run_config(round_job, _run_config_for(list(round_job.graph.node_dict), seeded))
    policy = PolicyResource(**seeded["resources"]["policy"]["config"])
    trainer = TrainerResource(**seeded["resources"]["trainer"]["config"])
    assert policy.sampling().seed == 1000 and trainer.trainer_config()["seed"] == 1000
    # everything else as configured: same tasks, same sampling temperature, same batch
    assert seeded["ops"] == run["ops"] and policy.temperature == 0.7
    assert trainer.trainer_config()["per_device_train_batch_size"] == 2
    assert PolicyResource(**with_seed({}, 7)["resources"]["policy"]["config"]).seed == 7
    assert "seed" not in run["resources"]["policy"]["config"]  # the loaded config is not changed in place


def test_the_cluster_trainer_config_names_only_real_trl_fields():
    from training.train import check_config

    trainer = load_run_config(DEPLOY / "cluster.yaml")["resources"]["trainer"]["config"]
    check_config(trainer["method"], trainer["config"])


@pytest.mark.parametrize(
    "resources,named",
    [
        ({"trainer": {"config": {"metod": "sft"}}}, "metod"),
        ({"server": {"config": {"kind": "tgi"}}}, "kind"),
        ({"trainer": {"config": {"torch_dtype": "bf16"}}}, "torch_dtype"),
        ({"trainer": {"config": {"peft": {"rank": 8}}}}, "rank"),
    ],
)
def test_unknown_keys_and_closed_choices_are_refused_by_name(round_job, resources, named):
    with pytest.raises(dg.DagsterInvalidConfigError, match=named):
        dg.validate_run_config(round_job, {"resources": resources})


def test_a_run_config_with_an_unknown_section_is_named(tmp_path):
    bad = tmp_path / "run.yaml"
    bad.write_text("resource:\n  trainer: {}\n")
    with pytest.raises(RunConfigError, match="unknown section.*resource"):
        load_run_config(bad)


def test_the_schedule_and_sensor_carry_the_configured_run_config(monkeypatch):
    monkeypatch.setenv("TOUCHSTONE_RUN_CONFIG", str(DEPLOY / "local-served.yaml"))
    request = next_round_request(dg.DagsterInstance.ephemeral())
    assert request.run_config["resources"]["server"]["config"]["kind"] == "transformers"
    # several files, joined as PATH is: the later laid over the earlier
    monkeypatch.setenv("TOUCHSTONE_RUN_CONFIG", f"{DEPLOY / 'local-smollm2.yaml'}:{DEPLOY / 'gpu-vllm.yaml'}")
    monkeypatch.setenv("TOUCHSTONE_BASE_CHECKPOINT", "/models/coder")
    config = next_round_request(dg.DagsterInstance.ephemeral()).run_config
    assert config["resources"]["server"]["config"]["kind"] == "vllm"
    assert config["ops"]["proposed_tasks"]["config"]["level"] == "fix"


def _queued(round_key: str, backfill: str) -> dg.DagsterRun:
    return dg.DagsterRun(
        job_name="round",
        run_id=f"{backfill}-{round_key}",
        tags={"dagster/backfill": backfill, "dagster/partition": round_key},
    )


@pytest.mark.parametrize("source", ["local", "docker"])
def test_a_backfill_of_rounds_runs_one_round_at_a_time(tmp_path, source):
    """Dagster's run queue, with the shipped instance config: while round r001 of a backfill
    runs, r002 of the same backfill waits; another backfill is not held up by it."""
    import yaml
    from dagster._utils.tags import TagConcurrencyLimitsCounter

    from cli.rounds import LOCAL_INSTANCE

    text = LOCAL_INSTANCE if source == "local" else (DEPLOY / "docker" / "dagster.yaml").read_text()
    concurrency = yaml.safe_load(text)["concurrency"]
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({"concurrency": concurrency}))
    limits = dg.DagsterInstance.from_config(str(tmp_path)).get_concurrency_config().run_queue_config
    counter = TagConcurrencyLimitsCounter(limits.tag_concurrency_limits, [_queued("r001", "b1")])
    assert counter.is_blocked(_queued("r002", "b1")) and counter.is_blocked(_queued("r003", "b1"))
    assert not counter.is_blocked(_queued("r002", "b2"))


def test_round_run_refuses_a_bad_run_config_before_running_anything(tmp_path):
    from click.testing import CliRunner

    from cli import main

    bad = tmp_path / "run.yaml"
    bad.write_text("resources:\n  server:\n    config: {kind: vllm, prot: 8000}\n")
    result = CliRunner().invoke(
        main,
        ["round", "run", "-c", str(bad)],
        env={"TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dh")},
    )
    assert result.exit_code == 2 and "prot" in result.output
    assert not (tmp_path / "home" / "seed_sources").exists()
    # a bad overlay on a good recipe is refused as well, by the key it got wrong
    result = CliRunner().invoke(
        main,
        ["round", "run", "-c", str(DEPLOY / "local-smollm2.yaml"), "-c", str(bad)],
        env={"TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dh")},
    )
    assert result.exit_code == 2 and "prot" in result.output


def test_zero_rounds_with_control_and_no_round_yet_is_refused_by_name(tmp_path):
    from click.testing import CliRunner

    from cli import main

    (tmp_path / "dh").mkdir()
    env = {"TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dh")}
    # sources are ensured first (tiny: no warm start, one held-out task, one attempt at it and no
    # likelihood figures: the teacher's reference runs timed this test out on a loaded machine),
    # then no round exists to control
    config = tmp_path / "run.yaml"
    config.write_text(
        "ops:\n  seed_sources: {config: {seeds: [inflection]}}\n  base_model: {config: {n_tasks: 0}}\n"
        "  heldout_tasks: {config: {n_tasks: 1}}\n  base_evaluation: {config: {attempts: 1, likelihood: false}}\n"
    )
    control = CliRunner().invoke(main, ["round", "run", "--rounds", "0", "--control", "-c", str(config)], env=env)
    assert control.exit_code == 1 and "no round to control yet" in control.output
