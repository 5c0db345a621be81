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
from touchstone.agent.policies.corrected import PREFIX as CORRECTED
from touchstone.agent.policies.corrected import corrected_spec, episode_turns
from touchstone.rounds import round_index

TEACHER = "teacher"


def checkpoint_policy(spec: str, checkpoint_path: str, served: str | None = None) -> str:
    """The spec that runs the given weights: under `auto` the policy server's
    `openai:URL#HASH` when one serves them (`served`), else `hf:PATH`."""
    if spec == "auto":
        return served or f"hf:{checkpoint_path}"
    return spec.replace("{checkpoint}", checkpoint_path)


def uses_checkpoint(spec: str, round_key: str) -> bool:
    """Whether the round's rollouts run the starting checkpoint (not only the teacher)."""
    return spec != TEACHER and not (spec == "auto" and round_index(round_key) == 0)


def round_policies(spec: str, round_key: str, checkpoint_path: str, attempts: int, teacher_attempts: int,
                   served: str | None = None, corrected: bool = False) -> dict[str, int]:  # fmt: skip
    """Policy spec -> attempts per task for one round."""
    if not uses_checkpoint(spec, round_key):
        return {TEACHER: attempts}
    model = checkpoint_policy(spec, checkpoint_path, served)
    specs = {model: attempts}
    if teacher_attempts and model != TEACHER:
        specs[corrected_spec(model) if corrected else TEACHER] = teacher_attempts
    return specs


def episode_limits(spec: str, *, max_turns: int, teacher_max_turns: int, time_budget_s: float) -> EpisodeLimits:
    """The teacher's turns cost no generation and it needs more of them (~10)
    than a model's turn limit allows on a CPU; a corrected episode holds up to
    one learner turn before each of the teacher's."""
    if spec == TEACHER:
        turns = teacher_max_turns
    elif spec.startswith(CORRECTED):
        turns = episode_turns(teacher_max_turns)
    else:
        turns = max_turns
    return EpisodeLimits(max_turns=turns, time_budget_s=time_budget_s)
