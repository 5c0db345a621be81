"""Call recorder: a pytest plugin the oracle loads (`-p <random name>`) while
the hidden tests run against the trusted REFERENCE. It records every call
that test code (the hidden test files and the task's test helpers) makes into
workspace code — functions, methods, constructors, properties, operators,
private helpers — however the test built the arguments (`check(candidate)`
passes the function object; the call made inside `check` is still a test
calling workspace code).

Mechanism: `sys.settrace`/`threading.settrace` (installed when this module is
imported, before test modules are collected). The global trace function sees
every new Python frame and keeps only those whose caller is test code and
whose code is the workspace's (or a constructor of a workspace class, since
dataclass and namedtuple constructors are generated code). For a kept frame
it returns a local tracer, whose `exception`/`line`/`return` events tell a
raised exception from a returned value (a profile hook cannot). Arguments
are read from the frame's parameters at the `call` event, i.e. before the
callee runs, so a callee that mutates them does not change the record.

One JSON line per call (written at return): global index, the test that made
it, the target (how to make the same call by name in another process), the
arguments (codec `encode`: a workspace object produced by an earlier call is
a handle into the sequence), the result (canonical form, iterators left
unconsumed) or the exception type. Calls whose arguments cannot be rebuilt
carry `unreplayable` with the reason. Standard library and pytest only.

Environment: TOUCHSTONE_CODEC (path of the codec file), TOUCHSTONE_CALLS (output),
TOUCHSTONE_TEST_CODE (JSON list of workspace-relative test-code files),
TOUCHSTONE_MAX_CALLS.
"""

import importlib.util
import inspect
import json
import os
import sys
import threading

import pytest


def _load_codec():
    path = os.environ["TOUCHSTONE_CODEC"]
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


codec = _load_codec()
ROOT = os.getcwd()  # the harness starts pytest in the workspace root
with open(os.environ["TOUCHSTONE_TEST_CODE"]) as _f:
    TEST_CODE = set(json.load(_f))
MAX_CALLS = int(os.environ.get("TOUCHSTONE_MAX_CALLS", "5000"))
_OUT = open(os.environ["TOUCHSTONE_CALLS"], "w")  # noqa: SIM115 (open for the whole session)
_LOCK = threading.Lock()
_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
# dunders that are not behaviour a test asserts on, or that replay cannot make
_SKIP = {"__hash__", "__del__", "__init_subclass__", "__set_name__", "__class_getitem__",
         "__instancecheck__", "__subclasscheck__", "__subclasshook__", "__getattribute__"}  # fmt: skip
PATH_SEARCH_NODES = 5000


class _Session:
    def __init__(self):
        self.test = None  # node id of the running test; None during collection
        self.next_index = 0
        self.over_cap = 0
        self.tracer_errors = 0
        self.handles = {}  # id(obj) -> (obj, step): results of recorded calls (kept alive: ids stay unique)
        self.seen_generators = {}  # id(frame) -> frame: later resumptions are not new calls
        # test -> why its assertions may rest on what no recorded call returns (captured output, files
        # under its tmp_path): such a test is not covered by replaying its calls
        self.unobserved = {}
        self.tmp = None  # the running test's tmp_path, in its call phase


_session = _Session()


_kinds = {}


def _kind(filename):
    """'test', 'ws' (workspace code) or None (anything else) for a code file."""
    kind = _kinds.get(filename)
    if kind is None:
        kind = ""
        if filename.startswith(ROOT + os.sep) and filename.endswith(".py"):
            rel = filename[len(ROOT) + 1 :]
            is_test = rel in TEST_CODE or os.path.basename(rel) == "conftest.py"
            kind = "test" if is_test else "ws"
        _kinds[filename] = kind
    return kind or None


def _module_kind(name):
    return _kind(getattr(sys.modules.get(name), "__file__", None) or "")


def is_workspace_class(t):
    return isinstance(t, type) and _module_kind(getattr(t, "__module__", "")) == "ws"


def _ref(obj):
    """A class, function or enum member reachable by name outside the tests."""
    if isinstance(obj, codec._Enum):
        cls = _ref(type(obj))
        return cls and {**cls, "__t": "enum", "name": obj.name}
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    if _module_kind(module) == "test" or module not in sys.modules:
        return None
    target = sys.modules[module]
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return {"__t": "ref", "module": module, "qualname": qualname} if target is obj else None


