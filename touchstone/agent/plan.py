"""Which policies a round runs, and with which episode limits.

Under the spec `auto`, round 0 runs the scripted teacher (no checkpoint has
learned anything yet) and later rounds run the round's starting checkpoint
(`hf:PATH`) plus `teacher_attempts` teacher attempts per task, so a tiny CPU
model still yields verified data. With `corrected`, those teacher attempts run
as `corrected:<the checkpoint's spec>`: the teacher acts, and the checkpoint's
malformed calls at the states it passes through stay in the trajectory
(`touchstone.agent.policies.corrected`). Any other spec runs as given, with
`{checkpoint}` replaced by the starting checkpoint's path (e.g.
`openai:http://vllm:8000/v1#{checkpoint}` for a server that loads by path).
"""

from __future__ import annotations

from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.corrected import episode_turns
from touchstone.agent.policies.spec import TEACHER, PolicySpec
from touchstone.rounds import round_index

AUTO = "auto"
CHECKPOINT = "{checkpoint}"  # in a round's spec: the starting checkpoint's path


def check_setting(setting: str) -> str:
    """A round's policy setting as given (`auto`, or a spec in which `{checkpoint}`
    may stand for the starting checkpoint's path); raises `PolicySpecError`
    naming what is wrong, so a bad setting fails where the config enters."""
    if setting != AUTO:
        PolicySpec.parse(setting)
    return setting


def checkpoint_policy(setting: str, checkpoint_path: str, served: PolicySpec | None = None) -> PolicySpec:
    """The spec that runs the given weights: under `auto` the policy server's
    `openai:URL#HASH` when one serves them (`served`), else `hf:PATH`."""
    if setting == AUTO:
        return served or PolicySpec("hf", str(checkpoint_path))
    return PolicySpec.parse(setting.replace(CHECKPOINT, str(checkpoint_path)))


def uses_checkpoint(setting: str, round_key: str) -> bool:
    """Whether the round's rollouts run the starting checkpoint (not only the teacher)."""
    return setting != str(TEACHER) and not (setting == AUTO and round_index(round_key) == 0)


def round_policies(setting: str, round_key: str, checkpoint_path: str, attempts: int, teacher_attempts: int,
                   served: PolicySpec | None = None, corrected: bool = False) -> dict[PolicySpec, int]:  # fmt: skip
    """Policy -> attempts per task for one round."""
    if not uses_checkpoint(setting, round_key):
        return {TEACHER: attempts}
    model = checkpoint_policy(setting, checkpoint_path, served)
    specs = {model: attempts}
    if teacher_attempts and model != TEACHER:
        specs[model.corrected() if corrected else TEACHER] = teacher_attempts
    return specs


def episode_limits(spec: PolicySpec, *, max_turns: int, teacher_max_turns: int, time_budget_s: float) -> EpisodeLimits:
    """The teacher's turns cost no generation and it needs more of them (~10)
    than a model's turn limit allows on a CPU; a corrected episode holds up to
    one learner turn before each of the teacher's."""
    if spec.is_teacher:
        turns = teacher_max_turns
    elif spec.scheme == "corrected":
        turns = episode_turns(teacher_max_turns)
    else:
        turns = max_turns
    return EpisodeLimits(max_turns=turns, time_budget_s=time_budget_s)
