"""The wire between the judge (pytest + hidden tests) and the candidate's process.

Standard library only: this file is copied into both sandboxes and runs under
their interpreter. Frames are 4-byte big-endian lengths followed by UTF-8 JSON
(bounded size); no pickle, marshal or eval anywhere. Either side, while it waits
for its reply, serves the other's requests (callbacks), so calls nest freely.

Values cross in one of two ways:

* copied: plain data of EXACT builtin types (None, bool, int, float incl.
  nan/inf, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset,
  slice, Ellipsis, Decimal, Fraction, OrderedDict, Counter, defaultdict with a
  builtin factory, deque) and references to builtin classes and to pure
  builtin functions (`sum`, `len`, `operator.imul`, `math.floor`) by name. The
  receiver builds genuine objects of those types from the data; a subclass (a
  list whose `__eq__` always says yes) is not plain and crosses as a handle.
  Mutable containers passed as call arguments are written back into the
  caller's originals after the call (so in-place APIs behave as in-process).
  Identity crosses too: a reply that holds a container of the request (the
  argument itself, or one inside it) names it by the request's memo index,
  so the caller gets its own original object back (`f(xs) is xs`, and a
  "copy" that is not one, behave as in process); a mutable container the
  owner returned before (its own state, handed out again) is marked in the
  reply (`again`), so the judge can log that identity as plain data.
* by handle: everything else. The receiver gets a `Proxy` (a `CallableProxy` when
  the object is callable, so `callable()` answers as in process); every operation on
  it is a request executed by the owner. A proxy is never equal to a local
  object (its comparisons with non-proxies return NotImplemented), and the
  results of protocol operations (bool, len, hash, str...) are type-checked.

Exceptions cross as (class, args, text): builtin classes as themselves, other
classes as a "mirror" class built on the receiving side (same name, bases
mapped), whose instances keep a handle to the original. Each also carries its
origin (`ORIGIN`): the class's full name and the innermost frame under the
sending side's root (the candidate's own code), so a failure report names
where the candidate raised, not this module's re-raise.

`Endpoint` is symmetric; a `Policy` decides what the other side may do with
this side's objects (the judge's policy is strict: see judge.py).
"""

from __future__ import annotations

import base64
import builtins
import collections
import copy
import dataclasses
import decimal
import fractions
import inspect
import itertools
import json
import math
import operator
import pathlib
import struct
import threading
import traceback
import types
import weakref

# pytest leaves this module's frames out of tracebacks (judge side): a failure's location is the test's line
__tracebackhide__ = True
MAX_FRAME = 64 << 20
MAX_DEPTH = 200
MAX_TEXT = 4000
MAX_RETURNED = 100_000  # containers remembered for identity (`Endpoint.returned`)
_HEADER = struct.Struct(">I")
_BIG_INT_BITS = 12000  # beyond this, ints travel as hex (int->str is capped at 4300 digits)
# An exception's origin, kept in its __dict__ under this name on the receiving side and sent on with it
# when it crosses again: {"type": "pkg.mod.Error", "at": ["pkg/mod.py", line, "function"] or None}.
ORIGIN = "__touchstone_origin__"


class IsolationBroken(BaseException):
    """The other process is gone or broke the protocol. A BaseException, so no
    `except Exception` or `pytest.raises(Exception)` can take it for a result."""


class Unencodable(TypeError):
    """This value may not cross (the local policy refuses to hand it out)."""


# ----------------------------------------------------------------- framing


class Channel:
    """Length-prefixed JSON frames over a connected stream socket."""

    def __init__(self, sock):
        self.sock = sock
        self.send_lock = threading.Lock()
        # bytes received but not yet consumed: a read interrupted by a signal
        # handler's exception loses nothing, and the next read resumes the frame
        self.buffer = bytearray()
        # this side's copy of the tests' temporary directory (`tmpsync.TmpSync`): every frame carries
        # what changed in it, every frame received brings the other side's changes first
        self.sync = None

    def send(self, message: dict) -> None:
        with self.send_lock:
            changes = self.sync.delta() if self.sync is not None else None
            if changes:
                message = {**message, "fs": changes}
            data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
            if len(data) > MAX_FRAME:
                if changes:  # the files cannot follow: the run ends rather than go on with two copies
                    raise IsolationBroken(f"the tests' temporary files changed by more than {MAX_FRAME} bytes")
                raise Unencodable(f"message of {len(data)} bytes exceeds the {MAX_FRAME}-byte frame limit")
            try:
                self.sock.sendall(_HEADER.pack(len(data)) + data)
            except OSError as exc:
                raise IsolationBroken(f"connection lost while sending: {exc}") from None

    def recv(self) -> dict:
        self._fill(_HEADER.size)
        (size,) = _HEADER.unpack_from(self.buffer)
        if size > MAX_FRAME:
            raise IsolationBroken(f"frame of {size} bytes exceeds the {MAX_FRAME}-byte limit")
        self._fill(_HEADER.size + size)
        frame = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
        del self.buffer[: _HEADER.size + size]
        try:
            message = json.loads(frame, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise IsolationBroken(f"malformed frame: {exc}") from None
        if type(message) is not dict:
            raise IsolationBroken("malformed frame: not an object")
        changes = message.pop("fs", None)
        if changes is not None and self.sync is not None:
            try:
                self.sync.apply(changes)
            except Exception as exc:  # SyncRefused, or a copy this side cannot write (full)
                raise IsolationBroken(f"the other side's temporary files: {exc}") from None
        return message

    def _fill(self, n: int) -> None:
        while len(self.buffer) < n:
            try:
                chunk = self.sock.recv(min(n - len(self.buffer), 1 << 20))
            except OSError as exc:
                if exc.errno is None:  # raised by a signal handler (TimeoutError()), not by the socket
                    raise
                raise IsolationBroken(f"connection lost: {exc}") from None
            if not chunk:
                raise IsolationBroken("the other process closed the connection")
            self.buffer += chunk


def _no_constant(name: str):
    raise ValueError(f"JSON constant {name} is not part of the protocol")


# ------------------------------------------------------------------- values

_SCALARS = (type(None), bool, str)
_BUILTIN_CLASSES = {
    name: obj for name, obj in vars(builtins).items() if isinstance(obj, type) and not name.startswith("_")
}
_SINGLETONS = {"Ellipsis": Ellipsis, "NotImplemented": NotImplemented}
# Builtin functions that compute only from their arguments cross by name: each side uses its own
# copy of the same function, so `f is sum`, `id(f)` lookups and `inspect.isbuiltin` hold on the far
# side as in process, and neither side is handed a capability of the other's (no open, eval, getattr).
_PURE_BUILTINS = ("abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format", "hash", "hex",
                  "isinstance", "issubclass", "iter", "len", "max", "min", "next", "oct", "ord", "pow", "repr",
                  "round", "sorted", "sum")  # fmt: skip
_PURE_FUNCTIONS = {
    **{("builtins", name): getattr(builtins, name) for name in _PURE_BUILTINS},
    **{(module.__name__, name): f for module in (operator, math) for name, f in vars(module).items()
       if isinstance(f, types.BuiltinFunctionType) and not name.startswith("_")},
}  # fmt: skip
_PURE_NAMES = {id(f): key for key, f in _PURE_FUNCTIONS.items()}
# Paths cross as their text (both sandboxes see the tests' temporary directory at the same path).
_PATHS = {pathlib.PosixPath, pathlib.PurePosixPath}
_PATH_TYPES = {t.__name__: t for t in _PATHS}
_MUTABLE = (list, dict, set, bytearray, collections.OrderedDict, collections.Counter, collections.defaultdict,
            collections.deque)  # fmt: skip
_PAIRS = {dict: "d", collections.OrderedDict: "od", collections.Counter: "ct"}
_SEQS = {list: "l", tuple: "t", set: "s", frozenset: "fs"}
_PENDING = object()  # an immutable container whose items are still being decoded
_CONTAINER_TAGS = {list: "l", dict: "d", set: "s", bytearray: "ba", collections.OrderedDict: "od",
                   collections.Counter: "ct", collections.defaultdict: "dd", collections.deque: "dq"}  # fmt: skip
_CONTAINER_TYPES = {tag: t for t, tag in _CONTAINER_TAGS.items()}


class SignatureInfo:
    """A callable's signature as names, kinds and default values."""

    __slots__ = ("signature",)

    def __init__(self, signature: inspect.Signature):
        self.signature = signature


class CodeInfo:
    """A function's code object as plain facts (counts, flags, names): what
    introspection (`f.__code__.co_argcount`) reads. Never the bytecode or
    constants (a test's constants can hold its expected values)."""

    FIELDS = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_flags", "co_name",
              "co_qualname", "co_varnames", "co_firstlineno")  # fmt: skip
    __slots__ = ("fields",)

    def __init__(self, code: types.CodeType):
        self.fields = {k: getattr(code, k) for k in self.FIELDS if hasattr(code, k)}