def _find_path(obj):
    """Path from a recorded result to `obj` (public attributes, sequence
    items, dict values), resolved at the moment of the call."""
    queue = [(root, step, []) for _, (root, step) in reversed(list(_session.handles.items()))]
    seen, n = set(), 0
    while queue and n < PATH_SEARCH_NODES:
        node, step, path = queue.pop(0)
        n += 1
        if node is obj:
            return {"__t": "handle", "step": step, "path": path}
        if id(node) in seen or len(path) >= 4:
            continue
        seen.add(id(node))
        if type(node) in (list, tuple):
            queue += [(e, step, path + [["i", i]]) for i, e in enumerate(node[:200])]
        elif type(node) is dict:
            queue += [(v, step, path + [["k", k]]) for k, v in list(node.items())[:200] if type(k) in (str, int)]
        elif is_workspace_class(type(node)) and hasattr(node, "__dict__"):
            queue += [(v, step, path + [["a", k]]) for k, v in vars(node).items() if not k.startswith("_")]
    return None


def _handle(obj):
    entry = _session.handles.get(id(obj))
    if entry is not None and entry[0] is obj:
        return {"__t": "handle", "step": entry[1], "path": []}
    if not is_workspace_class(type(obj)):
        return None
    found = _find_path(obj) or _global_ref(obj)
    if found is None:
        raise codec.Unreplayable(f"a {type(obj).__qualname__} not produced by a recorded call")
    return found


def _global_ref(obj):
    """A workspace object that a workspace module (or class) holds by name:
    a curried function, a registry, a singleton."""
    for module, prefix, namespace in _workspace_namespaces():
        for attr, value in list(namespace.items()):
            if value is obj:
                return {"__t": "ref", "module": module, "qualname": prefix + attr}
    return None


class _Skip(Exception):
    """A frame that is not a call of its own (a constructor's second half)."""


def _parameters(frame):
    """(positional values, keyword values) of a frame at its `call` event."""
    code, loc = frame.f_code, frame.f_locals
    names = code.co_varnames
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    pos = [loc[n] for n in names[:n_pos]]
    kw = {n: loc[n] for n in names[n_pos : n_pos + n_kw]}
    i = n_pos + n_kw
    if code.co_flags & inspect.CO_VARARGS:
        pos += list(loc[names[i]])
        i += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kw.update(loc[names[i]])
    return pos, kw


def _without_defaults(func, code, pos, kw):
    """Drop trailing arguments that ARE the defaults (identity), so a replay
    makes the call the test wrote, not one with the reference's defaults."""
    defaults = getattr(func, "__defaults__", None) or ()
    if len(pos) == code.co_argcount:
        first_default = code.co_argcount - len(defaults)
        while len(pos) > first_default and pos[-1] is defaults[len(pos) - 1 - first_default]:
            pos.pop()
    kwdefaults = getattr(func, "__kwdefaults__", None) or {}
    return pos, {k: v for k, v in kw.items() if not (k in kwdefaults and v is kwdefaults[k])}


def _unwrapped_code(obj):
    for _ in range(10):
        if hasattr(obj, "__code__"):
            return obj.__code__
        obj = getattr(obj, "__wrapped__", None) or getattr(obj, "__func__", None)
        if obj is None:
            return None
    return None


def _constructor_class(frame, pos):
    name = frame.f_code.co_name
    if name == "__init__" and pos and is_workspace_class(type(pos[0])):
        return type(pos[0])
    if name == "__new__" and pos and is_workspace_class(pos[0]):
        if pos[0].__init__ is not object.__init__:
            raise _Skip()  # its __init__ is the recorded construction
        return pos[0]
    return None


def _find_function(owner, name, code):
    for klass in getattr(owner, "__mro__", (owner,)):
        raw = vars(klass).get(name)
        if raw is not None and _unwrapped_code(raw) is code:
            return raw
    return None


def _workspace_namespaces():
    """(module name, dotted prefix, namespace) of every workspace module and of
    the classes defined at their top level."""
    for name, module in list(sys.modules.items()):
        if _module_kind(name) != "ws":
            continue
        yield name, "", vars(module)
        for attr, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == name:
                yield name, attr + ".", vars(value)


