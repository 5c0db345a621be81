"""Name resolution for the static audit: what a dotted name or a string
expression *means*, not how it is spelled.

- `fold_str(node)`: the value of a string expression built from constants
  (`'_get' + 'frame'`, `''.join(['__co', 'de__'])`, `'tixe_'[::-1]`,
  f-strings and `.format` of constants), so a computed name that is in fact
  constant is judged like the literal.
- `canonical(dotted)`: the name an object is known by where it is defined,
  following module re-exports of the standard library (`os.sys.modules` is
  `sys.modules`, `posix._exit` and `os._exit` are one function). Only
  standard-library modules are consulted (never workspace code, never
  whatever else the verifier has imported, so verdicts do not depend on it),
  and modules with import-time side effects are never imported.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
import warnings
from functools import lru_cache

# Standard-library modules that do something when imported (open a browser,
# print, start a GUI): never imported just to resolve a name.
_UNSAFE_IMPORTS = {
    "antigravity",
    "this",
    "__hello__",
    "__phello__",
    "idlelib",
    "turtle",
    "turtledemo",
    "tkinter",
    "readline",
    "rlcompleter",
    "__main__",
}
_MAX_FOLD = 200  # longer "names" are not names


def fold_str(node: ast.AST | None) -> str | None:
    """The constant string value of `node`, or None when it depends on anything but constants."""
    value = _fold(node)
    return value if isinstance(value, str) and len(value) <= _MAX_FOLD else None


def _fold(node: ast.AST | None) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, bytes)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _fold(node.operand)
        return -value if isinstance(value, int) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult, ast.Mod)):
        return _binop(node.op, _fold(node.left), _fold(node.right))
    if isinstance(node, ast.JoinedStr):
        parts = [_fold(v.value) if isinstance(v, ast.FormattedValue) else _fold(v) for v in node.values]
        return "".join(map(str, parts)) if all(isinstance(p, (str, int)) for p in parts) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        base, bounds = (
            _fold(node.value),
            [_fold(b) if b else None for b in (node.slice.lower, node.slice.upper, node.slice.step)],
        )
        if isinstance(base, (str, bytes)) and all(b is None or isinstance(b, int) for b in bounds):
            return base[slice(*bounds)]
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_fold(e) for e in node.elts]
        return items if all(isinstance(i, str) for i in items) else None
    if isinstance(node, ast.Call):
        return _fold_call(node)
    return None


def _binop(op: ast.operator, left: object, right: object) -> object:
    try:
        if isinstance(op, ast.Add) and type(left) is type(right) and isinstance(left, (str, bytes)):
            return left + right
        if isinstance(op, ast.Mult) and isinstance(left, str) and isinstance(right, int) and right < _MAX_FOLD:
            return left * right
        if isinstance(op, ast.Mod) and isinstance(left, str) and isinstance(right, (str, int)):
            return left % right
    except (TypeError, ValueError):
        return None
    return None


def _fold_call(node: ast.Call) -> object:
    if isinstance(node.func, ast.Name) and node.func.id == "chr" and len(node.args) == 1:
        code = _fold(node.args[0])
        return chr(code) if isinstance(code, int) and 0 <= code < 0x110000 else None
    if not isinstance(node.func, ast.Attribute) or node.keywords and node.func.attr != "format":
        return None
    base, args = _fold(node.func.value), [_fold(a) for a in node.args]
    if not isinstance(base, (str, bytes)) or any(a is None for a in args):
        return None
    method = node.func.attr
    try:
        if method == "join" and len(args) == 1 and isinstance(args[0], list):
            return base.join(args[0])
        if method == "format" and not node.keywords:
            return base.format(*args)
        if method in {"lower", "upper", "strip", "lstrip", "rstrip", "replace", "decode"}:
            return getattr(base, method)(*args)
    except (TypeError, ValueError, IndexError, KeyError, UnicodeError):
        return None
    return None


def _importable(module: str) -> types.ModuleType | None:
    """A standard-library module (never workspace code). Only the standard
    library, whatever else this process has imported, so a verdict does not
    depend on the verifier's own imports."""
    root = module.split(".")[0]
    if root not in sys.stdlib_module_names or root in _UNSAFE_IMPORTS:
        return None
    if module in sys.modules:
        return sys.modules[module]
    try:
        with warnings.catch_warnings():  # deprecated modules (imp) still resolve
            warnings.simplefilter("ignore")
            return importlib.import_module(module)
    except Exception:  # noqa: BLE001 - a name that does not import is simply not resolved
        return None


@lru_cache(maxsize=4096)
def canonical(dotted: str) -> str:
    """`dotted` with every module re-export followed: the longest importable
    module prefix, then attributes; whenever an attribute is itself a module,
    or a function/class defined elsewhere, the name restarts from there."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = _importable(".".join(parts[:cut]))
        if module is not None:
            break
    else:
        return dotted
    name, obj = module.__name__, module
    for i in range(cut, len(parts)):
        try:
            obj = getattr(obj, parts[i])
        except Exception:  # noqa: BLE001 - not an attribute (a candidate's own name): stop resolving
            return ".".join([name, *parts[i:]])
        name = _home(obj) or f"{name}.{parts[i]}"
    return name


def _home(obj: object) -> str | None:
    """Where `obj` is defined, when that is a real importable name of it."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    home = sys.modules.get(module)
    target: object = home
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return f"{module}.{qualname}" if target is obj else None
