"""The judge's side: a pytest plugin (loaded with `-p <pkg>.judge` before any
test or conftest is imported) that connects to the candidate's process and
installs an import hook turning every workspace module into a proxy.

Nothing of the candidate is ever imported or executed here: the judge's tree
holds only the task's tests; a workspace module name (from the harness's
listing of the graded tree, in config.json beside this file, never from the
candidate) becomes a `ModuleProxy` whose attributes live in the other process.

The judge's policy limits what the candidate may do with the judge's objects
(the ones tests pass to candidate code: callbacks, fakes): call them, read and
set their public attributes, iterate and compare them; never reach a module,
a file, a path, an interpreter or pytest object, a dunder attribute, or swallow
an assertion failure of the test.
"""

import builtins
import hashlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import posixpath
import collections
import contextlib
import socket
import sys
import threading
import time
import types

import pytest

from . import tmpsync, wire

_CONFIG = json.loads(open(os.path.join(os.path.dirname(__file__), "config.json")).read())
# The grading plugin (result stream) is loaded alongside this one.
pytest_plugins = [_CONFIG["grading_plugin"]] if _CONFIG.get("grading_plugin") else []

# Candidate classes whose own protocol (`__eq__`, arithmetic, `in`...) the task declares the subject
# of its tests (`source.meta.oracle.own_protocol`): only their instances decide operations themselves.
_OWN_PROTOCOL = frozenset(_CONFIG.get("own_protocol", ()))

# Judge objects of these modules (or their submodules) are never handed to the
# candidate: each is a capability over the judge's files, process or framework.
_DENIED_MODULES = {
    "os", "posix", "nt", "sys", "io", "_io", "pathlib", "shutil", "tempfile", "subprocess", "socket", "_socket",
    "importlib", "ctypes", "_ctypes", "gc", "inspect", "marshal", "pickle", "_pickle", "copyreg", "threading",
    "_thread", "signal", "_signal", "atexit", "types", "pytest", "_pytest", "pluggy", "py", "runpy", "code",
    "codeop", "pdb", "site", "sysconfig", "zipimport", "weakref", "_weakref", "faulthandler", "resource",
    "fcntl", "mmap", "select", "selectors", "asyncio", "multiprocessing", "concurrent", "logging", "codecs",
    "fileinput", "zipfile", "tarfile", "gzip", "bz2", "lzma", "sqlite3", "dbm", "shelve", "glob",
}  # fmt: skip
_SAFE_BUILTINS = {
    id(f) for f in (abs, all, any, ascii, bin, callable, chr, divmod, format, hash, hex, isinstance, issubclass,
                    iter, len, max, min, next, oct, ord, pow, print, repr, round, sorted, sum)
}  # fmt: skip


# What introspection of a test's function or class may read (signature facts,
# names): never __globals__, __closure__, __dict__ or the code's constants.
_INTROSPECTION = {"__name__", "__qualname__", "__doc__", "__module__", "__defaults__", "__kwdefaults__",
                  "__code__", "__annotations__", "__wrapped__", "__mro__", "__bases__", "__signature__"}  # fmt: skip


def _module_of(obj) -> str:
    mod = getattr(obj, "__module__", None) if isinstance(obj, (type, types.BuiltinFunctionType, types.FunctionType)) \
        else getattr(type(obj), "__module__", None)  # fmt: skip
    return (mod if isinstance(mod, str) else "").split(".")[0]