def _closure_matches(func, frame):
    cells = getattr(func, "__closure__", None) or ()
    names = frame.f_code.co_freevars
    return len(cells) == len(names) and all(
        c.cell_contents is frame.f_locals.get(n) for c, n in zip(cells, names))  # fmt: skip


def _returned_function(frame):
    """A function an earlier recorded call returned (a closure from a factory)
    that runs this frame: replayed by calling that result."""
    for obj, _ in list(_session.handles.values()):
        if getattr(obj, "__code__", None) is frame.f_code and _closure_matches(obj, frame):
            return obj
    return None


def _by_code(frame):
    """(module, qualname) of the one function reachable by name that runs this
    frame: a decorator's wrapper shares its code with every function it wraps,
    so the wrapper's closure must hold this frame's free variables."""
    found = set()
    for module, prefix, namespace in _workspace_namespaces():
        for attr, value in list(namespace.items()):
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if getattr(func, "__code__", None) is frame.f_code and _closure_matches(func, frame):
                found.add((module, prefix + attr))
    if len(found) != 1:
        raise codec.Unreplayable(f"{frame.f_code.co_qualname} is not reachable by name")
    return found.pop()


def _runs(raw, code):
    """Whether calling `raw` (a class attribute or module global) runs `code`."""
    if isinstance(raw, property):
        return any(getattr(f, "__code__", None) is code for f in (raw.fget, raw.fset, raw.fdel))
    return raw is not None and _unwrapped_code(raw) is code


def _owner(module, qualname):
    *outer, name = qualname.split(".")
    owner = sys.modules.get(module)
    for part in outer:
        owner = getattr(owner, part, None)
    return owner, name


def _target(frame):
    """(target, function object, positional, keyword) of a call; the
    positional values include the instance a constructor receives."""
    code = frame.f_code
    pos, kw = _parameters(frame)
    cls = _constructor_class(frame, pos)
    if cls is not None:
        func = _find_function(cls, code.co_name, code)
        target = {"kind": "construct", "module": cls.__module__, "qualname": cls.__qualname__}
        return target, func, pos, kw
    if code.co_name in _SKIP:
        raise _Skip()
    module, qualname = frame.f_globals.get("__name__", ""), code.co_qualname
    owner, name = _owner(module, qualname) if "<" not in qualname else (None, "")
    raw = inspect.getattr_static(owner, name, None) if owner is not None else None
    if not _runs(raw, code):
        made = _returned_function(frame)
        if made is not None:
            return {"kind": "op", "name": "__call__"}, None, [made, *pos], kw
        module, qualname = _by_code(frame)  # a decorated function: its wrapper runs
        owner, name = _owner(module, qualname)
        raw = inspect.getattr_static(owner, name)
    if not isinstance(owner, type) or isinstance(raw, staticmethod):  # a function reachable by name
        return {"kind": "call", "module": module, "qualname": qualname}, getattr(raw, "__func__", raw), pos, kw
    if isinstance(raw, property):
        kind = {id(raw.fget): "getattr", id(raw.fset): "setattr", id(raw.fdel): "delattr"}
        func = next(f for f in (raw.fget, raw.fset, raw.fdel) if f is not None and f.__code__ is code)
        return {"kind": kind[id(func)], "name": name}, func, pos, kw
    func = raw.__func__ if isinstance(raw, classmethod) else raw
    kind = "op" if name.startswith("__") and name.endswith("__") else "method"
    return {"kind": kind, "name": name}, func, pos, kw


def _new_step(frame):
    step = {"test": _session.test, "generator": bool(frame.f_code.co_flags & _GENERATOR_FLAGS)}
    if _session.test is not None:
        for stream in (sys.stdout, sys.stderr):  # a StringIO behind redirect_stdout: the test reads it itself
            if type(stream).__module__ != "_pytest.capture":
                _note_unobserved("output to a stream the test installed")
    try:
        target, func, pos, kw = _target(frame)  # raises _Skip for a frame that is not a call
        step["target"] = target
        pos, kw = _without_defaults(func, frame.f_code, pos, kw)
        if target["kind"] == "construct":
            pos = pos[1:]  # the instance (or class) being made is the construction itself
        step["args"] = codec.encode(pos, _handle, _ref)
        step["kwargs"] = codec.encode(kw, _handle, _ref) if kw else {}
    except codec.Unreplayable as exc:
        step["unreplayable"] = str(exc)[:200]
    step["i"] = _session.next_index
    _session.next_index += 1
    return step


