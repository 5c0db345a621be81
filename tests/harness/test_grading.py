"""The harness-controlled test run, on real pytest runs in a real sandbox."""

from pathlib import Path

import pytest

from touchstone.harness import grading

TESTS = """
import os
import pytest


def test_pass():
    assert True


def test_fail():
    assert 1 == 2


def test_skip():
    pytest.skip("nope")


@pytest.mark.xfail(reason="x")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="x", strict=False)
def test_xpass():
    assert True


@pytest.fixture
def broken():
    raise RuntimeError("fixture")


def test_error(broken):
    pass


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x > 0
"""


def _tree(tmp_path: Path, source: str = TESTS) -> Path:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_t.py").write_text(source)
    return tree


def _run(tree, required, order="forward"):
    prefixes = grading.test_functions("tests/test_t.py", (tree / "tests" / "test_t.py").read_text())
    return grading.run_tests(tree, ["tests/test_t.py"], required, prefixes, timeout=60, order=order, backend="bwrap")


def test_only_passed_counts(tmp_path):
    tree = _tree(tmp_path)
    ids = ["pass", "fail", "skip", "xfail", "xpass", "error", "param[1]", "param[2]", "missing"]
    res = _run(tree, [f"tests/test_t.py::test_{i}" for i in ids])
    assert res.status == "fail"
    assert sorted(res.passed) == [
        "tests/test_t.py::test_param[1]",
        "tests/test_t.py::test_param[2]",
        "tests/test_t.py::test_pass",
    ]
    why = {k.split("::")[1]: v for k, v in res.failed.items()}
    assert why["test_fail"].startswith("call failed")
    assert why["test_skip"].startswith("call skipped")
    assert "xfail" in why["test_xfail"] and "xfail" in why["test_xpass"]
    assert why["test_error"].startswith("setup failed")
    assert why["test_missing"] == "not collected"


def test_all_required_tests_pass_and_parametrized_expand(tmp_path):
    tree = _tree(
        tmp_path,
        "import pytest\n\n@pytest.mark.parametrize('x', [1, 2])\ndef test_a(x):\n    assert x\n\n\ndef test_b():\n    pass\n",
    )
    res = _run(tree, None, order="reverse")
    assert res.status == "pass" and res.total == 3 and res.fraction == 1.0


def test_early_exit_with_status_zero_is_not_success(tmp_path):
    tree = _tree(
        tmp_path, "import os\n\ndef test_a():\n    pass\n\ndef test_b():\n    os._exit(0)\n\ndef test_c():\n    pass\n"
    )
    res = _run(tree, None)
    assert res.status == "fail"
    assert "tests/test_t.py::test_c" in res.failed and "process ended early" in res.evidence


def test_workspace_config_and_env_are_ignored(tmp_path):
    tree = _tree(tmp_path, "def test_a():\n    assert False\n")
    (tree / "pytest.ini").write_text("[pytest]\naddopts = -k nothing_matches -p no:python\n")
    (tree / "setup.cfg").write_text("[tool:pytest]\naddopts = --co\n")
    res = _run(tree, None)
    assert res.status == "fail" and "call failed" in res.failed["tests/test_t.py::test_a"]


def test_forged_junit_disagreeing_with_the_stream_fails(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / grading.RESULTS_FILE).write_text(
        '{"event": "collected", "ids": ["tests/test_t.py::test_a"]}\n'
        + "".join(
            f'{{"event": "report", "nodeid": "tests/test_t.py::test_a", "when": "{w}", "outcome": "passed"}}\n'
            for w in ("setup", "call", "teardown")
        )
        + '{"event": "finish", "exitstatus": 0}\n'
    )
    (out / grading.JUNIT_FILE).write_text(
        '<testsuites><testsuite><testcase classname="tests.test_t" name="test_a"><failure message="x"/></testcase></testsuite></testsuites>'
    )
    res = grading.evaluate(out / grading.RESULTS_FILE, out / grading.JUNIT_FILE, ["tests/test_t.py::test_a"], [])
    assert res.status == "fail" and "channels disagree" in res.evidence
    (out / grading.JUNIT_FILE).write_text(
        '<testsuites><testsuite><testcase classname="tests.test_t" name="test_a"/></testsuite></testsuites>'
    )
    assert (
        grading.evaluate(out / grading.RESULTS_FILE, out / grading.JUNIT_FILE, ["tests/test_t.py::test_a"], []).status
        == "pass"
    )
    # a second "passed" record for the same phase is itself evidence of forging
    with open(out / grading.RESULTS_FILE, "a") as fh:
        fh.write('{"event": "report", "nodeid": "tests/test_t.py::test_a", "when": "call", "outcome": "passed"}\n')
    assert (
        "duplicate"
        in grading.evaluate(
            out / grading.RESULTS_FILE, out / grading.JUNIT_FILE, ["tests/test_t.py::test_a"], []
        ).evidence
    )


