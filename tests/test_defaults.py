"""Every default lives once, on a library model's field (or a library call's
parameter); a round's Dagster config and the command line read it from there
(`touchstone.config.field_of`, `cli.options.option_of`). These tests build what
a user gets from each (a round's resources and configs as Dagster constructs
them, each command's parsed options) and compare it with the library's own
objects: the same, except the values a laptop round changes on purpose
(`touchstone.rounds.CPU_ROUND`), each of which differs from the library's."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import click
import pytest
from pydantic import BaseModel, Field

from cli import main
from cli.options import option_of
from orchestration.deploy.stack import Stack
from orchestration.policy_server import PolicyServerResource
from orchestration.resources import (
    DataBuildConfig,
    EvalConfig,
    HeldoutConfig,
    PolicyResource,
    ProposeConfig,
    RolloutConfig,
    SandboxResource,
    TrainerResource,
    VerifierResource,
    WarmStartConfig as RoundWarmStart,
)
from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.serving import ServerSpec
from touchstone.agent.rollout import solve
from touchstone.config import default_of, field_of, parameter_default
from touchstone.data.schema import DataConfig, ProposerConfig
from touchstone.episode.trajectory import Sampling
from touchstone.evaluate.metrics import BOOTSTRAP_RESAMPLES
from touchstone.evaluate.promotion import PromotionPolicy
from touchstone.experiments.credit_study import CREDIT_ARMS
from touchstone.experiments.filter_ablation import AblationConfig
from touchstone.rounds import CPU_ROUND
from touchstone.sandbox import BACKENDS, DEFAULT_BACKEND, Limits, parse_size
from touchstone.taskmaking.heldout import HELDOUT_RNG_SEED
from touchstone.taskmaking.proposers.llm import propose_llm
from touchstone.taskmaking.proposers.mutation import propose_mutation
from touchstone.taskmaking.proposers.selfplay import PROPOSAL_MAX_TOKENS, SelfPlayConfig
from touchstone.taskmaking.sources import SourceMix
from touchstone.taskmaking.validate import ValidationConfig
from touchstone.tasks.seeding import shipped_names
from touchstone.verify.batch import verify_batch
from touchstone.verify.report import DEFAULT_REPLAYS
from training.evaluation import evaluate_checkpoint
from training.model_options import DEFAULT_DTYPE, DTYPES
from training.warm_start import WarmStartConfig

# --- a round: what Dagster's resources and configs give the library --------------------------


def test_a_rounds_policy_samples_and_limits_episodes_as_the_library_but_for_the_cpu_profile() -> None:
    policy = PolicyResource()
    assert policy.sampling() == Sampling(max_tokens=CPU_ROUND["max_tokens"], context_window=CPU_ROUND["context_window"])
    model = EpisodeLimits(max_turns=CPU_ROUND["max_turns"], time_budget_s=CPU_ROUND["time_budget_s"])
    assert policy.limits(PolicySpec.parse("hf:/ckpt")) == model
    teacher = model.model_copy(update={"max_turns": CPU_ROUND["teacher_max_turns"]})
    assert policy.limits(PolicySpec.parse("teacher")) == teacher


def test_a_rounds_task_sources_warm_start_and_held_out_set_are_the_librarys_but_for_the_cpu_profile() -> None:
    # a round also asks its policy for bug proposals (ProposeConfig.self_kinds), the library for standalone tasks
    assert ProposeConfig().mix() == SourceMix(
        operators=CPU_ROUND["operators"], self_play=SelfPlayConfig(kinds=["standalone", "bug"])
    )
    assert ProposeConfig().self_max_tokens == PROPOSAL_MAX_TOKENS
    assert RoundWarmStart().warm_start_config() == WarmStartConfig(operators=CPU_ROUND["operators"])
    assert (HeldoutConfig().rng_seed, HeldoutConfig().operators) == (HELDOUT_RNG_SEED, CPU_ROUND["operators"])


def test_a_rounds_data_evaluation_and_promotion_are_the_librarys_but_for_the_cpu_profile() -> None:
    assert DataBuildConfig().data_config() == DataConfig()
    assert EvalConfig().promotion_policy() == PromotionPolicy()
    assert EvalConfig().bootstrap == BOOTSTRAP_RESAMPLES
    assert RolloutConfig().attempts == parameter_default(solve, "attempts")
    assert EvalConfig().attempts == CPU_ROUND["eval_attempts"]
    assert VerifierResource().replays == CPU_ROUND["replays"]
    assert (SandboxResource().backend, SandboxResource().workers) == (DEFAULT_BACKEND, CPU_ROUND["workers"])


def test_a_rounds_policy_server_is_the_librarys_server_spec() -> None:
    spec = ServerSpec(kind="vllm", checkpoint_hash="0" * 64)
    # `kind` is the resource's own switch ("none": no server), which ServerSpec leaves to its caller
    shared = [f.name for f in dataclasses.fields(ServerSpec) if f.name in PolicyServerResource.model_fields]
    shared.remove("kind")
    assert len(shared) == 8
    assert {f: getattr(PolicyServerResource(), f) for f in shared} == {f: getattr(spec, f) for f in shared}


def test_a_rounds_trainer_loads_weights_as_the_library_does() -> None:
    dtype = TrainerResource.model_fields["torch_dtype"]
    assert (TrainerResource().torch_dtype, typing.get_args(dtype.annotation)) == (DEFAULT_DTYPE, DTYPES)


def test_an_hf_policy_acts_within_the_windows_its_trainer_trained_on() -> None:
    assert PolicyResource().sampling().context_window == TrainerResource().max_length == CPU_ROUND["context_window"]


# (round config, its field) -> (library model, its field): read, not copied
DERIVED = {
    (PolicyResource, "temperature"): (Sampling, "temperature"),
    (PolicyResource, "seed"): (Sampling, "seed"),
    (PolicyResource, "max_tokens"): (Sampling, "max_tokens"),
    (PolicyResource, "context_window"): (Sampling, "context_window"),
    (PolicyResource, "max_turns"): (EpisodeLimits, "max_turns"),
    (PolicyResource, "time_budget_s"): (EpisodeLimits, "time_budget_s"),
    (PolicyResource, "teacher_max_turns"): (WarmStartConfig, "teacher_max_turns"),
    (ProposeConfig, "n_tasks"): (SourceMix, "procedural"),
    (ProposeConfig, "operators"): (SourceMix, "operators"),
    (ProposeConfig, "n_imported"): (SourceMix, "n_imported"),
    (ProposeConfig, "self_proposals"): (SelfPlayConfig, "n"),
    (ProposeConfig, "self_group_size"): (SelfPlayConfig, "group_size"),
    (ProposeConfig, "self_references"): (SelfPlayConfig, "references"),
    (ProposeConfig, "self_kinds"): (SelfPlayConfig, "kinds"),
    (HeldoutConfig, "operators"): (SourceMix, "operators"),
    (DataBuildConfig, "proposer_invalid_penalty"): (ProposerConfig, "invalid_penalty"),
    (EvalConfig, "promotion_metric"): (PromotionPolicy, "metric"),
    (EvalConfig, "promotion_rule"): (PromotionPolicy, "rule"),
    (EvalConfig, "on_tie"): (PromotionPolicy, "on_tie"),
    (EvalConfig, "max_hack_rate_increase"): (PromotionPolicy, "max_hack_rate_increase"),
    **{(RoundWarmStart, f): (WarmStartConfig, f) for f in ("n_tasks", "max_steps", "learning_rate", "operators")},
}


@pytest.mark.parametrize(("config", "field"), sorted(DERIVED, key=lambda k: (k[0].__name__, k[1])))
def test_a_round_field_takes_its_bounds_and_description_from_the_library(config, field) -> None:
    model, name = DERIVED[(config, field)]
    ours, library = config.model_fields[field], model.model_fields[name]
    assert ours.metadata == library.metadata
    assert ours.description.startswith(library.description)
    if ours.default != default_of(model, name):  # a round's own value says so, and the library's
        assert ours.description.endswith(f"(a round: {ours.default!r}; library: {default_of(model, name)!r})")


def test_a_round_field_follows_its_library_default() -> None:
    """What `field_of` promises: change the library's default and the round's field changes."""

    class Library(BaseModel):
        turns: int = Field(50, ge=1, description="Turns.")

    class Changed(Library):
        turns: int = Field(12, ge=1, description="Turns.")

    class Round(BaseModel):
        turns: int = field_of(Library, "turns")
        changed: int = field_of(Changed, "turns")
        own: int = field_of(Library, "turns", default=6)

    assert (Round().turns, Round().changed, Round().own) == (50, 12, 6)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Round(turns=0)


def test_every_cpu_override_is_a_round_setting_that_differs_from_the_library() -> None:
    """An override equal to the library's default would be a second copy of it."""
    library = {
        "max_tokens": Sampling().max_tokens,
        "context_window": Sampling().context_window,
        "max_turns": EpisodeLimits().max_turns,
        "time_budget_s": EpisodeLimits().time_budget_s,
        "teacher_max_turns": WarmStartConfig().teacher_max_turns,
        "eval_attempts": parameter_default(evaluate_checkpoint, "attempts"),
        "replays": DEFAULT_REPLAYS,
        "workers": parameter_default(solve, "workers"),
        "seeds": shipped_names(),  # `touchstone propose mutation` without --seed: every shipped seed
        "operators": SourceMix().operators,  # every operator
    }
    assert set(CPU_ROUND) == set(library)
    assert [k for k in CPU_ROUND if CPU_ROUND[k] == library[k]] == []