def _finish(step, frame, value, raised):
    if raised is not None and value is None:
        step["raised"] = raised
    else:
        if step.get("target", {}).get("kind") == "construct" and frame.f_code.co_name == "__init__":
            value = frame.f_locals.get(frame.f_code.co_varnames[0])
        if step["generator"]:
            step["result"] = ["iterator", "not consumed"]
        else:
            step["result"] = codec.canon(value, is_workspace_class, consume=False)
            if value is not None and type(value) not in (bool, int, float, str, bytes):
                _session.handles[id(value)] = (value, step["i"])
    line = json.dumps(step) + "\n"
    with _LOCK:
        _OUT.write(line)
        _OUT.flush()


def _local_tracer(step):
    state = {"raised": None, "done": False}

    def local(frame, event, arg):
        if event == "exception":
            state["raised"] = codec.exception_name(arg[0], is_workspace_class)
        elif event == "line":
            state["raised"] = None  # the exception was handled inside the callee
        elif event == "return" and not state["done"]:
            state["done"] = True
            try:
                _finish(step, frame, arg, state["raised"])
            except Exception:
                _session.tracer_errors += 1
        return local

    return local


def _tracer(frame, event, arg):
    if event != "call":
        return None
    try:
        back = frame.f_back
        if back is None or _kind(back.f_code.co_filename) != "test":
            return None
        code = frame.f_code
        kind = _kind(code.co_filename)
        if kind == "test" or (kind is None and code.co_name not in ("__init__", "__new__")):
            return None
        if code.co_flags & _GENERATOR_FLAGS:
            if id(frame) in _session.seen_generators:
                return None  # a resumption, not a new call
            _session.seen_generators[id(frame)] = frame
        if _session.next_index >= MAX_CALLS:
            _session.over_cap += 1
            return None
        if kind is None:  # generated constructor code: only for workspace classes
            pos, _ = _parameters(frame)
            if _constructor_class(frame, pos) is None:
                return None
        return _local_tracer(_new_step(frame))
    except _Skip:
        return None
    except Exception:
        _session.tracer_errors += 1
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _session.test = item.nodeid
    yield
    _session.test = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    funcargs = getattr(item, "funcargs", None) or {}
    tmp = funcargs.get("tmp_path") or funcargs.get("tmpdir")
    _session.tmp = os.path.abspath(str(tmp)) if tmp is not None else None
    yield
    _session.tmp = None


def _note_unobserved(why):
    if _session.test is not None:
        _session.unobserved.setdefault(_session.test, why)


def _noting_readouterr(readouterr):
    def read(self):
        _note_unobserved("reads captured output")
        return readouterr(self)

    return read


def _audit(event, args):
    """A test that reads files under its tmp_path (what the code under test
    wrote, perhaps) asserts on more than the calls' results."""
    if _session.tmp is None or event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    path = args[0]
    if not isinstance(path, (str, os.PathLike)):
        return
    path = os.path.abspath(os.fspath(path))
    if path != _session.tmp and not path.startswith(_session.tmp + os.sep):
        return
    flags = args[2] if event == "open" and len(args) > 2 and isinstance(args[2], int) else os.O_RDONLY
    if flags & os.O_ACCMODE != os.O_WRONLY:
        _note_unobserved("reads files under tmp_path")


def pytest_sessionfinish(session, exitstatus):
    sys.settrace(None)
    threading.settrace(None)
    summary = {"event": "done", "calls": _session.next_index, "over_cap": _session.over_cap,
               "tracer_errors": _session.tracer_errors, "exitstatus": int(exitstatus),
               "unobserved": _session.unobserved}  # fmt: skip
    with _LOCK:
        _OUT.write(json.dumps(summary) + "\n")
        _OUT.flush()


from _pytest.capture import CaptureFixture  # noqa: E402  (after the plugin's own definitions)

CaptureFixture.readouterr = _noting_readouterr(CaptureFixture.readouterr)
sys.addaudithook(_audit)
sys.settrace(_tracer)
threading.settrace(_tracer)