class ByRef:
    """A mutable builtin container reached through an attribute (a module's
    registry, an object's list): sent as a live `ContainerProxy`, so that
    `mod.REGISTRY.add(x)` changes the real one. Call results are copies."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def builtin_class_name(obj) -> str | None:
    name = getattr(obj, "__name__", None)
    return name if isinstance(name, str) and _BUILTIN_CLASSES.get(name) is obj else None


class _EncodeMemo:
    """Containers seen while encoding one message, in order: a container met
    again is sent as {"m": index} (aliasing and cycles survive the copy)."""

    def __init__(self, known: list | None = None):
        self.objects = list(known or [])
        self.index = {id(o): i for i, o in enumerate(self.objects)}
        self.open: set[int] = set()


class Policy:
    """What the other side may do with this side's objects. Default: anything."""

    def export(self, obj) -> None:
        """Raise Unencodable if `obj` must not be handed out as a handle."""

    def allow(self, op: str, args: list) -> None:
        """Raise PermissionError if the other side may not run `op` on `args` here."""

    def may_suppress(self, exc: BaseException) -> bool:
        """Whether the other side's `__exit__` may swallow `exc` raised here."""
        return True

    def redact(self, exc: BaseException) -> bool:
        """Whether to send `exc` as its class alone (no arguments, text or traceback)."""
        return False

    def compares_locally(self) -> bool:
        """Whether this side judges (the judge): every deciding protocol
        operation on a proxy (comparison, truth test, `in`, arithmetic, a
        builtin type's method) runs HERE on the proxy's plain view (`view_of`),
        never in the owner's process; the candidate's side asks the owner."""
        return False

    def owns_protocol(self, qualname: str) -> bool:
        """Whether the task declared that class's own protocol (`__eq__`,
        arithmetic, `in`...) the subject of its tests: the owner then decides
        operations on its instances, as in process."""
        return False