class JudgePolicy(wire.Policy):
    def __init__(self, endpoint: "JudgeEndpoint"):
        self.endpoint = endpoint

    def export(self, obj) -> None:
        if isinstance(obj, (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType)):
            raise wire.Unencodable(f"a judge-side {type(obj).__name__} cannot be passed to candidate code")
        owner = getattr(obj, "__self__", None)
        if isinstance(obj, types.BuiltinFunctionType) and (owner is None or isinstance(owner, types.ModuleType)):
            if id(obj) not in _SAFE_BUILTINS:
                raise wire.Unencodable(f"the judge-side builtin {obj.__name__} cannot be passed to candidate code")
            return
        if owner is not None and owner is not obj:
            self.export(owner)  # a bound method is as safe as the object it is bound to
        func = getattr(obj, "func", None) if type(obj).__name__ == "partial" else None
        if func is not None:
            self.export(func)
            return
        if _module_of(obj) in _DENIED_MODULES:
            raise wire.Unencodable(f"a judge-side {type(obj).__name__} ({_module_of(obj)}) cannot be passed to "
                                   "candidate code")  # fmt: skip

    def allow(self, op: str, args: list) -> None:
        if op == "op":
            if args and args[0] == "view":
                raise PermissionError("plain views are the judge's to ask for")
            return  # operators on values: they run the test's own dunders at most
        target = args[0]
        if id(target) not in self.endpoint.export_ids:
            raise PermissionError("the candidate may only operate on objects the tests handed it")
        if op == "call":
            return
        name = args[1]
        introspection = op in ("getattr", "callattr") and name in _INTROSPECTION and \
            isinstance(target, (type, types.FunctionType, types.MethodType))  # fmt: skip
        if type(name) is not str or name.startswith("_") and not introspection:
            refused = AttributeError if op == "getattr" else PermissionError  # as if it were not there
            raise refused(f"attribute {name!r} of a judge object is not accessible to the candidate")
        # a test's own object may be changed by the code under test (`glom.delete(target, "a.b")`), as in
        # process; the judge's classes, functions and modules are code, never the candidate's to change
        if op in ("setattr", "delattr") and isinstance(target, (type, types.FunctionType, types.MethodType,
                                                                 types.ModuleType)):  # fmt: skip
            verb = "rebind" if op == "setattr" else "delete"
            raise PermissionError(f"the candidate may not {verb} attributes of judge classes or functions")

    def may_suppress(self, exc: BaseException) -> bool:
        return not _is_test_failure(exc)

    def redact(self, exc: BaseException) -> bool:
        return _is_test_failure(exc)  # its text could carry the test's expected values

    def compares_locally(self) -> bool:
        return True

    def owns_protocol(self, qualname: str) -> bool:
        return qualname in _OWN_PROTOCOL


def _is_test_failure(exc: BaseException) -> bool:
    """An assertion failure or a pytest outcome (fail/skip/exit are BaseExceptions)."""
    return isinstance(exc, AssertionError) or not isinstance(exc, Exception)


class JudgeEndpoint(wire.Endpoint):
    def __init__(self, sock):
        super().__init__(sock, JudgePolicy(self), root=_CONFIG["root"])
        self.observer = Observer(_CONFIG["observations"]) if _CONFIG.get("observations") else None

    def request(self, op: str, *args):
        """A request of test code; with an observer, what it got back (or
        raised) is logged for the lockstep comparison with the reference."""
        observer = self.observer
        if observer is None or observer.busy() or op in _UNOBSERVED or (op == "op" and args[0] == "view"):
            return super().request(op, *args)
        try:
            result = super().request(op, *args)
        except wire.IsolationBroken:
            raise
        except BaseException as exc:
            observer.log(op, _raised(exc))
            raise
        observer.log(op, observer.canon(result, identity=self.last_identity()))
        return result

    @contextlib.contextmanager
    def quietly(self):
        """Requests the harness makes for itself: not logged for the lockstep comparison."""
        observer = self.observer
        if observer is None:
            yield
            return
        before, observer.local.busy = observer.busy(), True
        try:
            yield
        finally:
            observer.local.busy = before

    def module_proxy(self, name: str, hid: int):
        module = sys.modules.get(name)
        if isinstance(module, ModuleProxy) and "__touchstone_remote__" in module.__dict__:
            return module
        return None

    def _note_sticky(self, exc: BaseException) -> None:
        """A test callback failed: the failure stands even if candidate code
        catches it (it is raised when the outermost call returns)."""
        if _is_test_failure(exc) and self.sticky is None:
            self.sticky = exc


_UNOBSERVED = {"import", "setattr", "delattr"}
MAX_OBSERVED_ITEMS = 1000
MAX_OBSERVED_FILE = 1 << 20  # bytes of a file a test reads that are logged; beyond, its digest
_MUTABLE = (list, dict, set, bytearray, collections.deque, collections.Counter, collections.OrderedDict,
            collections.defaultdict)  # fmt: skip


def _class_name(cls) -> str:
    """As the oracle's codec names classes: a candidate's (a mirror here) by its
    qualified name, any other with its module (`builtins.ValueError`)."""
    remote = cls.__dict__.get("__touchstone_remote__")
    name = getattr(cls, "__qualname__", "?")
    return name if remote is not None else f"{cls.__module__}.{name}"


