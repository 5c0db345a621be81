"""Oracle runner: calls entry points on given inputs in THIS process and writes
a canonical, type-strict serialization of each result. The verifier runs it
once over the reference and (in other processes, in two call orders) over the
candidate, and compares the serializations itself: the candidate's `__eq__`,
`__repr__` and `__hash__` are never consulted, and no expected value ever
exists in the candidate's process.

usage: python3 -s oracle_runner.py ROOT CASES_JSON OUT_JSONL
Standard library only; runs in the sandbox's interpreter.
"""

import json
import math
import os
import sys

# Bound before any candidate import, so later patching of the builtins or of
# these modules does not change how results are encoded.
_type, _repr, _sorted, _isinstance, _getattr = type, repr, sorted, isinstance, getattr
_vars, _hasattr, _list, _str, _len = vars, hasattr, list, str, len
_dumps, _loads, _write, _isnan, _isinf = json.dumps, json.loads, os.write, math.isnan, math.isinf
_PRIMS = {bool: "bool", int: "int", str: "str", type(None): "none"}
MAX_DEPTH = 50


def decode(v):
    """Tagged JSON -> Python value (inputs)."""
    if _isinstance(v, dict) and "__t" in v:
        t, x = v["__t"], v.get("v")
        if t == "tuple":
            return tuple(decode(e) for e in x)
        if t == "set":
            return set(decode(e) for e in x)
        if t == "frozenset":
            return frozenset(decode(e) for e in x)
        if t == "bytes":
            return bytes.fromhex(x)
        if t == "float":
            return float(x)
        if t == "dict":
            return {decode(k): decode(val) for k, val in x}
        raise ValueError(f"unknown tag {t}")
    if _isinstance(v, list):
        return [decode(e) for e in v]
    return v


def canon(x, depth=0):
    """Canonical, type-strict encoding: exact types only (a subclass of int is
    not an int), floats by repr, containers recursively, sets/dicts sorted by
    the canonical form of their members, objects by class and attributes."""
    if depth > MAX_DEPTH:
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
    if t is list or t is tuple:
        return [t.__name__, [canon(e, depth + 1) for e in x]]
    if t is set or t is frozenset:
        items = [canon(e, depth + 1) for e in x]
        return [t.__name__, _sorted(items, key=_dumps)]
    if t is dict:
        items = [[canon(k, depth + 1), canon(v, depth + 1)] for k, v in x.items()]
        return ["dict", _sorted(items, key=_dumps)]
    name = f"{_getattr(t, '__module__', '?')}.{_getattr(t, '__qualname__', '?')}"
    if t is range or t is slice:
        return [name, _repr(x)]
    state = {}
    if _hasattr(x, "__dict__"):
        state = {k: v for k, v in _vars(x).items()}
    for slot in _getattr(t, "__slots__", ()) or ():
        if _hasattr(x, slot):
            state[slot] = _getattr(x, slot)
    return ["object", name, canon(state, depth + 1)]


def main():
    root, cases_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    cases = _loads(open(cases_path).read())
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.path.insert(0, root)
    os.chdir(root)
    import importlib

    for case in cases:
        rec = {"i": case["i"]}
        try:
            obj = importlib.import_module(case["module"])
            for part in case["function"].split("."):
                obj = _getattr(obj, part)
            args = decode(case["args"])
            kwargs = decode(case.get("kwargs", {}))
            result = obj(*args, **kwargs)
            rec["result"] = canon(result)
            rec["args_after"] = canon(args)  # in-place mutation of inputs is behaviour too
        except BaseException as exc:  # the candidate's exception is an outcome, not a crash
            rec["raised"] = _type(exc).__name__
        _write(fd, (_dumps(rec) + "\n").encode())
    _write(fd, (_dumps({"done": _len(cases)}) + "\n").encode())


if __name__ == "__main__":
    main()
