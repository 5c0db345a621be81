"""Replay runner: makes recorded call sequences in THIS process, on whatever
tree it runs in (the reference's or the candidate's; never with hidden tests),
and writes the canonical form of every outcome. The verifier compares the
outcomes itself, outside every candidate process: the candidate's `__eq__`,
`__repr__` and `__hash__` are never consulted, and no expected value exists
here.

usage: python3 -s replay_runner.py CODEC_PY CASES_JSON OUT_JSONL SEED  (cwd = workspace root)

Each case starts with the `random` module seeded from SEED and the case id, so
code drawing from it answers alike on the reference and the candidate under the
same SEED, in either order; the verifier's run under another SEED shows which
answers depend on the draw.

One output line per case: {"case": id, "steps": [{"i", "out", "t"}]}, where
`out` is ["ok", result, args after the call] or ["raised", type, bases] or
["missing", why] (a handle whose producing call failed here), and `t` the
seconds the call took. Standard library only.
"""

import importlib
import importlib.util
import json
import operator as op
import os
import random
import sys
import time


def _load_codec(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


codec = _load_codec(sys.argv[1])  # bound before any candidate import
_perf, _type, _getattr, _dumps, _write = time.perf_counter, type, getattr, json.dumps, os.write
ROOT = os.getcwd()


def _swap(f):
    return lambda a, b: f(b, a)


_BINARY = {"add": op.add, "sub": op.sub, "mul": op.mul, "truediv": op.truediv, "floordiv": op.floordiv,
           "mod": op.mod, "pow": op.pow, "matmul": op.matmul, "and": op.and_, "or": op.or_, "xor": op.xor,
           "lshift": op.lshift, "rshift": op.rshift, "divmod": divmod}  # fmt: skip
# An operator a test applied is replayed as the operator (not the dunder), so
# a solution may implement it any way Python allows (e.g. __radd__ only).
OPS = {
    **{f"__{n}__": f for n, f in _BINARY.items()},
    **{f"__r{n}__": _swap(f) for n, f in _BINARY.items()},
    **{f"__i{n}__": _getattr(op, f"i{n}", f) for n, f in _BINARY.items() if n != "divmod"},
    "__eq__": op.eq, "__ne__": op.ne, "__lt__": op.lt, "__le__": op.le, "__gt__": op.gt, "__ge__": op.ge,
    "__contains__": op.contains, "__getitem__": op.getitem, "__setitem__": op.setitem,
    "__delitem__": op.delitem, "__neg__": op.neg, "__pos__": op.pos, "__abs__": abs, "__invert__": op.invert,
    "__len__": len, "__iter__": iter, "__next__": next, "__reversed__": reversed, "__bool__": bool,
    "__str__": str, "__repr__": repr, "__int__": int, "__float__": float, "__index__": op.index,
    "__format__": format, "__round__": round, "__call__": lambda f, *a, **k: f(*a, **k),
}  # fmt: skip


def workspace_class(t):
    module = sys.modules.get(_getattr(t, "__module__", ""))
    path = _getattr(module, "__file__", None) or ""
    return path.startswith(ROOT + os.sep)


class Missing(Exception):
    """A handle whose producing call did not return an object here."""


def resolve(module, qualname):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = _getattr(obj, part)
    return obj


def _ref(d):
    obj = resolve(d["module"], d["qualname"])
    return _getattr(obj, d["name"]) if d["__t"] == "enum" else obj


def prepare(target, args, kwargs):
    """The call to make, as a function of nothing: names are resolved (and
    modules imported) before the clock starts."""
    kind, name = target["kind"], target.get("name")
    if kind in ("call", "construct"):
        func = resolve(target["module"], target["qualname"])
        return lambda: func(*args, **kwargs)
    if kind == "op" and name in OPS:
        return lambda: OPS[name](*args, **kwargs)
    if kind in ("method", "op"):
        method = _getattr(args[0], name)
        return lambda: method(*args[1:], **kwargs)
    if kind == "getattr":
        return lambda: _getattr(args[0], name)
    if kind == "setattr":
        return lambda: setattr(args[0], name, args[1])
    if kind == "delattr":
        return lambda: delattr(args[0], name)
    raise ValueError(f"unknown call kind {kind!r}")


def run_case(case):
    objects, outs = {}, []

    def handle(d):
        if d["step"] not in objects:
            raise Missing(f"call #{d['step']} produced no object")
        obj = objects[d["step"]]
        for how, key in d["path"]:
            obj = _getattr(obj, key) if how == "a" else obj[key]
        return obj

    for step in case["steps"]:
        try:
            args = codec.decode(step["args"], handle, _ref)
            kwargs = codec.decode(step["kwargs"], handle, _ref) if step["kwargs"] else {}
            call = prepare(step["target"], args, kwargs)
        except Missing as exc:
            outs.append({"i": step["i"], "out": ["missing", str(exc)], "t": 0.0})
            continue
        except Exception as exc:  # the candidate lacks a function, class or method the tests use
            outs.append({"i": step["i"], "out": codec.raised(exc, workspace_class), "t": 0.0})
            continue
        started = _perf()
        try:
            result = call()
        except BaseException as exc:  # the candidate's exception is an outcome, not a crash
            outs.append({"i": step["i"], "out": codec.raised(exc, workspace_class), "t": _perf() - started})
            continue
        took = _perf() - started
        objects[step["i"]] = result
        try:
            out = ["ok", codec.canon(result, workspace_class), codec.canon([args, kwargs], workspace_class)]
        except BaseException as exc:  # e.g. a generator failing while it is materialized
            out = ["raised while encoding", _type(exc).__name__]
        outs.append({"i": step["i"], "out": out, "t": took})
    return outs


def main():
    cases_path, out_path = sys.argv[2], sys.argv[3]
    with open(cases_path) as f:
        cases = json.load(f)
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.path.insert(0, ROOT)
    for case in cases:
        random.seed(f"{sys.argv[4]}:{case['id']}")
        line = _dumps({"case": case["id"], "steps": run_case(case)}) + "\n"
        _write(fd, line.encode())


if __name__ == "__main__":
    main()
