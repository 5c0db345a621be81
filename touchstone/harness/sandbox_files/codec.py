"""The oracle's value codec, shared by the call recorder (reference side) and
the replay runner (both sides). Standard library only: it runs inside sandbox
interpreters and is loaded by file path under a random module name.

Two encodings, both JSON:

- `encode`/`decode`: call ARGUMENTS, reconstructible in another process.
  Tagged values for every builtin and `collections`/`fractions`/`decimal`/
  `datetime` type; `{"__t": "handle"}` for a workspace object produced by an
  earlier recorded call; `{"__t": "ref"}` for a class or function reachable by
  module and qualified name. Anything else (a test-defined lambda, an open
  file) raises `Unreplayable`: that call cannot be replayed.
- `canon`: RESULTS, compared by the verifier outside every candidate process.
  Exact types (an `int` subclass is not an `int`, `True` is not `1`), builtin
  containers and their subclasses by class AND contents, `collections` types,
  dataclasses, Fraction/Decimal/datetime by class and state, iterators and
  generators materialized up to `MAX_ITEMS`, workspace-class instances by class
  name and PUBLIC state (attributes not starting with `_`: honest solutions
  name private internals differently), other objects by class, `__dict__` and
  `__slots__`. The candidate's `__eq__`, `__hash__` and `__repr__` are never
  called on a value being encoded.

Every builtin the encoders use is bound when this module loads, which the
runner does before importing candidate code.
"""

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import json
import math
import sys
import types

_type, _repr, _sorted, _isinstance, _getattr, _hasattr = type, repr, sorted, isinstance, getattr, hasattr
_vars, _list, _len, _str, _id, _next, _iter = vars, list, len, str, id, next, iter
_dumps, _isnan, _issubclass, _fields = json.dumps, math.isnan, issubclass, dataclasses.fields
_is_dc, _modules = dataclasses.is_dataclass, sys.modules
_Counter, _OrderedDict, _defaultdict, _deque = (
    collections.Counter, collections.OrderedDict, collections.defaultdict, collections.deque)  # fmt: skip
_Fraction, _Decimal, _Enum = fractions.Fraction, decimal.Decimal, enum.Enum
_DATES = (datetime.datetime, datetime.date, datetime.time, datetime.timedelta)
_GENERATOR = types.GeneratorType
_FUNCS = (types.FunctionType, types.BuiltinFunctionType, type)

MAX_DEPTH = 40
MAX_ITEMS = 1000  # iterator items materialized, and container items encoded
MAX_NODES = 20000  # values encoded per call, all containers together


class Unreplayable(Exception):
    """An argument that cannot be rebuilt in another process."""


# ------------------------------------------------------------------ arguments

_PRIM = (bool, int, str, type(None))
_SIMPLE = {tuple: "tuple", set: "set", frozenset: "frozenset"}


def encode(v, handle=None, ref=None, depth=0):
    """Argument -> tagged JSON. `handle(obj)` returns a handle dict for a
    workspace object produced by an earlier call (or None); `ref(obj)` a ref
    dict for a class/function reachable by name (or None)."""
    if depth > MAX_DEPTH:
        raise Unreplayable("argument nested too deeply")
    t = _type(v)
    h = handle(v) if handle is not None and t not in _PRIM else None
    if h is not None:
        return h
    if t in _PRIM:
        return v
    sub = lambda x: encode(x, handle, ref, depth + 1)
    if t is float:
        return {"__t": "float", "v": _repr(v)}
    if t is complex:
        return {"__t": "complex", "v": [_repr(v.real), _repr(v.imag)]}
    if t is bytes or t is bytearray:
        return {"__t": t.__name__, "v": v.hex()}
    if t is list:
        return [sub(e) for e in v]
    if t in _SIMPLE:
        return {"__t": _SIMPLE[t], "v": [sub(e) for e in v]}
    if t is dict or t is _OrderedDict or t is _Counter:
        return {"__t": t.__name__, "v": [[sub(k), sub(x)] for k, x in v.items()]}
    if t is _defaultdict:
        factory = None if v.default_factory is None else sub(v.default_factory)
        return {"__t": "defaultdict", "f": factory, "v": [[sub(k), sub(x)] for k, x in v.items()]}
    if t is _deque:
        return {"__t": "deque", "m": v.maxlen, "v": [sub(e) for e in v]}
    if t is _Fraction or t is _Decimal:
        return {"__t": t.__name__, "v": _str(v)}
    if t is datetime.timedelta:
        return {"__t": "timedelta", "v": [v.days, v.seconds, v.microseconds]}
    if t in _DATES and _type(_getattr(v, "tzinfo", None)) in (type(None), datetime.timezone):
        return {"__t": t.__name__, "v": v.isoformat()}
    if t is range or t is slice:
        return {"__t": t.__name__, "v": [sub(v.start), sub(v.stop), sub(v.step)]}
    r = ref(v) if ref is not None else None
    if r is not None:
        return r
    raise Unreplayable(f"argument of type {t.__module__}.{t.__qualname__}")