def test_a_round_field_keeps_the_librarys_bounds_where_run_config_enters() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        RoundWarmStart(n_tasks=-1)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        PolicyResource(max_turns=0)


# --- the command line: what each command passes the library when no option is given -----------


def command_of(command: str) -> click.Command:
    cmd = main
    for part in command.split():
        cmd = cmd.get_command(click.Context(cmd), part)
    return cmd


def parsed(command: str, *args: str) -> dict:
    """The parameters `touchstone COMMAND ARGS` runs with, as click parses them."""
    return command_of(command).make_context(command.split()[-1], list(args)).params


@pytest.fixture
def tasks_dir(tmp_path: Path) -> str:
    (tmp_path / "tasks").mkdir()
    return str(tmp_path / "tasks")


def test_solve_samples_and_limits_episodes_as_the_library(tasks_dir: str) -> None:
    p = parsed("solve", tasks_dir, "--policy", "teacher", "--out", "o")
    assert Sampling(**{k: p[k] for k in Sampling.model_fields}) == Sampling()
    assert EpisodeLimits(max_turns=p["max_turns"], time_budget_s=p["time_budget"]) == EpisodeLimits()
    assert (p["attempts"], p["workers"]) == (parameter_default(solve, "attempts"), parameter_default(solve, "workers"))
    assert p["backend"] == DEFAULT_BACKEND


