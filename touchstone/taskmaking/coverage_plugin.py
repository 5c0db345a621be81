"""Per-test function coverage, as a pytest plugin run inside the sandbox over a
seed project (loaded with `-p`). For each test it records the functions of
workspace files that the test's call phase entered (a profile hook: call
events only, cheap), and writes {node id: ["path::qualname", ...]} as JSON to
the file named by TOUCHSTONE_COVERAGE_OUT. Read by touchstone.taskmaking.coverage."""

import json
import os
import sys
import threading

import pytest

_ROOT = "/workspace/"
_seen = set()
_calls = {}  # node id -> functions its call phase entered
_map = {}  # the same, for tests whose call phase passed


def _profile(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if code.co_filename.startswith(_ROOT):
            _seen.add((code.co_filename, code.co_qualname))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _seen.clear()
    threading.setprofile(_profile)
    sys.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        _calls[item.nodeid] = sorted({f"{f[len(_ROOT) :]}::{q.split('.<locals>')[0]}" for f, q in _seen})


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed and report.nodeid in _calls:
        _map[report.nodeid] = _calls.pop(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["TOUCHSTONE_COVERAGE_OUT"], "w") as out:
        json.dump(_map, out)
