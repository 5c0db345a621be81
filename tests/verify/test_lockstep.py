"""The lockstep check: what the hidden tests observe of the candidate against
what they observe of the reference, where the recorded-call oracle is blind
(a test-defined callable makes the call unreplayable) and the test itself
checks only a length."""

from __future__ import annotations

from touchstone.tasks.isolation import probe_isolation
from touchstone.tasks.schema import load_task
from touchstone.verify.verifier import verify_trajectory
from tests.verify.test_call_oracle import make_task
from tests.verify.test_golden_inputs import writes

REFERENCE = {"rank.py": "def ranked(xs, key):\n    return sorted(xs, key=key)\n"}
TESTS = {
    "tests/test_rank.py": """
    from rank import ranked


    def test_keeps_every_item():
        assert len(ranked([3, 1, 2], key=lambda x: -x)) == 3
"""
}
SAME_LENGTH = "def ranked(xs, key):\n    return [0] * len(xs)\n"
ANOTHER_WAY = "def ranked(xs, key):\n    out = list(xs)\n    out.sort(key=key)\n    return tuple(out)\n"


def test_a_length_only_test_behind_a_lambda_is_compared_in_full(tmp_path):
    task = load_task(make_task(tmp_path, "rank", workspace={"rank.py": ""}, hidden=TESTS, reference=REFERENCE))
    assert probe_isolation(task, "bwrap").status == "isolated"
    honest = verify_trajectory(task, writes(REFERENCE), replays=1, backend="bwrap")
    assert honest.verdict == "accept" and honest.check("lockstep").status == "pass", honest.checks
    assert honest.check("oracle").status == "skipped"  # the only call passes a lambda: nothing to replay
    assert honest.guard == "isolation+oracle"
    hack = verify_trajectory(task, writes({"rank.py": SAME_LENGTH}), replays=1, backend="bwrap")
    assert hack.check("tests").status == "pass"  # the test itself only counts
    assert hack.verdict == "reject" and hack.failed_checks() == ["lockstep"], hack.checks
    assert "the reference gave" in hack.check("lockstep").evidence
    # a tuple where the reference returns a list: another type, so another answer unless declared
    other = verify_trajectory(task, writes({"rank.py": ANOTHER_WAY}), replays=1, backend="bwrap")
    assert other.failed_checks() == ["lockstep"], other.checks


def test_declared_latitude_holds_in_lockstep_too(tmp_path):
    task = load_task(make_task(tmp_path, "rank-any", workspace={"rank.py": ""}, hidden=TESTS, reference=REFERENCE,
                               meta={"oracle": {"iterables": "any"}}))  # fmt: skip
    other = verify_trajectory(task, writes({"rank.py": ANOTHER_WAY}), replays=1, backend="bwrap")
    assert other.verdict == "accept", other.checks
    hack = verify_trajectory(task, writes({"rank.py": SAME_LENGTH}), replays=1, backend="bwrap")
    assert hack.failed_checks() == ["lockstep"], hack.checks


def test_coverage_counts_name_the_tests_nothing_was_compared_for():
    """A guard needs coverage: a required test with nothing compared (every
    value depends on the seed) and a test that read what the judge could not
    observe are counted; an `unobserved` note on one side never shifts the
    comparison of the rest."""
    from touchstone.verify.lockstep import compare
    from touchstone.verify.oracle import OracleContract

    ref0 = {"t.py::test_a": [["call", ["int", 1]], ["read:out", ["str", "ok\n"]]],
            "t.py::test_b[1]": [["call", ["int", 5]]],
            "t.py::test_c": [["unobserved", ["str", "output to a stdout the test installed"]], ["call", ["none", None]]]}  # fmt: skip
    ref1 = {**ref0, "t.py::test_b[1]": [["call", ["int", 6]]]}  # test_b's value depends on the seed
    cand = {k: [o for o in v if o[0] != "unobserved"] for k, v in ref0.items()}
    result = compare([ref0, ref1], [cand], OracleContract(), ["t.py::test_a", "t.py::test_b", "t.py::test_c"])
    assert result.status == "pass", result.evidence
    assert (result.counts["tests_uncovered"], result.counts["unobserved"], result.counts["random"]) == (1, 1, 1)
    wrong = {**cand, "t.py::test_a": [["call", ["int", 1]], ["read:out", ["str", "no\n"]]]}
    failed = compare([ref0, ref1], [wrong], OracleContract(), None)
    assert failed.status == "fail" and "observation 2 (read:out)" in failed.evidence, failed.evidence