def test_eval_measures_a_checkpoint_as_a_laptop_round_does(tmp_path: Path, tasks_dir: str) -> None:
    p = parsed("eval", "--checkpoint", tasks_dir, "--tasks", tasks_dir, "--out", "o")
    assert Sampling(temperature=p["temperature"], max_tokens=p["max_tokens"], context_window=p["context_window"]) == (
        PolicyResource().sampling()
    )
    assert (p["attempts"], p["workers"], p["backend"]) == (
        EvalConfig().attempts,
        SandboxResource().workers,
        SandboxResource().backend,
    )
    # its one default of its own: 8 turns, where a laptop round's model gets CPU_ROUND's 6
    assert p["max_turns"] == 8 != CPU_ROUND["max_turns"]


def test_verify_grades_as_the_library(tmp_path: Path, tasks_dir: str) -> None:
    traj = tmp_path / "t.jsonl"
    traj.write_text("")
    assert parsed("verify", tasks_dir, str(traj))["replays"] == DEFAULT_REPLAYS
    p = parsed("verify-batch", "--tasks", tasks_dir, "--trajectories", str(traj), "--out", "o")
    assert (p["replays"], p["workers"], p["backend"]) == (
        DEFAULT_REPLAYS,
        parameter_default(verify_batch, "workers"),
        DEFAULT_BACKEND,
    )