def _raised(exc: BaseException) -> list:
    """`["raised", class, [its base classes]]`, the oracle's form: the task's
    `exceptions` semantics apply to it."""
    bases = [_class_name(k) for k in type(exc).__mro__[1:] if k not in (BaseException, object)]
    return ["raised", _class_name(type(exc)), bases]


class Observer:
    """Every value test code gets from the candidate's process, in the oracle's
    canonical form (`touchstone/harness/sandbox_files/codec.py`, so the task's
    declared semantics apply to it), one JSON line per request, per test, in
    the results mount: the candidate's process cannot reach it. A proxy is
    logged by its plain view (an opaque object as `["object", "", []]`: which
    class an honest solution uses is its choice; a builtin subclass as its
    plain value, as every operation in the judge sees it). A returned
    container that is one the request carried is logged as `["alias", memo
    index, value]`; one the candidate had returned before as `["again",
    value]` (`identity: "any"` folds both to the value).

    Besides values, what the tests read that candidate code produced: the
    captured output a test reads (`capsys`/`capfd.readouterr()`: `read:out`,
    `read:err`), a file under the tests' temporary directory a test opens for
    reading (`read:file`: its name and content) or lists (`read:dir`). What
    the judge cannot observe (output written to a stream the test installed,
    a file opened past the judge's `open`) is logged as `unobserved`: the run
    then does not count as oracle-guarded."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.test = None
        self.in_call = False  # the test's own phase (not pytest's setup of tmp_path and fixtures)
        self.local = threading.local()
        self.unobserved: set[tuple] = set()

    def busy(self) -> bool:
        return getattr(self.local, "busy", False)

    def log(self, op: str, value) -> None:
        line = json.dumps({"t": self.test, "op": op, "v": value}, default=repr)
        os.write(self.fd, (line + "\n").encode())

    def log_unobserved(self, why: str) -> None:
        if (self.test, why) not in self.unobserved:  # once per test and reason
            self.unobserved.add((self.test, why))
            self.log("unobserved", ["str", why])

    def canon(self, x, depth: int = 0, identity=None):
        self.local.busy = True  # the plain views fetched here are the observer's, not the test's
        sent, again = identity or ([], set())
        self.local.aliases = {id(o): i for i, o in enumerate(sent) if i and type(o) in _MUTABLE}
        self.local.again = again
        try:
            return self._canon(x, depth)
        except wire.IsolationBroken:
            raise
        except Exception as exc:  # a view that fails is itself what the test would see
            return _raised(exc)
        finally:
            self.local.busy = False

    def _canon(self, x, depth):
        t = type(x)
        if depth > 50:
            return ["deep"]
        if t in _MUTABLE:
            if id(x) in self.local.aliases:  # the test's own object, handed back (with its content)
                index = self.local.aliases.pop(id(x))
                try:
                    return ["alias", index, self._canon(x, depth + 1)]
                finally:
                    self.local.aliases[id(x)] = index
            if id(x) in self.local.again:  # the candidate's own object, handed out again
                self.local.again = self.local.again - {id(x)}
                return ["again", self._canon(x, depth + 1)]
        if t in (type(None), bool, int, str):
            return [{type(None): "none"}.get(t, t.__name__), x]
        if t is float:
            return ["float", "nan" if x != x else repr(x)]
        if t in (complex, bytes, bytearray):
            return [t.__name__, x.hex() if t is not complex else repr(x)]
        if t in (list, tuple, collections.deque):
            return [
                t.__name__ if t is not collections.deque else "list",
                [self._canon(e, depth + 1) for e in list(x)[:MAX_OBSERVED_ITEMS]],
            ]
        if t in (set, frozenset):
            return [t.__name__, sorted((self._canon(e, depth + 1) for e in x), key=json.dumps)]
        if t in (dict, collections.Counter, collections.OrderedDict, collections.defaultdict):
            pairs = [
                [self._canon(k, depth + 1), self._canon(v, depth + 1)] for k, v in list(x.items())[:MAX_OBSERVED_ITEMS]
            ]
            body = ["dict", pairs if t is collections.OrderedDict else sorted(pairs, key=json.dumps)]
            return body if t is dict else ["sub", f"collections.{t.__name__}", body, []]
        if isinstance(x, wire.Proxy):
            view = wire._judged(x)
            if view is None or type(view) is wire.Opaque:
                return ["object", "", []]
            if type(view) is wire.Record:
                return ["dataclass", view.qualname, [[k, self._canon(v, depth + 1)] for k, v in view.fields]]
            return self._canon(view, depth + 1)  # as the judge compares it: its plain view
        if isinstance(x, type) and "__touchstone_remote__" in x.__dict__:
            return ["ref", "", _class_name(x)]
        return ["value", _class_name(t), repr(x)[:200]]


class ModuleProxy(types.ModuleType):
    """A workspace module of the candidate's process. Import machinery
    attributes (dunders) and submodule bindings are local; everything else
    (reads, `monkeypatch.setattr`, deletes) goes to the real module."""

    def __getattr__(self, name):
        remote = self.__dict__.get("__touchstone_remote__")
        if remote is None:
            raise AttributeError(name)
        return getattr(remote, name)

    def __setattr__(self, name, value):
        if self._local(name, value):
            types.ModuleType.__setattr__(self, name, value)
        else:
            setattr(self.__dict__["__touchstone_remote__"], name, value)

    def __delattr__(self, name):
        if name in self.__dict__:
            types.ModuleType.__delattr__(self, name)
        else:
            delattr(self.__dict__["__touchstone_remote__"], name)

    def __dir__(self):
        remote = self.__dict__.get("__touchstone_remote__")
        return sorted(set(self.__dict__) | set(dir(remote) if remote is not None else ()))

    def __repr__(self):
        return f"<module {self.__name__!r} (isolated: runs in the candidate's process)>"

    def _local(self, name: str, value) -> bool:
        dunder = name.startswith("__") and name.endswith("__")
        return dunder or isinstance(value, types.ModuleType) or "__touchstone_remote__" not in self.__dict__


class SharedTmpGuard(importlib.abc.MetaPathFinder):
    """The tests' temporary directory is writable by candidate code: nothing
    is ever imported from there into the judge."""

    def __init__(self, shared: str):
        self.shared = shared

    def find_spec(self, fullname, path=None, target=None):
        entries = [e for e in (path or sys.path) if os.path.abspath(e or os.getcwd()).startswith(self.shared)]
        if entries and importlib.machinery.PathFinder.find_spec(fullname, entries) is not None:
            raise ImportError(f"{fullname}: the judge imports nothing from the tests' temporary directory, "
                              "which candidate code can write")  # fmt: skip
        return None


class WorkspaceFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds workspace modules by the harness's listing of the graded tree.
    Names the judge's own environment provides (standard library, pytest and
    its dependencies) are never taken over, and a test module of the judge's
    tree at the same place wins, as it would on sys.path."""

    def __init__(self, root: str, modules: list[str]):
        self.root = root
        self.installed = _installed_entries(root)
        self.files = set(modules)
        self.dirs = {posixpath.dirname(m) for m in modules}
        for d in list(self.dirs):
            while d:
                d = posixpath.dirname(d)
                self.dirs.add(d)
        self.dirs.discard("")

    def find_spec(self, fullname, path=None, target=None):
        parent_name, _, leaf = fullname.rpartition(".")
        if parent_name:
            parent = sys.modules.get(parent_name)
            if not isinstance(parent, ModuleProxy):
                return None
            places = [(parent.__dict__["__touchstone_dir__"], None)]
        elif self._provided_elsewhere(fullname):
            return None
        else:
            places = [(rel, rel) for rel in self._workspace_entries()]
        for reldir, entry in places:
            rel = posixpath.join(reldir, leaf) if reldir else leaf
            local = os.path.join(self.root, rel)
            if os.path.isfile(local + ".py") or os.path.isfile(os.path.join(local, "__init__.py")):
                return None  # the judge's own (test) module comes first
            if rel + ".py" in self.files or rel in self.dirs:
                # as FileFinder does: a directory with __init__ first, then a module, then a namespace package
                package = rel + "/__init__.py" in self.files or rel + ".py" not in self.files
                spec = importlib.machinery.ModuleSpec(fullname, self, origin=f"isolated:{rel}", is_package=package)
                if package:
                    spec.submodule_search_locations = [local]
                spec.loader_state = (rel if package else reldir, entry)
                return spec
        return None

    def create_module(self, spec):
        module = ModuleProxy(spec.name)
        module.__dict__["__touchstone_dir__"] = spec.loader_state[0]
        return module

    def exec_module(self, module):
        entry = module.__spec__.loader_state[1]
        remote = ENDPOINT.request("import", module.__name__, entry)
        module.__dict__["__touchstone_remote__"] = remote
        with ENDPOINT.quietly():  # the harness's read, not the test's: never a lockstep observation
            module.__dict__["__doc__"] = remote.__doc__  # a dunder, so local: the module's own docstring

    def _workspace_entries(self):
        seen = []
        for entry in sys.path:
            full = os.path.abspath(entry or os.getcwd())
            if full == self.root or full.startswith(self.root + "/"):
                rel = os.path.relpath(full, self.root)
                rel = "" if rel == "." else rel
                if rel not in seen:
                    seen.append(rel)
        return seen + [rel for rel in self.installed if rel not in seen]

    def _provided_elsewhere(self, name: str) -> bool:
        if name in sys.builtin_module_names or name in sys.stdlib_module_names:
            return True
        outside = [e for e in sys.path if e and not os.path.abspath(e).startswith(self.root)]
        return importlib.machinery.PathFinder.find_spec(name, outside) is not None


