"""Harness pytest plugin: loaded with `-p <random module name>` before any
candidate code is collected. It

- opens the result stream (path from TOUCHSTONE_RESULTS: a FIFO the verifier
  drains live from the host, so records cannot be rewritten afterwards) at
  import time, i.e. before collection imports candidate code;
- writes one JSON line per test phase report, the collected node ids, and a
  final record; the verifier requires a passed record per required test;
- orders the collected tests per TOUCHSTONE_ORDER (forward, reverse,
  shuffle:SEED) for the determinism check;
- when TOUCHSTONE_RECORD_READS is set (the isolation probe's run of the
  reference), one record per workspace data file (not a test file, not a
  `.py`) that test code opens for reading: the inputs the tests take from
  outside their own folders (golden files), which the verifier then protects;
- with each failed phase, what was raised: the exception's class, the first
  line of its message and where it was raised in the workspace (the innermost
  frame under the rootdir; for an exception from the candidate's process in an
  isolated run, the origin it carried across, see remote/wire.py `ORIGIN`).

This file runs inside the candidate's test process, so it is defence in depth,
not a trust anchor: see docs/VERIFIER.md ("what the test run guarantees").
"""

import json
import os
import random
import sys

_FD = os.open(os.environ["TOUCHSTONE_RESULTS"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
_ORDER = os.environ.get("TOUCHSTONE_ORDER", "forward")
_write = os.write  # bound now: later rebinding of os.write does not reach us
_dumps = json.dumps
_RAISED = {}  # (node id, phase) -> what the phase raised, until its report is written


def _emit(record):
    _write(_FD, (_dumps(record) + "\n").encode())


_ROOT = os.getcwd().rstrip("/") + "/"  # the harness runs pytest from the workspace root
_TEST_DIRS = {"tests", "test", "testing"}  # touchstone.harness.testfiles, the one definition
_READ = set()


def _is_test_file(rel):
    parts = rel.split("/")
    name = parts[-1]
    module = name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    return module or name == "conftest.py" or any(p in _TEST_DIRS for p in parts[:-1])


def _record_reads(event, args):
    """Audit hook: a workspace data file opened for reading by test code (the
    innermost workspace frame is a test file's)."""
    if event != "open" or not isinstance(args[0], str):
        return
    mode, flags = args[1], args[2]
    if (mode is not None and any(c in mode for c in "wax")) or (mode is None and flags & 3 == os.O_WRONLY):
        return
    path = os.path.abspath(args[0])
    rel = path[len(_ROOT) :] if path.startswith(_ROOT) else None
    if rel is None or rel in _READ or rel.endswith((".py", ".pyc")) or _is_test_file(rel) or "__pycache__" in rel:
        return
    frame = sys._getframe(1)
    while frame is not None and not frame.f_code.co_filename.startswith(_ROOT):
        frame = frame.f_back
    if frame is not None and _is_test_file(frame.f_code.co_filename[len(_ROOT) :]):
        _READ.add(rel)
        _emit({"event": "read", "path": rel})


if os.environ.get("TOUCHSTONE_RECORD_READS"):
    sys.addaudithook(_record_reads)


def pytest_collection_modifyitems(session, config, items):
    if _ORDER == "reverse":
        items.reverse()
    elif _ORDER.startswith("shuffle:"):
        random.Random(int(_ORDER.split(":", 1)[1])).shuffle(items)


def pytest_collection_finish(session):
    _emit({"event": "collected", "ids": [item.nodeid for item in session.items]})


def pytest_runtest_makereport(item, call):
    # returns None: pytest's own implementation still makes the report
    if call.excinfo is not None:
        _stash(item, call.when, call.excinfo.value)


def pytest_exception_interact(node, call, report):
    if report.when == "collect":  # a module that fails to import; pytest calls this before the collect report
        _stash(node, "collect", call.excinfo.value)


def _stash(node, when, exc):
    try:
        _RAISED[(node.nodeid, when)] = _raised(exc, str(node.config.rootpath))
    except Exception:  # an exception object that resists inspection: the report's text still tells
        pass


def _raised(exc, root):
    """{"type", "message", "at": "path:line" or None, "in": function, "crossed":
    whether it came from the other process of an isolated run}."""
    origin = getattr(exc, "__dict__", {}).get("__touchstone_origin__")
    if not isinstance(origin, dict):
        origin = {}
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    try:
        message = (str(exc).strip().splitlines() or [""])[0][:300]
    except Exception:
        message = "<unprintable>"
    at = origin.get("at") or _innermost(exc.__traceback__, root.rstrip("/") + "/")
    return {"type": str(origin.get("type") or name)[:300], "message": message,
            "at": f"{at[0]}:{at[1]}" if at else None, "in": at[2] if at else None, "crossed": bool(origin)}  # fmt: skip


def _innermost(tb, root):
    at = None
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if path.startswith(root):
            at = (path[len(root) :], tb.tb_lineno, tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return at


def pytest_runtest_logreport(report):
    raised = _RAISED.pop((report.nodeid, report.when), None)
    _emit(
        {
            "event": "report",
            "nodeid": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "wasxfail": hasattr(report, "wasxfail"),
            "longrepr": str(report.longrepr)[-800:] if report.failed else "",
            "raised": raised if report.failed else None,
        }
    )


def pytest_collectreport(report):
    raised = _RAISED.pop((report.nodeid, "collect"), None)
    if report.failed:
        _emit({"event": "collect_error", "nodeid": report.nodeid, "longrepr": str(report.longrepr)[-800:],
               "raised": raised})  # fmt: skip


def pytest_sessionfinish(session, exitstatus):
    _emit({"event": "finish", "exitstatus": int(exitstatus)})
