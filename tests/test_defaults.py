"""Defaults live once: the command line shows the library's defaults, and a
round's Dagster config uses the same ones except where its laptop-CPU profile
(`orchestration.resources.CPU_ROUND`) differs on purpose."""

from __future__ import annotations

import click
import pytest

from cli import main
from touchstone.taskmaking.sources import SourceMix
from orchestration.resources import (
    CPU_ROUND,
    EvalConfig,
    PolicyResource,
    RolloutConfig,
    SandboxResource,
    VerifierResource,
)
from touchstone.agent.loop import EpisodeLimits
from touchstone.episode.trajectory import Sampling
from touchstone.sandbox import BACKENDS, DEFAULT_BACKEND
from touchstone.tasks.seeding import shipped_names
from touchstone.verify.report import DEFAULT_REPLAYS
from training.warm_start import WarmStartConfig


def cli_default(command: str, option: str):
    cmd = main.get_command(click.Context(main), command)
    return next(p for p in cmd.params if p.name == option).default


# (command, option) -> (Dagster config class, field)
SHARED = {
    ("solve", "temperature"): (PolicyResource, "temperature"),
    ("solve", "seed"): (PolicyResource, "seed"),
    ("solve", "max_tokens"): (PolicyResource, "max_tokens"),
    ("solve", "context_window"): (PolicyResource, "context_window"),
    ("solve", "max_turns"): (PolicyResource, "max_turns"),
    ("solve", "time_budget"): (PolicyResource, "time_budget_s"),
    ("solve", "attempts"): (RolloutConfig, "attempts"),
    ("eval", "attempts"): (EvalConfig, "attempts"),
    ("solve", "backend"): (SandboxResource, "backend"),
    ("solve", "workers"): (SandboxResource, "workers"),
    ("verify", "replays"): (VerifierResource, "replays"),
    ("verify", "backend"): (SandboxResource, "backend"),
    ("verify-batch", "replays"): (VerifierResource, "replays"),
    ("verify-batch", "backend"): (SandboxResource, "backend"),
    ("verify-batch", "workers"): (SandboxResource, "workers"),
}


@pytest.mark.parametrize(("command", "option"), sorted(SHARED))
def test_a_round_uses_the_cli_default_unless_its_cpu_profile_names_it(command: str, option: str) -> None:
    config, field = SHARED[(command, option)]
    round_default = config.model_fields[field].default
    if field in CPU_ROUND:
        assert round_default == CPU_ROUND[field]
    else:
        assert round_default == cli_default(command, option)


def test_the_cli_shows_the_library_defaults() -> None:
    library = {
        ("solve", "temperature"): Sampling().temperature,
        ("solve", "top_p"): Sampling().top_p,
        ("solve", "max_tokens"): Sampling().max_tokens,
        ("solve", "context_window"): Sampling().context_window,
        ("solve", "seed"): Sampling().seed,
        ("solve", "max_turns"): EpisodeLimits().max_turns,
        ("solve", "time_budget"): EpisodeLimits().time_budget_s,
        ("verify", "replays"): DEFAULT_REPLAYS,
        ("verify-batch", "replays"): DEFAULT_REPLAYS,
    }
    assert {key: cli_default(*key) for key in library} == library
    for command in ("solve", "verify", "verify-batch", "sandbox"):
        cmd = main.get_command(click.Context(main), command)
        cmd = cmd.get_command(click.Context(cmd), "run") if command == "sandbox" else cmd
        [backend] = [p for p in cmd.params if p.name == "backend"]
        assert (backend.default, tuple(backend.type.choices)) == (DEFAULT_BACKEND, BACKENDS), command


def test_every_cpu_override_is_a_round_setting_that_differs() -> None:
    """An override equal to the library's default would be a second copy of it."""
    library = {
        "max_tokens": Sampling().max_tokens,
        "context_window": Sampling().context_window,
        "max_turns": EpisodeLimits().max_turns,
        "time_budget_s": EpisodeLimits().time_budget_s,
        "replays": DEFAULT_REPLAYS,
        "workers": cli_default("solve", "workers"),
        "seeds": shipped_names(),  # `touchstone propose mutation` without --seed: every shipped seed
        "teacher_max_turns": WarmStartConfig().teacher_max_turns,  # the warm start's teacher
        "operators": SourceMix().operators,  # every operator
    }
    assert set(CPU_ROUND) == set(library)
    assert all(CPU_ROUND[k] != library[k] for k in CPU_ROUND)


def test_an_hf_policy_acts_within_the_windows_its_trainer_trained_on() -> None:
    from orchestration.resources import TrainerResource

    assert PolicyResource().sampling().context_window == TrainerResource().max_length == CPU_ROUND["context_window"]


def test_the_rounds_warm_start_config_is_the_librarys_but_for_the_cpu_profile() -> None:
    """Dagster's WarmStartConfig is made from the library's model: no copied default or description."""
    from orchestration.resources import WarmStartConfig as RoundWarmStart

    assert RoundWarmStart().warm_start_config() == WarmStartConfig(operators=CPU_ROUND["operators"])
    for name, field in RoundWarmStart.model_fields.items():
        if name == "of_configured_base":  # the asset's own switch, not a library setting
            continue
        library = WarmStartConfig.model_fields[name]
        assert (field.description, field.metadata) == (library.description, library.metadata), name
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        RoundWarmStart(n_tasks=-1)