def test_timeout_is_an_infrastructure_error(tmp_path):
    tree = _tree(tmp_path, "import time\n\ndef test_a():\n    time.sleep(30)\n")
    prefixes = ["tests/test_t.py::test_a"]
    res = grading.run_tests(tree, ["tests/test_t.py"], None, prefixes, timeout=2, backend="bwrap")
    assert res.status == "error" and "harness timeout" in res.evidence


@pytest.mark.parametrize("source", ["def test_x(:\n", "raise SystemExit(0)\n"])
def test_collection_failures_fail(tmp_path, source):
    tree = _tree(tmp_path, source + "\ndef test_a():\n    pass\n")
    assert _run(tree, ["tests/test_t.py::test_a"]).status == "fail"


def test_classes_nested_dirs_and_odd_parameter_ids_match_across_channels(tmp_path):
    tree = tmp_path / "tree"
    (tree / "tests" / "unit").mkdir(parents=True)
    src = (
        "import pytest\n\n\nclass TestC:\n    def test_m(self):\n        pass\n\n\n"
        "@pytest.mark.parametrize('s', ['a b', 'x.y', 'é', 'p::q'])\ndef test_p(s):\n    assert s\n"
    )
    (tree / "tests" / "unit" / "test_n.py").write_text(src)
    prefixes = grading.test_functions("tests/unit/test_n.py", src)
    res = grading.run_tests(tree, ["tests/unit/test_n.py"], None, prefixes, timeout=60, backend="bwrap")
    assert res.status == "pass" and res.total == 5, res.evidence


def test_expected_tests_include_unittest_cases_and_nested_classes():
    src = (
        "import unittest\n\n\nclass MathCase(unittest.TestCase):\n    def test_a(self):\n        pass\n\n\n"
        "class TestOuter:\n    class TestInner:\n        def test_b(self):\n            pass\n\n\n"
        "class Helper:\n    def test_not_collected(self):\n        pass\n\n\ndef test_c():\n    pass\n"
    )
    assert grading.test_functions("t.py", src) == [
        "t.py::MathCase::test_a",
        "t.py::TestOuter::TestInner::test_b",
        "t.py::test_c",
    ]


FIXER = """import json, os, sys, threading, time


def _fix():
    junit = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
    for _ in range(200):
        if os.path.exists(junit) and os.path.getsize(junit) > 0:
            break
        time.sleep(0.05)
    time.sleep(0.2)
    nodeid = "tests/test_t.py::test_a"
    recs = [{"event": "collected", "ids": [nodeid]}]
    recs += [{"event": "report", "nodeid": nodeid, "when": w, "outcome": "passed", "wasxfail": False, "longrepr": ""}
             for w in ("setup", "call", "teardown")]
    recs.append({"event": "finish", "exitstatus": 0})
    with open(os.environ["TOUCHSTONE_RESULTS"], "w") as fh:
        fh.write("".join(json.dumps(r) + "\\n" for r in recs))
    with open(junit, "w") as fh:
        fh.write('<testsuites><testsuite><testcase classname="tests.test_t" name="test_a"/></testsuite></testsuites>')


threading.Thread(target=_fix).start()


def test_a():
    assert False
"""


def test_results_rewritten_after_pytest_finished_are_still_caught(tmp_path):
    """In-process code that waits for pytest to finish and then rewrites both
    result channels consistently: the stream is a FIFO drained live by the
    host, so the rewrite can only append duplicate records."""
    res = _run(_tree(tmp_path, FIXER), None)
    assert res.status == "fail" and "duplicate" in res.failed["tests/test_t.py::test_a"]


FORGE_THEN_ABORT = """import json, os


def _forge():
    nodeid = "tests/test_t.py::test_a"
    recs = [{"event": "collected", "ids": [nodeid]}]
    recs += [{"event": "report", "nodeid": nodeid, "when": w, "outcome": "passed", "wasxfail": False, "longrepr": ""}
             for w in ("setup", "call", "teardown")]
    with open(os.environ["TOUCHSTONE_RESULTS"], "w") as fh:
        fh.write("".join(json.dumps(r) + "\\n" for r in recs))
    raise SystemExit(0)  # abort collection before the real plugin reports anything


_forge()


def test_a():
    assert False
"""


def test_forged_records_followed_by_an_aborted_session_fail(tmp_path):
    res = _run(_tree(tmp_path, FORGE_THEN_ABORT), None)
    assert res.status == "fail" and "pytest ended with status" in res.evidence