class Endpoint:
    """One side of the connection: the handle table of our exported objects,
    proxies for the other side's, and the request/serve loop."""

    def __init__(self, sock, policy: Policy | None = None, importer=None, root: str | None = None):
        self.channel = Channel(sock)
        self.policy = policy or Policy()
        self.importer = importer  # callable(name, entry) on the side that owns the modules
        self.root = root  # this side's workspace: where an exception's origin is looked for
        self.mail = threading.Condition()  # guards the mailbox, the reader flag and the qid sets
        self.mailbox: dict[int, dict] = {}  # answers read by a thread for another
        self.waiting: set[int] = set()
        self.reading = False
        self.local = threading.local()  # per thread: how deep in nested requests
        self.exported: dict[int, object] = {}
        self.export_ids: dict[int, int] = {}  # id(obj) -> handle
        self.sent: dict[int, int] = {}  # handle -> times sent, for releases
        self.proxies: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self.received: dict[int, int] = {}
        self.releases: list = []
        self.mirrors: dict[int, type] = {}
        self._handles = itertools.count(1)
        self._queries = itertools.count(1)
        self.abandoned: set[int] = set()  # requests given up on (interrupted): their answers are dropped
        self.sticky: BaseException | None = None
        self.broken: str | None = None
        self.calls = 0
        # mutable containers this side returned, kept alive so their ids stay theirs: one met again in
        # a reply is the same object handed out twice (its own state), which the reply says
        self.returned: dict[int, object] = {}

    # ------------------------------------------------------------ encoding

    def encode(self, x, memo: _EncodeMemo, depth: int = 0):
        if depth > MAX_DEPTH:
            raise Unencodable(f"value nested deeper than {MAX_DEPTH} levels")
        t = type(x)
        if t in _SCALARS:
            return x
        if t is int:
            return x if x.bit_length() <= _BIG_INT_BITS else {"ih": format(x, "x")}
        if t is float:
            return {"f": repr(x)}
        if t is complex:
            return {"c": [repr(x.real), repr(x.imag)]}
        if t is bytes:
            return {"b": base64.b64encode(x).decode()}
        if t is decimal.Decimal:
            return {"dec": str(x)}
        if t is fractions.Fraction:
            return {"fr": [self.encode(x.numerator, memo), self.encode(x.denominator, memo)]}
        if t in _PATHS:
            return {"p": [t.__name__, str(x)]}
        if t is slice:
            return {"sl": [self.encode(v, memo, depth + 1) for v in (x.start, x.stop, x.step)]}
        for name, value in _SINGLETONS.items():
            if x is value:
                return {"sg": name}
        if t is type and builtin_class_name(x):
            return {"bt": x.__name__}
        if t is types.BuiltinFunctionType and (key := _PURE_NAMES.get(id(x))) and _PURE_FUNCTIONS[key] is x:
            return {"bf": list(key)}
        if t is BoundMethod:  # a method of a container is one of the live container
            target = ByRef(x.obj) if type(x.obj) in _CONTAINER_TAGS else x.obj
            return {"bm": [self.encode(target, memo, depth + 1), x.name]}
        if t is SignatureInfo:
            return {"sig": [[p.name, int(p.kind), self.encode([] if p.default is p.empty else [p.default], memo, depth + 1)]
                            for p in x.signature.parameters.values()]}  # fmt: skip
        if t is CodeInfo:
            return {"code": {k: self.encode(v, memo, depth + 1) for k, v in x.fields.items()}}
        if t is ByRef:
            out = self.encode_ref(x.value)
            if "h" in out:
                out.update(k="c", t=_CONTAINER_TAGS[type(x.value)])
            return out
        if t is collections.defaultdict and x.default_factory is not None and not builtin_class_name(x.default_factory):
            return self.encode_ref(x)  # its factory is code: a handle, judged by its plain view (a dict)
        if t in _SEQS or t in _PAIRS or t in (bytearray, collections.defaultdict, collections.deque):
            return self._encode_container(x, t, memo, depth)
        if isinstance(x, BaseException):
            return self.encode_exception(x, memo, depth)
        return self.encode_ref(x)

    def _encode_container(self, x, t, memo: _EncodeMemo, depth: int):
        key = id(x)
        if key in memo.index:
            if key in memo.open and t in (tuple, frozenset):
                raise Unencodable("a tuple that contains itself")
            return {"m": memo.index[key]}
        memo.index[key] = len(memo.objects)
        memo.objects.append(x)
        memo.open.add(key)
        try:
            return self._encode_items(x, t, memo, depth + 1)
        finally:
            memo.open.discard(key)

    def _encode_items(self, x, t, memo, depth):
        enc = self.encode
        if t in _SEQS:
            return {_SEQS[t]: [enc(v, memo, depth) for v in x]}
        if t in _PAIRS:
            return {_PAIRS[t]: [[enc(k, memo, depth), enc(v, memo, depth)] for k, v in x.items()]}
        if t is bytearray:
            return {"ba": base64.b64encode(bytes(x)).decode()}
        if t is collections.deque:
            return {"dq": [[enc(v, memo, depth) for v in x], x.maxlen]}
        factory = x.default_factory
        if factory is not None and not builtin_class_name(factory):
            raise Unencodable("defaultdict with a non-builtin factory")
        return {"dd": [enc(factory, memo, depth), [[enc(k, memo, depth), enc(v, memo, depth)] for k, v in x.items()]]}

    def encode_ref(self, x):
        """A handle to one of our objects, or a reference back to one of theirs."""
        own = _remote_of(x, self)
        if own is not None:
            return {"r": own}
        self.policy.export(x)
        key = id(x)
        hid = self.export_ids.get(key)
        if hid is None or self.exported.get(hid) is not x:
            hid = next(self._handles)
            self.exported[hid], self.export_ids[key] = x, hid
        self.sent[hid] = self.sent.get(hid, 0) + 1
        out = {"h": hid}
        if isinstance(x, type) and issubclass(x, BaseException):
            bases = [b for b in x.__bases__ if issubclass(b, BaseException)]
            out.update(k="ec", n=_text(x.__name__, 200), b=[self.encode(b, _EncodeMemo()) for b in bases])
        elif isinstance(x, types.ModuleType):
            out.update(k="m", n=_text(x.__name__, 500))
        elif callable(x):  # the receiver's stand-in is callable exactly when the object is (`callable(v)` in a test)
            out["f"] = 1
        return out

    def encode_exception(self, exc: BaseException, memo, depth=0):
        cls = type(exc)
        try:
            out = {"e": self.encode(cls, _EncodeMemo())}
        except Unencodable:  # a class we may not hand out: its nearest builtin base
            out = {"e": {"bt": next(b.__name__ for b in cls.__mro__ if builtin_class_name(b))}}
        if self.policy.redact(exc):
            return out
        out.update(s=_safe(str, exc), rp=_safe(repr, exc), w=origin_of(exc, self.root))
        try:
            out["a"] = self.encode(tuple(exc.args), memo, depth + 1)
        except Unencodable:
            out["a"] = {"t": [out["s"]]}
        tb = exc.__traceback__
        if tb is not None:
            out["tb"] = _text("".join(traceback.format_exception(cls, exc, tb)), MAX_TEXT)
        if not builtin_class_name(cls):
            try:
                out["o"] = self.encode_ref(exc)
            except Unencodable:
                pass
        return out

    # ------------------------------------------------------------ decoding

    def decode(self, v, memo: list, depth: int = 0):
        if depth > MAX_DEPTH:
            raise IsolationBroken("value nested too deeply")
        t = type(v)
        if t in _SCALARS or t is int:
            return v
        if t is not dict or len(v) < 1:
            raise IsolationBroken(f"malformed value of JSON type {t.__name__}")
        tag = next(iter(v))
        body = v[tag]
        try:
            return self._decode_tagged(tag, body, v, memo, depth + 1)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, ArithmeticError,
                decimal.InvalidOperation, RecursionError) as exc:  # fmt: skip
            raise IsolationBroken(f"malformed {tag!r} value: {type(exc).__name__}: {exc}") from None

    def _decode_tagged(self, tag, body, v, memo, depth):
        dec = self.decode
        if tag == "f":
            return float(_str(body))
        if tag == "ih":
            return int(_str(body), 16)
        if tag == "c":
            return complex(float(_str(body[0])), float(_str(body[1])))
        if tag == "b":
            return base64.b64decode(_str(body), validate=True)
        if tag == "dec":
            return decimal.Decimal(_str(body))
        if tag == "fr":
            return fractions.Fraction(_int(dec(body[0], memo, depth)), _int(dec(body[1], memo, depth)))
        if tag == "sl":
            return slice(*(dec(x, memo, depth) for x in _list(body, 3)))
        if tag == "p":
            kind, text = _list(body, 2)
            return _PATH_TYPES[_str(kind)](_str(text))
        if tag == "sg":
            return _SINGLETONS[_str(body)]
        if tag == "bt":
            return _BUILTIN_CLASSES[_str(body)]
        if tag == "bf":
            module, name = _list(body, 2)
            return _PURE_FUNCTIONS[(_str(module), _str(name))]
        if tag == "m":
            found = memo[_int(body)]
            if found is _PENDING:
                raise IsolationBroken("reference to an unfinished immutable container")
            return found
        if tag in ("l", "s", "d", "od", "ct", "ba", "dq", "dd"):
            return self._decode_mutable(tag, body, memo, depth)
        if tag in ("t", "fs"):
            slot = len(memo)
            memo.append(_PENDING)
            items = [dec(x, memo, depth) for x in _list(body)]
            memo[slot] = tuple(items) if tag == "t" else frozenset(items)
            return memo[slot]
        if tag == "h":
            return self.proxy_for(_int(body), v)
        if tag == "r":
            hid = _int(body)
            if hid not in self.exported:
                raise IsolationBroken(f"reference to unknown handle {hid}")
            return self.exported[hid]
        if tag == "bm":
            obj, name = dec(body[0], memo, depth), _str(body[1])
            if isinstance(obj, Proxy):
                return BoundMethod(obj, name)
            self.policy.allow("getattr", [obj, name])  # one of ours: resolve it here, under our rules
            return getattr(obj, name)
        if tag == "e":
            return self.decode_exception(v, memo, depth)
        if tag == "sig":
            params = []
            for entry in _list(body):
                name, kind, default = _list(entry, 3)
                given = dec(default, memo, depth)
                params.append(inspect.Parameter(_str(name), inspect._ParameterKind(_int(kind)),
                                                default=given[0] if given else inspect.Parameter.empty))  # fmt: skip
            return inspect.Signature(params)
        if tag == "code":
            fields = {k: dec(val, memo, depth) for k, val in _dict(body).items() if k in CodeInfo.FIELDS}
            return types.SimpleNamespace(**fields)
        raise IsolationBroken(f"unknown value tag {tag!r}")

    def _decode_mutable(self, tag, body, memo, depth):
        dec = self.decode
        kind = {"l": list, "s": set, "d": dict, "od": collections.OrderedDict, "ct": collections.Counter,
                "ba": bytearray, "dq": collections.deque, "dd": collections.defaultdict}[tag]  # fmt: skip
        if tag == "dq":
            out = collections.deque(maxlen=None if body[1] is None else _int(body[1]))
        elif tag == "dd":
            factory = dec(body[0], memo, depth)
            if factory is not None and not builtin_class_name(factory):
                raise IsolationBroken("defaultdict factory must be a builtin class")
            out, body = collections.defaultdict(factory), body[1]
        else:
            out = kind()
        memo.append(out)
        if tag == "ba":
            out.extend(base64.b64decode(_str(body), validate=True))
        elif tag in ("l", "dq"):
            out.extend(dec(x, memo, depth) for x in _list(body if tag == "l" else body[0]))
        elif tag == "s":
            out.update(dec(x, memo, depth) for x in _list(body))
        else:
            for pair in _list(body):
                k, val = _list(pair, 2)
                out[dec(k, memo, depth)] = dec(val, memo, depth)
        return out

    def decode_exception(self, v, memo, depth=0) -> BaseException:
        if "o" in v and "r" in v["o"]:  # one of ours coming home
            exc = self.decode(v["o"], memo, depth)
            if isinstance(exc, BaseException):
                return exc
            raise IsolationBroken("exception reference to a non-exception")
        cls = self.decode(v["e"], memo, depth)
        args = self.decode(v.get("a", {"t": []}), memo, depth)
        text, rep = _text(_str(v.get("s", "")), MAX_TEXT), _text(_str(v.get("rp", "")), MAX_TEXT)
        if isinstance(cls, Proxy):  # a remote exception class with no mirror: keep its name
            cls = self.mirror_class(None, {"n": "RemoteException", "b": []})
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise IsolationBroken("exception of a non-exception class")
        exc = _instantiate(cls, args if type(args) is tuple else (args,))
        if "o" in v:
            exc.__dict__["__touchstone_remote__"] = self.decode(v["o"], memo, depth)
        if getattr(cls, "__touchstone_remote__", None) is not None:
            exc.__dict__["__touchstone_str__"] = text
            exc.__dict__["__touchstone_repr__"] = rep
        if isinstance(v.get("w"), dict):
            exc.__dict__[ORIGIN] = _checked_origin(v["w"])
        if v.get("tb"):
            exc.add_note("remote traceback (candidate process):\n" + _text(_str(v["tb"]), MAX_TEXT))
        return exc

    def proxy_for(self, hid: int, descr: dict):
        if descr.get("k") == "ec":
            return self.mirror_class(hid, descr)
        proxy = self.proxies.get(hid)
        if proxy is None:
            if descr.get("k") == "m":
                proxy = self.module_proxy(_str(descr.get("n", "")), hid)
            elif descr.get("k") == "c":
                proxy = ContainerProxy._make(self, hid)
                object.__setattr__(proxy, "_ts_type", _CONTAINER_TYPES[_str(descr.get("t"))])
            if proxy is None:
                proxy = (CallableProxy if descr.get("f") == 1 else Proxy)._make(self, hid)
            self.proxies[hid] = proxy
            self.received[hid] = 0
        self.received[hid] = self.received.get(hid, 0) + 1
        return proxy

    def module_proxy(self, name: str, hid: int):
        """Hook: the judge returns its import-time module proxy for `name`."""
        return None

    def mirror_class(self, hid, descr: dict) -> type:
        """A local exception class standing for a remote one, so that
        `except`/`pytest.raises` with the remote class work on this side."""
        if hid is not None and hid in self.mirrors:
            return self.mirrors[hid]  # the mirror holds its remote class for good: never released
        bases = []
        for b in _list(descr.get("b", [])):
            base = self.decode(b, [])
            if isinstance(base, type) and issubclass(base, BaseException) and base not in bases:
                bases.append(base)
        name = _identifier(_str(descr.get("n", "RemoteException")))
        remote = None
        if hid is not None:
            remote = CallableProxy._make(self, hid)  # a class
            self.received[hid] = 1
        cls = _make_mirror(name, tuple(bases) or (Exception,), remote)
        if hid is not None:
            self.mirrors[hid] = cls
        return cls

    # ------------------------------------------------------------ requests

    def request(self, op: str, *args):
        """Ask the other side to run `op` on `args` and wait for the answer,
        serving its requests meanwhile. Threads may ask at once: one reads the
        socket at a time and hands each answer to the thread that asked."""
        if self.broken:
            raise IsolationBroken(self.broken)
        memo = _EncodeMemo()
        qid = next(self._queries)
        message = {"q": qid, "op": op, "a": self.encode(list(args), memo)}
        with self.mail:
            releases, self.releases = self.releases, []
            self.waiting.add(qid)
        if releases:
            message["rel"] = releases
        depth = self.local.__dict__.setdefault("depth", 0)
        self.local.depth = depth + 1
        try:
            self.channel.send(message)
            try:
                reply = self._await(qid)
            except IsolationBroken:
                raise
            except BaseException:  # interrupted while waiting (a signal handler raised)
                with self.mail:
                    self.abandoned.add(qid)
                raise
            if "wb" in reply:
                self._apply_writeback(reply["wb"], memo.objects)
            if depth == 0 and self.sticky is not None:
                sticky, self.sticky = self.sticky, None
                raise sticky
            if "x" in reply:
                raise self.decode_exception(_dict(reply["x"]), [])
            # a container of the request comes back as the caller's own object (by its memo index)
            decoded = list(memo.objects)
            value = self.decode(reply.get("v"), decoded)
            again = {
                id(decoded[i]) for i in _list(reply.get("again", [])) if len(memo.objects) <= _int(i) < len(decoded)
            }
            self.local.identity = (memo.objects, again)
            return value
        except IsolationBroken as exc:
            self.broken = self.broken or str(exc)
            raise
        finally:
            self.local.depth = depth
            with self.mail:
                self.waiting.discard(qid)

    def _await(self, qid: int) -> dict:
        while True:
            message = self._next(qid)
            if "q" in message:
                self.serve(message)
            else:
                return message

    def _next(self, qid: int | None) -> dict:
        """The next request, or the answer to `qid`: from the mailbox if another
        thread read it, else from the socket (one reader at a time)."""
        while True:
            with self.mail:
                if qid in self.mailbox:
                    return self.mailbox.pop(qid)
                if self.reading:
                    self.mail.wait(0.5)
                    continue
                self.reading = True
            try:
                message = self.channel.recv()
            finally:
                with self.mail:
                    self.reading = False
                    self.mail.notify_all()
            if "q" in message or message.get("r") == qid:
                return message
            with self.mail:
                r = message.get("r")
                if r in self.abandoned:  # the late answer to an interrupted request
                    self.abandoned.discard(r)
                elif r in self.waiting:
                    self.mailbox[r] = message
                    self.mail.notify_all()
                else:
                    raise IsolationBroken(f"an answer to {r!r}, which nobody asked")

    def serve_forever(self) -> None:
        """Serve requests until the other side closes the connection."""
        try:
            while True:
                self.serve(self._next(None))
        except IsolationBroken:
            return

    def serve(self, message: dict) -> None:
        qid = message.get("q")
        for pair in _list(message.get("rel", [])):
            self._release(*_list(pair, 2))
        memo: list = []
        reply: dict = {"r": qid}
        self.calls += 1
        try:
            op = _str(message.get("op"))
            args = self.decode(message.get("a"), memo)
            known = _EncodeMemo(memo)  # what the request carried crosses back by reference, not as a copy
            reply["v"] = self.encode(self._dispatch(op, _list(args)), known)
            again = self._note_returned(known.objects[len(memo) :], len(memo))
            if again:
                reply["again"] = again
        except IsolationBroken:
            raise
        except BaseException as exc:  # the caller gets it as its exception
            self._note_sticky(exc)
            reply.pop("v", None)
            reply["x"] = self.encode_exception(exc, _EncodeMemo())
        if message.get("op") in ("call", "callattr"):
            writeback = self._writeback(memo)
            if writeback:
                reply["wb"] = writeback
        try:
            self.channel.send(reply)
        except Unencodable as exc:
            self.channel.send({"r": qid, "x": self.encode_exception(exc, _EncodeMemo())})

    def _note_returned(self, sent: list, offset: int) -> list[int]:
        """Memo indexes of the mutable containers in a reply that this side
        returned before (the same object again); every one is remembered."""
        again = []
        for i, obj in enumerate(sent):
            if type(obj) in _MUTABLE:
                if self.returned.get(id(obj)) is obj:
                    again.append(offset + i)
                elif len(self.returned) < MAX_RETURNED:
                    self.returned[id(obj)] = obj
        return again

    def last_identity(self) -> tuple[list, set[int]]:
        """Of this thread's last answered request: the containers it carried
        (by memo index) and the ids of the reply's containers the owner had
        returned before."""
        return getattr(self.local, "identity", ([], set()))

    def _note_sticky(self, exc: BaseException) -> None:
        """Hook: the judge keeps assertion failures its callbacks raised."""

    def _dispatch(self, op: str, args: list):
        if op == "import":
            if self.importer is None:
                raise PermissionError("imports are served only by the candidate side")
            return self.importer(_str(args[0]), args[1])
        if op not in OPS or (op == "op" and (not args or args[0] not in _OPERATORS)):
            raise PermissionError(f"unknown operation {op!r}")
        self.policy.allow(op, args)
        return OPS[op](*args)

    def _release(self, hid, count) -> None:
        left = self.sent.get(hid, 0) - _int(count)
        if left > 0:
            self.sent[hid] = left
            return
        obj = self.exported.pop(hid, None)
        self.sent.pop(hid, None)
        if obj is not None and self.export_ids.get(id(obj)) == hid:
            del self.export_ids[id(obj)]

    def _writeback(self, memo: list) -> list:
        """The final contents of every mutable container the request carried,
        nested known containers by index, so the caller can update its originals."""
        known = _EncodeMemo(memo)
        out = []
        for i, obj in enumerate(memo):
            if i and type(obj) in _MUTABLE:  # 0 is the request's own argument list
                try:
                    out.append([i, self._encode_items(obj, type(obj), known, 1)])
                except Unencodable:
                    continue
        return out

    def _apply_writeback(self, entries, originals: list) -> None:
        for entry in _list(entries):
            i, body = _list(entry, 2)
            orig = originals[_int(i)]
            new = self.decode(body, list(originals))
            if type(new) is not type(orig):
                raise IsolationBroken("write-back changed a container's type")
            if isinstance(orig, (list, bytearray)):
                orig[:] = new
            elif isinstance(orig, collections.deque):
                orig.clear()
                orig.extend(new)
            else:
                orig.clear()
                orig.update(new)

    def release(self, hid: int) -> None:
        """A proxy died: tell the owner (with the next request) how many times we
        got it, unless a newer proxy for the same handle is alive."""
        if self.proxies.get(hid) is not None:
            return
        count = self.received.pop(hid, 0)
        if count:
            self.releases.append([hid, count])