_SEQ_TAGS = {"tuple": tuple, "set": set, "frozenset": frozenset}


def decode(v, handle=None, ref=None):
    """Tagged JSON -> argument. `handle(d)` and `ref(d)` rebuild handles/refs."""
    if _isinstance(v, list):
        return [decode(e, handle, ref) for e in v]
    if not _isinstance(v, dict):
        return v
    sub = lambda x: decode(x, handle, ref)
    t, x = v.get("__t"), v.get("v")
    if t == "handle":
        return handle(v)
    if t in ("ref", "enum"):
        return ref(v)
    if t in _SEQ_TAGS:
        return _SEQ_TAGS[t](sub(e) for e in x)
    if t == "float":
        return float(x)
    if t == "complex":
        return complex(float(x[0]), float(x[1]))
    if t in ("bytes", "bytearray"):
        return (bytes if t == "bytes" else bytearray).fromhex(x)
    if t in ("dict", "OrderedDict", "Counter"):
        cls = {"dict": dict, "OrderedDict": _OrderedDict, "Counter": _Counter}[t]
        out = cls()
        for k, val in x:
            out[sub(k)] = sub(val)
        return out
    if t == "defaultdict":
        out = _defaultdict(None if v["f"] is None else sub(v["f"]))
        out.update((sub(k), sub(val)) for k, val in x)
        return out
    if t == "deque":
        return _deque((sub(e) for e in x), v["m"])
    if t in ("Fraction", "Decimal"):
        return (_Fraction if t == "Fraction" else _Decimal)(x)
    if t == "timedelta":
        return datetime.timedelta(days=x[0], seconds=x[1], microseconds=x[2])
    if t in ("datetime", "date", "time"):
        return _getattr(datetime, t).fromisoformat(x)
    if t in ("range", "slice"):
        return (range if t == "range" else slice)(*[sub(e) for e in x])
    raise ValueError(f"unknown argument tag {t!r}")


def has_handles(v) -> bool:
    """Whether an encoded argument refers to objects of the run (handles/refs)."""
    if _isinstance(v, list):
        return any(has_handles(e) for e in v)
    if _isinstance(v, dict):
        return v.get("__t") in ("handle", "ref", "enum") or any(has_handles(e) for e in v.values())
    return False


def handles_in(v, out=None) -> list:
    """Step indexes of every handle inside an encoded argument."""
    out = [] if out is None else out
    if _isinstance(v, list):
        for e in v:
            handles_in(e, out)
    elif _isinstance(v, dict):
        if v.get("__t") == "handle":
            out.append(v["step"])
        for e in v.values():
            handles_in(e, out)
    return out


# -------------------------------------------------------------------- results


def exception_name(t, workspace=lambda t: False):
    """A raised type by name: `builtins.ValueError`, or the bare qualified
    name of a workspace class (its module is the solution's choice)."""
    return t.__qualname__ if workspace(t) else f"{t.__module__}.{t.__qualname__}"


def raised(exc, workspace=lambda t: False):
    """["raised", type, [its base classes]]: a solution may raise a subclass
    of what the reference raises, as `pytest.raises` allows."""
    bases = [exception_name(k, workspace) for k in _type(exc).__mro__[1:] if k not in (BaseException, object)]
    return ["raised", exception_name(_type(exc), workspace), bases]


_PRIMS = {bool: "bool", int: "int", str: "str", type(None): "none"}