def _installed_entries(root: str) -> list[str]:
    """Workspace folders the environment's `.pth` files put on the path (an
    editable install of a src layout: `/workspace/src`). `site` drops them
    here, where the judge's tree holds only tests; the candidate's process has
    them. Read from the environment, built before any candidate ran."""
    import site

    entries = []
    for sitedir in site.getsitepackages():
        try:
            names = sorted(n for n in os.listdir(sitedir) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            with open(os.path.join(sitedir, name), encoding="utf-8", errors="replace") as fh:
                lines = [line.strip() for line in fh]
            for line in lines:
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                full = os.path.normpath(os.path.join(sitedir, line))
                rel = os.path.relpath(full, root)
                if full.startswith(root + "/") and rel not in entries:
                    entries.append(rel)
    return entries


# How open()'s mode maps to os.open flags; O_NOFOLLOW is added to every component.
_MODE_FLAGS = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
               "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL}  # fmt: skip


class NoLinksOpen:
    """The judge's `open` (builtins and io): a file under the tests' temporary
    directory, which candidate code writes too, is opened one path component
    at a time with O_NOFOLLOW, so a symbolic link planted there can never
    point the judge at its own files (a golden file, the tests, the results
    mount) for a read or a write; there is no check-then-open window to race.
    Anywhere else it is the builtin open."""

    def __init__(self, shared: str, real_open):
        self.shared, self.real_open = os.path.realpath(shared), real_open
        self.local = threading.local()

    def __call__(self, file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(file))
            if path.startswith(self.shared + "/") and "opener" not in kwargs and len(args) < 5:
                self.local.opening = True  # the audit hook knows this open is seen here
                try:
                    if "r" in mode or "+" in mode:
                        self._observe(path)
                    return self.real_open(self._fd(path, mode), mode, *args, **kwargs)
                finally:
                    self.local.opening = False
        return self.real_open(file, mode, *args, **kwargs)

    def opening(self) -> bool:
        return getattr(self.local, "opening", False)

    def _observe(self, path: str) -> None:
        """A test reads a file under the tests' temporary directory (where
        candidate code writes): its content is an observation."""
        observer = ENDPOINT.observer
        if observer is None or not observer.in_call or observer.busy():
            return
        rel = os.path.relpath(path, self.shared)
        try:
            with self.real_open(self._fd(path, "rb"), "rb") as f:
                data = f.read(MAX_OBSERVED_FILE + 1)
        except OSError as exc:
            observer.log("read:file", [rel, _raised(exc)])
            return
        if len(data) > MAX_OBSERVED_FILE:
            data = hashlib.sha256(data).hexdigest().encode()  # too big to log: the first MiB's digest
        try:
            observer.log("read:file", [rel, ["str", data.decode("utf-8")]])
        except UnicodeDecodeError:
            observer.log("read:file", [rel, ["bytes", data.hex()]])

    def _fd(self, path: str, mode: str) -> int:
        flags = _MODE_FLAGS[next((c for c in mode if c in _MODE_FLAGS), "r")]
        if "+" in mode:
            flags = (flags & ~(os.O_RDONLY | os.O_WRONLY)) | os.O_RDWR
        parts = os.path.relpath(path, self.shared).split("/")
        fd = os.open(self.shared, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = inner
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=fd)
        finally:
            os.close(fd)


def _connect(path: str, timeout: float) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _write_status(**fields) -> None:
    with open(_CONFIG["status_file"], "w") as f:
        json.dump(fields, f)


def _status() -> dict:
    return {"connected": True, "broken": ENDPOINT.broken, "served": ENDPOINT.calls}


try:
    ENDPOINT = JudgeEndpoint(_connect(_CONFIG["socket"], _CONFIG.get("connect_timeout", 60)))
except OSError as _exc:
    _write_status(connected=False, error=f"cannot reach the candidate's process: {_exc}")
    raise
ENDPOINT.channel.sync = tmpsync.TmpSync(_CONFIG["shared_tmp"], accept_links=False)
_write_status(**_status())


def _to_stdout(text: str) -> None:
    """What candidate code prints to stdout: written here, where a test's capsys reads it."""
    if type(text) is str:
        _note_stream(sys.stdout, "stdout")
        sys.stdout.write(text)


def _to_stderr(text: str) -> None:
    if type(text) is str:
        _note_stream(sys.stderr, "stderr")
        sys.stderr.write(text)


def _note_stream(stream, name: str) -> None:
    """Output into pytest's capture is observed where the test reads it
    (`readouterr`); output into a stream the test installed (a StringIO
    behind `redirect_stdout`) is read past the judge: unobserved."""
    observer = ENDPOINT.observer
    if observer is not None and observer.in_call and type(stream).__module__ != "_pytest.capture":
        observer.log_unobserved(f"candidate output to a {name} the test installed ({type(stream).__name__})")


def _observed_readouterr(readouterr):
    def read(self):
        result = readouterr(self)
        observer = ENDPOINT.observer
        if observer is not None and not observer.busy():
            observer.log("read:out", observer.canon(result.out))
            observer.log("read:err", observer.canon(result.err))
        return result

    return read


_WATCHED_EVENTS = {"open", "os.listdir", "os.scandir"}


def _audit(event: str, args) -> None:
    """Reads of the tests' temporary directory that bypass the judge's `open`
    (os.open, a listing): a listing is observed, any other read is not."""
    if event not in _WATCHED_EVENTS:
        return
    observer = ENDPOINT.observer
    if observer is None or not observer.in_call or observer.busy() or _OPEN.opening():
        return
    if ENDPOINT.channel.sync is not None and ENDPOINT.channel.sync.active():
        return  # the wire copying the folder, not the test reading it
    path = args[0] if args else None
    if not isinstance(path, (str, bytes, os.PathLike)):
        return
    path = os.path.abspath(os.fsdecode(path))
    if path != _OPEN.shared and not path.startswith(_OPEN.shared + "/"):
        return
    rel = os.path.relpath(path, _OPEN.shared)
    if event == "open":
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else os.O_RDONLY
        if flags & os.O_ACCMODE != os.O_WRONLY:
            observer.log_unobserved(f"{rel} read past the judge's open()")
        return
    observer.local.busy = True
    try:
        observer.log("read:dir", [rel, ["list", [["str", n] for n in sorted(os.listdir(path))]]])
    except OSError as exc:
        observer.log("read:dir", [rel, _raised(exc)])
    finally:
        observer.local.busy = False


# the candidate's output streams forward to this process before any workspace module is imported
_OUTPUT = ENDPOINT.request("import", __name__.rpartition(".")[0] + ".output", None)
ENDPOINT.request("callattr", _OUTPUT, "install", (_to_stdout, _to_stderr), {})
sys.meta_path.insert(0, WorkspaceFinder(_CONFIG["root"], _CONFIG["modules"]))
sys.meta_path.insert(0, SharedTmpGuard(_CONFIG["shared_tmp"]))
_OPEN = builtins.open = io.open = NoLinksOpen(_CONFIG["shared_tmp"], io.open)
if ENDPOINT.observer is not None:
    from _pytest.capture import CaptureFixture

    CaptureFixture.readouterr = _observed_readouterr(CaptureFixture.readouterr)
    sys.addaudithook(_audit)


@pytest.hookimpl(tryfirst=True)  # before pytest's own tmpdir plugin reads the option
def pytest_configure(config):
    # tmp_path lives where the candidate's sandbox sees it, at the same path
    config.option.basetemp = os.path.join(_CONFIG["shared_tmp"], "basetemp")


def pytest_runtest_logstart(nodeid, location):
    if ENDPOINT.observer is not None:
        ENDPOINT.observer.test = nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    observer = ENDPOINT.observer
    if observer is not None:
        observer.in_call = True
    try:
        yield
    finally:
        if observer is not None:
            observer.in_call = False


def pytest_sessionfinish(session, exitstatus):
    _write_status(**_status())
