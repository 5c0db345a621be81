"""Which policies run in which round."""

from assets.trajectories import checkpoint_policy, round_policies
from orchestration.resources import PolicyResource


def test_auto_runs_the_teacher_first_then_the_previous_checkpoint_with_teacher_help():
    auto = PolicyResource()
    assert round_policies(auto, "r000", "/ck/base", attempts=2) == {"teacher": 2}
    assert round_policies(auto, "r003", "/ck/r002", attempts=2) == {"hf:/ck/r002": 2, "teacher": 1}
    assert round_policies(PolicyResource(teacher_attempts=0), "r001", "/ck/r000", 4) == {"hf:/ck/r000": 4}


def test_an_explicit_spec_gets_the_starting_checkpoint_in_place_of_the_placeholder():
    served = PolicyResource(spec="openai:http://vllm:8000/v1#{checkpoint}", teacher_attempts=0)
    assert round_policies(served, "r000", "/ck/base", 8) == {"openai:http://vllm:8000/v1#/ck/base": 8}
    assert checkpoint_policy(served, "/ck/r004") == "openai:http://vllm:8000/v1#/ck/r004"
    assert round_policies(PolicyResource(spec="teacher"), "r002", "/ck/r001", 3) == {"teacher": 3}