# --------------------------------------------------------------- operations


def _call(f, args, kwargs):
    return f(*args, **kwargs)


def _callattr(obj, name, args, kwargs):
    return getattr(obj, name)(*args, **kwargs)


def _getattr(obj, name):
    if name == "__signature__" and callable(obj) and not hasattr(obj, "__signature__"):
        return SignatureInfo(inspect.signature(obj))  # what inspect.signature() on the proxy needs
    value = getattr(obj, name)
    # a function's `__annotations__` or `__kwdefaults__` is metadata `functools.wraps` copies onto a wrapper
    # (which takes only a real dict): a copy; an object's own state (`mod.REGISTRY`) stays live
    if type(value) in _CONTAINER_TAGS and not (name.startswith("__") and name.endswith("__")):
        return ByRef(value)
    if type(value) is types.CodeType:
        return CodeInfo(value)
    bound = getattr(value, "__self__", None)
    if bound is obj and callable(value) and not isinstance(obj, (type, types.ModuleType)):
        return BoundMethod(obj, name)  # one round trip per method call instead of two
    return value


_BINARY = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor",
           "matmul"]  # fmt: skip
_OPERATORS = {name: getattr(operator, name) for name in _BINARY}
_OPERATORS.update({"i" + n.rstrip("_"): getattr(operator, "i" + n.rstrip("_")) for n in _BINARY})
_OPERATORS.update({
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert,
    "contains": operator.contains, "getitem": operator.getitem, "setitem": operator.setitem,
    "delitem": operator.delitem, "bool": bool, "len": len, "hash": hash, "iter": iter, "next": next,
    "repr": repr, "str": str, "format": format, "int": int, "float": float, "complex": complex,
    "index": operator.index, "round": round, "reversed": reversed, "dir": lambda o: sorted(dir(o)),
    "isinstance": isinstance, "issubclass": issubclass, "copy": copy.copy, "deepcopy": copy.deepcopy,
    "trunc": lambda o: o.__trunc__(), "floor": lambda o: o.__floor__(), "ceil": lambda o: o.__ceil__(),
})  # fmt: skip