class _Canon:
    """One canonical encoding; `workspace(cls)` says whether a class is the
    task's (encoded by public state); `consume` False leaves iterators alone
    (the recorder must not drain a generator the test still reads)."""

    def __init__(self, workspace, consume):
        self.workspace, self.consume, self.nodes, self.path = workspace, consume, 0, set()

    def items(self, xs, depth):
        out = []
        for e in xs:
            if _len(out) >= MAX_ITEMS:
                out.append(["truncated"])
                break
            out.append(self.enc(e, depth + 1))
        return out

    def pairs(self, d, depth, ordered):
        out = [[self.enc(k, depth + 1), self.enc(v, depth + 1)] for k, v in _list(d.items())[:MAX_ITEMS]]
        return out if ordered else _sorted(out, key=_dumps)

    def enc(self, x, depth=0):
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            return ["deep"]
        t = _type(x)
        if t in _PRIMS:
            return [_PRIMS[t], x]
        if t is float:
            return ["float", "nan" if _isnan(x) else _repr(x)]
        if t is complex:
            return ["complex", _repr(x)]
        if t is bytes or t is bytearray:
            return [t.__name__, x.hex()]
        if _id(x) in self.path:
            return ["cycle"]
        self.path.add(_id(x))
        try:
            return self.compound(x, t, depth)
        finally:
            self.path.discard(_id(x))

    def compound(self, x, t, depth):
        if t is list or t is tuple:
            return [t.__name__, self.items(x, depth)]
        if t is set or t is frozenset:
            return [t.__name__, _sorted(self.items(x, depth), key=_dumps)]
        if t is dict:
            return ["dict", self.pairs(x, depth, False)]
        if _isinstance(x, type) or _isinstance(x, _FUNCS):
            qualname = _getattr(x, "__qualname__", "?")
            if "<" in qualname:  # a closure or lambda: its name is the solution's choice, its calls are replayed
                return ["callable"]
            return ["ref", _getattr(x, "__module__", "?"), qualname]
        name = self.name(t)
        if _isinstance(x, _Enum):
            return ["enum", name, x.name]
        if t is _Fraction or t is _Decimal or _isinstance(x, _DATES):
            return ["value", name, _str(x)]
        if t is range or t is slice:
            return ["value", name, _repr(x)]
        if _isinstance(x, _GENERATOR) or (self.iterator(x) and not self.workspace(t)):
            return self.materialize(x, depth)
        base = self.builtin_base(x, t, depth)
        state = self.state(x, t, depth)
        if base is not None:  # a subclass of a builtin: class, contents and own state
            return ["sub", name, base, state]
        if _is_dc(x):
            return ["dataclass", name, [[f.name, self.enc(_getattr(x, f.name, None), depth + 1)] for f in _fields(x)]]
        return ["object", name, state]

    def name(self, t):
        if self.workspace(t):
            return _getattr(t, "__qualname__", "?")  # which module holds it is the solution's choice
        return f"{_getattr(t, '__module__', '?')}.{_getattr(t, '__qualname__', '?')}"

    @staticmethod
    def iterator(x):
        t = _type(x)
        return _hasattr(t, "__next__") and _hasattr(t, "__iter__")

    def materialize(self, x, depth):
        if not self.consume:
            return ["iterator", "not consumed"]
        items = []
        try:
            while _len(items) < MAX_ITEMS:
                items.append(self.enc(_next(x), depth + 1))
            items.append(["truncated"])
        except StopIteration:
            pass
        except Exception as exc:  # an iterator that fails mid-way: the failure is part of the value
            items.append(raised(exc, self.workspace)[:2])
        return ["iterator", items]

    def builtin_base(self, x, t, depth):
        if _isinstance(x, _deque):
            return ["deque", x.maxlen, self.items(x, depth)]
        if _isinstance(x, _defaultdict):
            return ["defaultdict", self.enc(x.default_factory, depth + 1), self.pairs(x, depth, False)]
        if _isinstance(x, dict):
            return ["dict", self.pairs(x, depth, _isinstance(x, _OrderedDict))]
        if _isinstance(x, (list, tuple)):
            return ["list" if _isinstance(x, list) else "tuple", self.items(x, depth)]
        if _isinstance(x, (set, frozenset)):
            return ["set", _sorted(self.items(x, depth), key=_dumps)]
        for base in (bool, int, float, complex, str, bytes):
            if _isinstance(x, base):
                return self.enc(base(x), depth + 1)
        return None

    def state(self, x, t, depth):
        public = self.workspace(t)
        attrs = {}
        if _hasattr(x, "__dict__"):
            try:
                attrs.update(_vars(x))
            except TypeError:
                pass
        for klass in _getattr(t, "__mro__", ()):
            slots = klass.__dict__.get("__slots__", ())
            for slot in (slots,) if _isinstance(slots, str) else slots:
                if slot not in ("__dict__", "__weakref__") and _hasattr(x, slot):
                    attrs[slot] = _getattr(x, slot)
        keys = _sorted(k for k in attrs if _isinstance(k, str) and not (public and k.startswith("_")))
        return [[k, self.enc(attrs[k], depth + 1)] for k in keys]


def canon(x, workspace=lambda t: False, consume=True):
    """Canonical, type-strict encoding of a result (see the module docstring)."""
    return _Canon(workspace, consume).enc(x)


def any_iterable(c):
    """Canonical form with every ordered one-shot or sequence container
    (iterator, generator, list, tuple) reduced to its items: the task's
    "any iterable of the same items" equivalence."""
    if not _isinstance(c, list) or not c:
        return c
    if c[0] in ("list", "tuple", "iterator") and _len(c) == 2 and _isinstance(c[1], list):
        return ["iterable", [any_iterable(e) for e in c[1]]]
    return [any_iterable(e) for e in c]