def test_the_proposers_validate_and_propose_as_the_library() -> None:
    from cli.tasks import _cfg

    p = parsed("propose self", "--policy", "teacher", "--out", "o")
    assert SelfPlayConfig(n=p["n"], group_size=p["group_size"], references=p["references"], kinds=p["kinds"]) == (
        SelfPlayConfig(n=p["n"])
    )
    assert p["max_tokens"] == PROPOSAL_MAX_TOKENS
    assert _cfg(p["backend"], p["k"], p["threshold"]) == ValidationConfig()
    p = parsed("propose mutation", "--out", "o")
    assert (p["n"], p["rng_seed"], _cfg(p["backend"], p["k"], p["threshold"])) == (
        parameter_default(propose_mutation, "n"),
        parameter_default(propose_mutation, "rng_seed"),
        ValidationConfig(),
    )
    p = parsed("propose llm", "--policy", "teacher", "--out", "o")
    assert (p["n"], p["attempts"]) == (parameter_default(propose_llm, "n"), parameter_default(propose_llm, "attempts"))


def test_the_filter_ablation_runs_the_librarys_experiment() -> None:
    p = parsed("experiment filter-ablation")
    splits = p["splits"].split(",")
    assert AblationConfig(splits=splits, rounds=p["rounds"], hack_rate=p["hack_rate"]) == AblationConfig()
    assert parsed("experiment credit")["arms"] == ",".join(CREDIT_ARMS)


def test_sandbox_run_limits_a_command_as_the_library() -> None:
    p = parsed("sandbox run", "--", "true")
    assert Limits(timeout_s=p["timeout"], memory_bytes=parse_size(p["memory"])) == Limits()
    assert p["backend"] == DEFAULT_BACKEND


def test_deploy_up_starts_the_librarys_stack(tmp_path: Path) -> None:
    p = parsed("deploy up", "--root", str(tmp_path))
    stack = Stack(root=tmp_path)
    assert (p["name"], p["web_port"], p["pg_port"], p["sandbox_slots"]) == (
        stack.name,
        stack.web_port,
        stack.pg_port,
        stack.sandbox_slots,
    )


def test_an_option_follows_its_library_field() -> None:
    """What `option_of` promises: the field's default, bounds and description, unless a command names its own."""

    class Library(BaseModel):
        turns: int = Field(50, ge=1, description="Turns per episode.")
        rate: float = Field(0.3, ge=0, le=1, description="A share.")

    @click.command()
    @option_of(Library, "turns")
    @option_of(Library, "rate", "--hack-rate")
    def command(turns: int, hack_rate: float) -> None: ...

    assert command.make_context("command", []).params == {"turns": 50, "hack_rate": 0.3}
    with pytest.raises(click.BadParameter):
        command.make_context("command", ["--turns", "0"])
    with pytest.raises(click.BadParameter):
        command.make_context("command", ["--hack-rate", "1.5"])
    assert [p.help for p in command.params] == ["Turns per episode.", "A share."]


def test_every_backend_option_offers_the_librarys_backends() -> None:
    for command in ("solve", "verify", "verify-batch", "sandbox run", "eval"):
        [backend] = [p for p in command_of(command).params if p.name == "backend"]
        assert (backend.default, tuple(backend.type.choices)) == (DEFAULT_BACKEND, BACKENDS), command