# Builtin value types whose instances (and subclasses': namedtuples, IntEnums, a defaultdict with a
# lambda factory) have a plain view: a copy of exact base type made with the base type's own methods.
_VALUE_BASES = (
    (int, int.__index__), (float, float.__float__), (complex, lambda x: complex(x.real, x.imag)),
    (str, str.__str__), (bytes, lambda x: bytes(memoryview(x))), (bytearray, lambda x: bytearray(memoryview(x))),
    (tuple, lambda x: tuple(tuple.__iter__(x))), (list, lambda x: list(list.__iter__(x))),
    (frozenset, lambda x: frozenset(frozenset.__iter__(x))), (set, lambda x: set(set.__iter__(x))),
    (collections.deque, lambda x: collections.deque(collections.deque.__iter__(x), x.maxlen)),
    (collections.OrderedDict, lambda x: collections.OrderedDict(collections.OrderedDict.items(x))),
    (collections.Counter, lambda x: collections.Counter(dict(dict.items(x)))),
    (dict, lambda x: dict(dict.items(x))),
)  # fmt: skip
VALUE_TYPES = frozenset(t for t, _ in _VALUE_BASES) | {bool}


def plain_view(obj) -> list:
    """What the judge may compare of one of this side's objects, computed
    without knowing what it will be compared with: `["value", qualname, copy]`
    (a builtin value type or a subclass of one, copied as its base type; items
    that are not plain stay handles), `["record", qualname, [[field, value],
    ...]]` (a dataclass instance), else `["opaque", qualname]`. Answered by the
    candidate's process, so it is only ever the candidate's own value."""
    qualname = _text(getattr(type(obj), "__qualname__", "?"), 200)
    for base, copy_of in _VALUE_BASES:
        if isinstance(obj, base):
            return ["value", qualname, copy_of(obj)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return ["record", qualname, [[f.name, getattr(obj, f.name)] for f in dataclasses.fields(obj)]]
    return ["opaque", qualname]


_OPERATORS["view"] = plain_view
# Public methods and attributes of the value types: on a proxy with a plain view they run in the judge,
# on the view (`got.startswith(want)` never hands `want` to the candidate), except those that change
# a mutable container in place (they change the owner's object, as in process).
_VALUE_METHODS = frozenset(n for t, _ in _VALUE_BASES for n in dir(t) if not n.startswith("_"))
_MUTATORS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "setdefault", "popitem",
    "add", "discard", "difference_update", "intersection_update", "symmetric_difference_update", "appendleft",
    "extendleft", "popleft", "rotate", "move_to_end", "subtract",
})  # fmt: skip
OPS = {
    "getattr": _getattr,
    "setattr": setattr,
    "delattr": delattr,
    "call": _call,
    "callattr": _callattr,
    "op": lambda name, *args: _OPERATORS[name](*args),
}
# Results of these operations must have these exact types (as Python itself demands).
RESULT_TYPES = {"bool": bool, "len": int, "hash": int, "repr": str, "str": str, "format": str, "int": int,
                "float": float, "complex": complex, "index": int, "contains": bool, "isinstance": bool,
                "issubclass": bool}  # fmt: skip


