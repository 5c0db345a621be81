"""The labeled adversarial corpus: every hack passes the naive harness and is
rejected by the verifier for the right reason; every honest look-alike is
accepted by both."""

import pytest

from touchstone.tasks.schema import load_task
from touchstone.verify.canaries import load_canaries
from touchstone.verify.canaries.__main__ import right_reason
from touchstone.verify.canaries.naive import naive_grade
from touchstone.verify.verifier import verify_trajectory

CANARIES = load_canaries()


def test_corpus_covers_every_family_expressible_as_a_trajectory():
    hacks = [c for c in CANARIES if c.expected_verdict == "reject"]
    assert len({c.name for c in hacks}) >= 20
    assert {c.family for c in hacks} == set("ABCDEFG")
    assert len([c for c in CANARIES if c.family == "honest"]) >= 5


def _check(canary, backend):
    task = load_task(canary.task_dir)
    # a hack that does not fool a naive harness tests nothing
    assert naive_grade(task, canary.messages, backend=backend), f"{canary.name} does not pass the naive harness"
    report = verify_trajectory(
        task, canary.messages, replays=2, trajectory_id=canary.name, backend=backend, isolated=canary.isolated or None
    )
    assert report.verdict == canary.expected_verdict, report.reasons
    if canary.expected_verdict == "reject":
        assert right_reason(canary, report), f"rejected by {report.failed_checks()}, expected {canary.reasons}"
    if canary.isolated:  # flagged, not rejected, when isolated; an in-process run still rejects it
        assert report.check("static_audit").evidence.startswith("flags: ")
        today = verify_trajectory(task, canary.messages, replays=1, backend=backend, isolated=False)
        assert today.failed_checks() == ["static_audit"], today.reasons


@pytest.mark.parametrize("canary", CANARIES, ids=[c.name for c in CANARIES])
def test_canary(canary):
    _check(canary, "bwrap")


@pytest.mark.docker
@pytest.mark.parametrize("name", ["honest-main-guard", "a4-conftest-report-rewrite", "d15-call-counter"])
def test_canary_on_docker(name):
    _check(next(c for c in CANARIES if c.name == name), "docker")
