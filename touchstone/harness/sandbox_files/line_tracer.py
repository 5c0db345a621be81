"""Line tracer for task validation's coverage check: loaded with `-p <random
name>` before collection, it records which lines of the files named in
TOUCHSTONE_TRACE_FILES (workspace-relative, comma-separated) execute, in every
thread, and writes `{rel: [line, ...]}` as JSON to TOUCHSTONE_TRACE_OUT when the
session ends. Runs only the task's own trusted code (reference + hidden tests).
Standard library only: it runs inside the sandbox."""

import json
import os
import sys
import threading

_ROOT = "/workspace/"
_FILES = {_ROOT + f: f for f in os.environ.get("TOUCHSTONE_TRACE_FILES", "").split(",") if f}
_LINES = {f: set() for f in _FILES.values()}


def _local(frame, event, arg):
    if event == "line":
        _LINES[_FILES[frame.f_code.co_filename]].add(frame.f_lineno)
    return _local


def _global(frame, event, arg):
    if frame.f_code.co_filename in _FILES:
        _LINES[_FILES[frame.f_code.co_filename]].add(frame.f_lineno)
        return _local
    return None


sys.settrace(_global)
threading.settrace(_global)


def pytest_sessionfinish(session, exitstatus):
    sys.settrace(None)
    with open(os.environ["TOUCHSTONE_TRACE_OUT"], "w") as f:
        json.dump({k: sorted(v) for k, v in _LINES.items()}, f)