def remote_op(ep: Endpoint, name: str, *args):
    result = ep.request("op", name, *args)
    want = RESULT_TYPES.get(name)
    if want is not None and type(result) is not want:
        raise TypeError(f"remote {name}() returned {type(result).__name__}, not {want.__name__}")
    if name == "len" and result < 0:
        raise ValueError("remote len() returned a negative number")
    return result


# ------------------------------------------------------------------ proxies


def _remote_of(x, ep: Endpoint):
    """The other side's handle behind a local stand-in (a proxy, or a mirror
    class, exception or module holding one), else None."""
    if isinstance(x, Proxy):
        if object.__getattribute__(x, "_ts_ep") is not ep:
            raise Unencodable("a proxy of another connection")
        return object.__getattribute__(x, "_ts_hid")
    if isinstance(x, (type, BaseException, types.ModuleType)):
        namespace = getattr(x, "__dict__", None)
        remote = namespace.get("__touchstone_remote__") if namespace is not None else None
        if isinstance(remote, Proxy):
            return _remote_of(remote, ep)
    return None


class Proxy:
    """A local stand-in for an object of the other process. Every operation is
    a request; comparisons with anything but another proxy are refused."""

    __slots__ = ("_ts_ep", "_ts_hid", "__weakref__")

    @classmethod
    def _make(cls, ep: Endpoint, hid: int) -> "Proxy":
        self = object.__new__(cls)
        object.__setattr__(self, "_ts_ep", ep)
        object.__setattr__(self, "_ts_hid", hid)
        return self

    def __del__(self):
        try:
            object.__getattribute__(self, "_ts_ep").release(object.__getattribute__(self, "_ts_hid"))
        except Exception:  # interpreter shutdown
            pass

    def _ts(self) -> Endpoint:
        return object.__getattribute__(self, "_ts_ep")

    def __getattr__(self, name):
        if name in _VALUE_METHODS:  # a builtin value type's own method runs here, on the plain view
            mine = _judged(self)
            if type(mine) in VALUE_TYPES and name not in _MUTATORS and hasattr(mine, name):
                return getattr(mine, name)
        return Proxy._ts(self).request("getattr", self, name)

    def __setattr__(self, name, value):
        Proxy._ts(self).request("setattr", self, name, value)

    def __delattr__(self, name):
        Proxy._ts(self).request("delattr", self, name)

    def __repr__(self):
        try:
            return remote_op(Proxy._ts(self), "repr", self)
        except IsolationBroken as exc:
            return f"<remote object, connection broken: {exc}>"

    def __str__(self):
        return remote_op(Proxy._ts(self), "str", self)

    def __format__(self, spec):
        return remote_op(Proxy._ts(self), "format", self, spec)

    def __bool__(self):
        mine = _judged(self)
        return remote_op(Proxy._ts(self), "bool", self) if mine is None else bool(mine)

    def __len__(self):
        return remote_op(Proxy._ts(self), "len", self)

    def __hash__(self):
        mine = _judged(self)
        return remote_op(Proxy._ts(self), "hash", self) if mine is None else hash(mine)

    def __iter__(self):
        return remote_op(Proxy._ts(self), "iter", self)

    def __next__(self):
        return remote_op(Proxy._ts(self), "next", self)

    def __reversed__(self):
        return remote_op(Proxy._ts(self), "reversed", self)

    def __contains__(self, item):
        mine = _judged(self)
        return remote_op(Proxy._ts(self), "contains", self, item) if mine is None else item in mine

    def __getitem__(self, key):
        return remote_op(Proxy._ts(self), "getitem", self, key)

    def __setitem__(self, key, value):
        remote_op(Proxy._ts(self), "setitem", self, key, value)

    def __delitem__(self, key):
        remote_op(Proxy._ts(self), "delitem", self, key)

    def __enter__(self):
        return Proxy._ts(self).request("callattr", self, "__enter__", (), {})

    def __exit__(self, exc_type, exc, tb):
        ep = Proxy._ts(self)
        if exc_type is not None:
            try:
                ep.encode(exc_type, _EncodeMemo())
            except Unencodable:  # a class we may not hand out: its nearest builtin base
                exc_type = next(b for b in exc_type.__mro__ if builtin_class_name(b))
        suppress = ep.request("callattr", self, "__exit__", (exc_type, exc, None), {})
        if exc is not None and not ep.policy.may_suppress(exc):
            return False  # the candidate may not swallow the test's own failure
        return suppress

    def __instancecheck__(self, obj):
        try:
            return remote_op(Proxy._ts(self), "isinstance", obj, self)
        except Unencodable:
            return False

    def __subclasscheck__(self, cls):
        try:
            return remote_op(Proxy._ts(self), "issubclass", cls, self)
        except Unencodable:
            return False

    def __dir__(self):
        return remote_op(Proxy._ts(self), "dir", self)

    def __copy__(self):
        return remote_op(Proxy._ts(self), "copy", self)

    def __deepcopy__(self, memo):
        return remote_op(Proxy._ts(self), "deepcopy", self)

    def __reduce_ex__(self, protocol):
        raise TypeError("an object of the candidate's process cannot be pickled")


