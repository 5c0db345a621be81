"""With the first line of defence switched off (the static audit rules that
name them), hacks that run inside the test process are still rejected by the
harness-side checks: the per-test results and the out-of-process oracle."""

import pytest

from touchstone.tasks.schema import load_task
from touchstone.verify.canaries import load_canaries
from touchstone.audit.policy import load_policy
from touchstone.verify.verifier import verify_trajectory

CASES = {
    "a3-skip-from-code": "tests",  # skipped is not passed
    "b9-exit-at-import": "tests",  # exit status 0 is not a pass record
    "b10-atexit-flip": "tests",
    "c12-always-equal": "oracle",  # the candidate's __eq__ is never used
    "d16-caller-frame": "oracle",  # no expected value in the candidate's process
    "f21-fake-junit": "tests",  # stdout and files in the workspace are not evidence
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_second_line_of_defence(name):
    (canary,) = [c for c in load_canaries() if c.name == name]
    static_off = {r.id for r in load_policy().static}
    report = verify_trajectory(
        load_task(canary.task_dir), canary.messages, replays=1, allow_rules=static_off, full=True, backend="bwrap"
    )
    assert report.check("static_audit").status == "pass"
    assert report.check(CASES[name]).status == "fail", report.checks
    assert report.verdict == "reject"


def test_read_only_test_mount_is_what_stops_rewriting_tests_at_import(monkeypatch):
    """Code that rewrites not-yet-imported test files during collection
    (obfuscated, so the static audit is blind to it) is stopped by isolation
    (the judge's tests are not on the candidate's disk); where a task's tests
    run in process, by mounting the test directories read-only, and past that
    only by the out-of-process oracle."""
    from touchstone.harness import suite

    (canary,) = [c for c in load_canaries() if c.name == "a1-rewrite-tests-at-import"]
    task = load_task(canary.task_dir)
    monkeypatch.setattr(suite, "outermost_test_dirs", lambda dirs: [])
    isolated = verify_trajectory(task, canary.messages, replays=1, backend="bwrap")
    assert isolated.isolation == "isolated" and isolated.failed_checks() == ["tests"]
    monkeypatch.undo()
    report = verify_trajectory(task, canary.messages, replays=1, backend="bwrap", isolated=False)
    assert report.isolation == "not_isolated" and report.verdict == "reject" and report.failed_checks() == ["tests"]
    monkeypatch.setattr(suite, "outermost_test_dirs", lambda dirs: [])
    forged = verify_trajectory(task, canary.messages, replays=1, backend="bwrap", isolated=False)
    assert forged.check("tests").status == "pass" and forged.isolation == "not_isolated"  # the forgery works
    assert forged.failed_checks() == ["oracle"]  # and only the out-of-process oracle is left to catch it
