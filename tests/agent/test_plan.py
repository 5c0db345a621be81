"""Which policies run in which round, with which turn limits."""

import pytest

from touchstone.agent.plan import check_setting, checkpoint_policy, episode_limits, round_policies
from touchstone.agent.policies.spec import PolicySpec, PolicySpecError


def specs(plan: dict[PolicySpec, int]) -> dict[str, int]:
    return {str(spec): n for spec, n in plan.items()}


def test_auto_runs_the_teacher_first_then_the_previous_checkpoint_with_teacher_help():
    assert specs(round_policies("auto", "r000", "/ck/base", attempts=2, teacher_attempts=1)) == {"teacher": 2}
    assert specs(round_policies("auto", "r003", "/ck/r002", 2, teacher_attempts=1)) == {"hf:/ck/r002": 2, "teacher": 1}
    assert specs(round_policies("auto", "r001", "/ck/r000", 4, teacher_attempts=0)) == {"hf:/ck/r000": 4}


def test_corrected_teacher_attempts_name_the_rounds_model():
    assert specs(round_policies("auto", "r000", "/ck/base", 2, 1, corrected=True)) == {"teacher": 2}
    assert specs(round_policies("auto", "r002", "/ck/r001", 2, 1, corrected=True)) == {
        "hf:/ck/r001": 2,
        "corrected:hf:/ck/r001": 1,
    }
    served = PolicySpec.parse("openai:http://s/v1#abc")
    assert specs(round_policies("auto", "r002", "/ck/r001", 2, 1, served, corrected=True)) == {
        "openai:http://s/v1#abc": 2,
        "corrected:openai:http://s/v1#abc": 1,
    }


def test_an_explicit_spec_gets_the_starting_checkpoint_in_place_of_the_placeholder():
    served = "openai:http://vllm:8000/v1#{checkpoint}"
    assert specs(round_policies(served, "r000", "/ck/base", 8, teacher_attempts=0)) == {
        "openai:http://vllm:8000/v1#/ck/base": 8
    }
    assert checkpoint_policy(served, "/ck/r004") == PolicySpec.parse("openai:http://vllm:8000/v1#/ck/r004")
    assert specs(round_policies("teacher", "r002", "/ck/r001", 3, teacher_attempts=2)) == {"teacher": 3}


def test_a_bad_setting_is_refused_where_the_config_enters():
    assert check_setting("auto") == "auto" and check_setting("hf:{checkpoint}") == "hf:{checkpoint}"
    with pytest.raises(PolicySpecError, match="unknown policy spec 'hf-typo:x'"):
        check_setting("hf-typo:x")


def test_the_teacher_gets_its_own_turn_limit():
    limits = {
        text: episode_limits(PolicySpec.parse(text), max_turns=8, teacher_max_turns=16, time_budget_s=60.0)
        for text in ("teacher", "corrected:hf:/ck/r000", "hf:/ck/r000", "openai:http://x/v1#m")
    }
    assert {s: lim.max_turns for s, lim in limits.items()} == {
        "teacher": 16,
        "corrected:hf:/ck/r000": 32,  # one learner turn before each of the teacher's
        "hf:/ck/r000": 8,
        "openai:http://x/v1#m": 8,
    }
    assert {lim.time_budget_s for lim in limits.values()} == {60.0}