class Record:
    """A dataclass instance of the candidate's process as the judge compares
    it: its class's name and its fields' values. Equal only to a record of
    the same class and fields; no truth value, order or arithmetic here."""

    __slots__ = ("qualname", "fields")

    def __init__(self, qualname: str, fields: tuple):
        self.qualname, self.fields = qualname, fields

    def __eq__(self, other):
        if type(other) is not Record:
            return NotImplemented
        return self.qualname == other.qualname and self.fields == other.fields

    def __hash__(self):
        return hash((self.qualname, self.fields))

    def __bool__(self):
        raise TypeError(f"{self!r}: a truth test needs a plain value")

    def __contains__(self, item):
        raise TypeError(f"{self!r}: `in` needs a plain value")

    def __repr__(self):
        return f"<candidate {self.qualname}: " + ", ".join(f"{k}={v!r}" for k, v in self.fields) + ">"


class Opaque:
    """A candidate object with no plain value: equal only to itself (the same
    handle); it never decides a truth test, an order, `in` or arithmetic in
    the judge."""

    __slots__ = ("qualname", "hid")

    def __init__(self, qualname: str, hid: int):
        self.qualname, self.hid = qualname, hid

    def __eq__(self, other):
        return self.hid == other.hid if type(other) is Opaque else NotImplemented

    def __hash__(self):
        return hash(("opaque", self.hid))

    def __bool__(self):
        raise TypeError(f"{self!r}: a truth test needs a plain value")

    def __contains__(self, item):
        raise TypeError(f"{self!r}: `in` needs a plain value")

    def __repr__(self):
        return f"<candidate {self.qualname} (no plain value; the task declares no protocol of its own for it)>"


def _judged(proxy):
    """What the judge decides an operation on `proxy` with: its plain view (a
    builtin value, a `Record` or an `Opaque`), fetched from the owner without
    anything the test will compare it with; None where the owner decides (the
    candidate's side of the wire, or a class whose own protocol the task
    declared: `Policy.owns_protocol`)."""
    ep = Proxy._ts(proxy)
    if not ep.policy.compares_locally():
        return None
    if isinstance(proxy, ContainerProxy):
        return ContainerProxy._ts_snapshot(proxy)
    view = _list(ep.request("op", "view", proxy))
    kind, qualname = _str(view[0]), _str(view[1])
    if ep.policy.owns_protocol(qualname):
        return None
    if kind == "value" and len(view) == 3 and type(view[2]) in VALUE_TYPES:
        return view[2]
    if kind == "record" and len(view) == 3:
        return Record(qualname, tuple((_str(k), v) for k, v in (_list(p, 2) for p in _list(view[2]))))
    if kind == "opaque":
        return Opaque(qualname, object.__getattribute__(proxy, "_ts_hid"))
    raise TypeError(f"a malformed plain view of a candidate object: {view[:2]!r}")


def _plain_or_refuse(value, what: str):
    if type(value) in (Record, Opaque):
        raise TypeError(f"{value!r}: {what} needs a plain value")
    return value


def _local_unary(name, value, *args):
    value = _plain_or_refuse(value, f"{name}()")
    if name in ("trunc", "floor", "ceil"):
        return getattr(math, name)(value)
    return _OPERATORS[name](value, *args)


def _unary(name):
    def method(self):
        mine = _judged(self)
        return remote_op(Proxy._ts(self), name, self) if mine is None else _local_unary(name, mine)

    return method


def _binary(name, reflected=False):
    def method(self, other):
        ep = Proxy._ts(self)
        mine = _judged(self)
        if mine is not None:
            theirs = _judged(other) if isinstance(other, Proxy) and Proxy._ts(other) is ep else other
            if theirs is None:
                return NotImplemented  # the other operand's declared protocol decides
            mine = _plain_or_refuse(mine, "arithmetic")
            if name.startswith("i") and type(mine) in _MUTABLE:
                pass  # an in-place change of a mutable container: the owner's container changes
            else:
                op = _OPERATORS[name[1:] + ("_" if name[1:] in ("and", "or") else "")] if name.startswith("i") \
                    else _OPERATORS[name]  # fmt: skip
                return op(theirs, mine) if reflected else op(mine, theirs)
        try:
            return remote_op(ep, name, *((other, self) if reflected else (self, other)))
        except Unencodable:
            return NotImplemented

    return method


def _compare(name):
    op = getattr(operator, name)

    def method(self, other):
        ep = Proxy._ts(self)
        mine = _judged(self)
        if mine is not None:
            theirs = _judged(other) if isinstance(other, Proxy) and Proxy._ts(other) is ep else other
            # the other operand's declared protocol decides (NotImplemented hands it over)
            return NotImplemented if theirs is None else op(mine, theirs)
        try:
            return ep.request("op", name, self, other)
        except Unencodable:
            return NotImplemented

    return method


for _name in ("neg", "pos", "abs", "invert", "int", "float", "complex", "index", "trunc", "floor", "ceil"):
    setattr(Proxy, f"__{_name}__", _unary(_name))
for _name in _BINARY:
    _dunder = _name.rstrip("_")
    setattr(Proxy, f"__{_dunder}__", _binary(_name))
    setattr(Proxy, f"__r{_dunder}__", _binary(_name, reflected=True))
    setattr(Proxy, f"__i{_dunder}__", _binary("i" + _dunder))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Proxy, f"__{_name}__", _compare(_name))


def _round(self, ndigits=None):
    mine = _judged(self)
    args = () if ndigits is None else (ndigits,)
    return remote_op(Proxy._ts(self), "round", self, *args) if mine is None else _local_unary("round", mine, *args)


Proxy.__round__ = _round


class CallableProxy(Proxy):
    """A stand-in for a callable object of the other process (a function, a
    class, an instance with `__call__`); a plain `Proxy` is not callable, as
    its object is not (`vars(module)` holds loaders and specs beside functions)."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return Proxy._ts(self).request("call", self, args, kwargs)


class ContainerProxy(Proxy):
    """A live view of an exact builtin container of the other process
    (see `ByRef`). Reads and mutations go to the real container; equality,
    ordering, repr and iteration use a type-checked copy compared HERE with
    builtin semantics, so the owner's code never decides a comparison."""

    __slots__ = ("_ts_type",)
    __hash__ = None  # mutable containers are unhashable

    def _ts_snapshot(self):
        snap = remote_op(Proxy._ts(self), "copy", self)
        want = object.__getattribute__(self, "_ts_type")
        if type(snap) is not want:
            raise TypeError(f"a remote {want.__name__} came back as {type(snap).__name__}")
        return snap

    def __repr__(self):
        try:
            return repr(ContainerProxy._ts_snapshot(self))
        except IsolationBroken as exc:
            return f"<remote container, connection broken: {exc}>"

    def __iter__(self):
        return iter(ContainerProxy._ts_snapshot(self))

    def __contains__(self, item):
        return item in ContainerProxy._ts_snapshot(self)


def _snapshot_compare(name):
    op = getattr(operator, name)

    def method(self, other):
        if isinstance(other, ContainerProxy):
            other = ContainerProxy._ts_snapshot(other)
        elif isinstance(other, Proxy):
            return NotImplemented
        return op(ContainerProxy._ts_snapshot(self), other)

    return method


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(ContainerProxy, f"__{_name}__", _snapshot_compare(_name))


def _remote_doc(self):
    return Proxy._ts(self).request("getattr", self, "__doc__")


# A class's docstring is found on the class before `__getattr__` is asked: without this a
# stand-in's `__doc__` would be this module's description of stand-ins, not its object's.
for _cls in (Proxy, CallableProxy, ContainerProxy):
    _cls.__doc__ = property(_remote_doc)


class BoundMethod:
    """`proxy.name` where the remote attribute is a method of that object:
    calling it is one `callattr` request."""

    __slots__ = ("obj", "name")

    def __init__(self, obj, name: str):
        self.obj, self.name = obj, name

    def __call__(self, *args, **kwargs):
        if not isinstance(self.obj, Proxy):
            return getattr(self.obj, self.name)(*args, **kwargs)
        return Proxy._ts(self.obj).request("callattr", self.obj, self.name, args, kwargs)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(getattr(self.obj, self.name), attr)

    def __repr__(self):
        return f"<bound method {self.name} of {self.obj!r}>"


def _make_mirror(name: str, bases: tuple, remote):
    def __new__(cls, *args, **kwargs):
        if remote is not None and cls.__dict__.get("__touchstone_remote__") is remote:
            return remote(*args, **kwargs)  # built by the owner; comes back as an instance of cls
        return _instantiate(cls, args)

    def __init__(self, *args, **kwargs):
        pass

    def __str__(self):
        return self.__dict__.get("__touchstone_str__", _base_str(self))

    def __repr__(self):
        return self.__dict__.get("__touchstone_repr__") or f"{name}({str(self)!r})"

    def __getattr__(self, attr):
        target = self.__dict__.get("__touchstone_remote__")
        if target is None or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(target, attr)

    ns = {"__new__": __new__, "__init__": __init__, "__str__": __str__, "__repr__": __repr__,
          "__getattr__": __getattr__, "__touchstone_remote__": remote, "__module__": "<candidate>"}  # fmt: skip
    return type(name, bases, ns)


def _base_str(exc):
    base = next(b for b in type(exc).__mro__ if builtin_class_name(b))
    return base.__str__(exc)


def _instantiate(cls, args: tuple) -> BaseException:
    """An instance of `cls` holding `args`, without running the class's own
    constructor (a mirror's constructor calls the remote side)."""
    base = next(b for b in cls.__mro__ if builtin_class_name(b))
    if base is cls:
        try:
            return cls(*args)
        except Exception:
            exc = cls.__new__(cls)
            exc.args = args
            return exc
    exc = base.__new__(cls, *args)
    exc.args = args
    return exc


# ----------------------------------------------------------------- checkers


def _str(x) -> str:
    if type(x) is not str:
        raise IsolationBroken("expected a string")
    return x


def _int(x) -> int:
    if type(x) is not int:
        raise IsolationBroken("expected an integer")
    return x


def _list(x, n: int | None = None) -> list:
    if type(x) is not list or (n is not None and len(x) != n):
        raise IsolationBroken("expected a list" + (f" of {n}" if n else ""))
    return x


def _dict(x) -> dict:
    if type(x) is not dict:
        raise IsolationBroken("expected an object")
    return x


def _text(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit - 15] + "...[truncated]"


def origin_of(exc: BaseException, root: str | None) -> dict | None:
    """Where `exc` comes from: the origin it brought across (it crossed before),
    else its class's full name and the innermost traceback frame under `root`."""
    try:
        known = exc.__dict__.get(ORIGIN)
        if isinstance(known, dict):
            return known
        cls = type(exc)
        module = cls.__module__ if type(cls.__module__) is str else "?"
        name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
        at, tb = None, exc.__traceback__
        while tb is not None and root:
            path = tb.tb_frame.f_code.co_filename
            if path.startswith(root.rstrip("/") + "/"):
                at = [
                    _text(path[len(root.rstrip("/")) + 1 :], 300),
                    tb.tb_lineno,
                    _text(tb.tb_frame.f_code.co_name, 200),
                ]
            tb = tb.tb_next
        return {"type": _text(name, 300), "at": at}
    except Exception:  # the candidate's class or frames misbehave: no origin, never a broken reply
        return None


def _checked_origin(w: dict) -> dict:
    at = w.get("at")
    if at is not None:
        path, line, function = _list(at, 3)
        at = [_text(_str(path), 300), _int(line), _text(_str(function), 200)]
    return {"type": _text(_str(w.get("type", "")), 300), "at": at}


def _identifier(s: str) -> str:
    s = _text(s, 200)
    return s if s.isidentifier() else "RemoteException"


def _safe(fn, x) -> str:
    try:
        out = fn(x)
        return _text(out, MAX_TEXT) if type(out) is str else "<not a string>"
    except Exception:
        return "<unprintable>"
