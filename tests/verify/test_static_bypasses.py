"""The bypasses of the first static audit (issue 10, "What went wrong" 1),
each in several spellings, and the honest look-alikes each rule must let
through (flagged at most) once the test run is isolated."""

import textwrap
import zipfile
from io import BytesIO

import pytest

from touchstone.audit.policy import load_policy
from touchstone.audit.static_audit import audit_files


def rejected(src, path="solution.py", *, isolated=False, baseline=None):
    data = src if isinstance(src, bytes) else textwrap.dedent(src).encode()
    found = audit_files({path: data}, load_policy(), baseline, isolated=isolated)
    return {f.rule for f in found if f.severity == "reject"}


def flagged(src, path="solution.py", *, isolated=False):
    found = audit_files({path: textwrap.dedent(src).encode()}, load_policy(), isolated=isolated)
    return {f.rule for f in found if f.severity == "flag"}


FORGE = "from _pytest.python import Function\nFunction.runtest = lambda self: None\n"


@pytest.mark.parametrize("cookie", ["unicode_escape", "utf-7", "raw-unicode-escape", "latin-1", "utf_16"])
@pytest.mark.parametrize("line", [0, 1])
def test_non_utf8_coding_cookies_are_refused_with_the_file_named(cookie, line):
    src = ("#!/usr/bin/env python3\n" if line else "") + f"# -*- coding: {cookie} -*-\nx = 1\n"
    found = audit_files({"pkg/mod.py": src.encode("latin-1")}, load_policy())
    assert [(f.rule, f.severity, f.path) for f in found] == [("S-ENCODING", "reject", "pkg/mod.py")]
    assert "pkg/mod.py" in found[0].evidence and "encoding" in found[0].evidence


def test_utf8_cookie_and_bom_are_audited_as_usual():
    assert rejected(b"# coding: utf-8\nimport os\nos._exit(0)\n") == {"S-HARD-EXIT"}
    assert rejected(b"\xef\xbb\xbfimport os\nos._exit(0)\n") == {"S-HARD-EXIT"}
    assert rejected(b"# vim: set fileencoding=utf8 :\nx = 1\n") == set()


def _zip(prefix=b""):
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("evil.py", FORGE)
    return prefix + buf.getvalue()


@pytest.mark.parametrize("name", ["vendor.zip", "lib.egg", "x.whl", "data/table.csv", "notes.txt", "blob"])
@pytest.mark.parametrize("prefix", [b"", b"#!/bin/sh\nexit 0\n"])
def test_zip_archives_are_refused_whatever_their_name(name, prefix):
    found = audit_files({name: _zip(prefix)}, load_policy())
    assert [(f.rule, f.path) for f in found] == [("S-CODE-ARCHIVE", name)]


@pytest.mark.parametrize(
    "src, rule",
    [
        ("import os\nos.sys.modules['x'] = None\n", "S-IMPORT-HOOK"),
        ("import typing\nm = typing.sys.modules\n", "S-IMPORT-HOOK"),
        ("import shutil\nshutil.os._exit(0)\n", "S-HARD-EXIT"),
        ("import posix\nposix._exit(0)\n", "S-HARD-EXIT"),
        ("from inspect import sys as s\nf = s._getframe(1)\n", "S-INTROSPECTION"),
        ("import logging\nlogging.os.dup2(1, 2)\n", "S-FD-TAMPER"),
        ("s = __import__('sys')\ns.modules.clear()\n", "S-IMPORT-HOOK"),
        ("f = __import__('o' + 's')._exit\n", "S-HARD-EXIT"),
        ("import importlib\nimportlib.import_module('_pytest.python').Function.runtest = None\n", "S-TEST-FRAMEWORK"),
        ("import importlib as il\nm = il.import_module(''.join(['py', 'test']))\n", "S-TEST-FRAMEWORK"),
        ("import pkgutil\nF = pkgutil.resolve_name('_pytest.python:Function')\n", "S-TEST-FRAMEWORK"),
        ("import pkgutil\nx = pkgutil.resolve_name('os:_exit')\n", "S-HARD-EXIT"),
        ("import sys\nm = sys.modules.get('_pytest.runner')\n", "S-TEST-FRAMEWORK"),
        ("import sys\nm = sys.modules['math']\nm.isclose = None\n", "S-IMPORT-HOOK"),
    ],
)
def test_module_reexports_and_importers_resolve(src, rule):
    assert rule in rejected(src)


@pytest.mark.parametrize(
    "src",
    [
        "import pickle\nf = pickle.loads(b'cos\\n_exit\\n.')\n",
        "from pickle import loads as l\nl(blob)\n",
        "import marshal, types\nf = types.FunctionType(marshal.loads(blob), {})\n",
        "import types\nc = types.CodeType\n",
        "import _pickle\n",
        "import shelve\n",
    ],
)
def test_code_from_bytes_is_refused(src):
    assert "S-CODE-LOAD" in rejected(src)


@pytest.mark.parametrize(
    "src, rule",
    [
        ("import runpy\nrunpy.run_path('data/table.csv')\n", "S-RUN-FILE"),
        ("from runpy import run_module as r\nr('x')\n", "S-RUN-FILE"),
        ("exec(open('data/notes.txt').read())\n", "S-EXEC-FILE"),
        ("from pathlib import Path\nexec(Path('n.dat').read_text())\n", "S-EXEC-FILE"),
        ("code = compile(open('x.cfg').read(), 'x', 'exec')\n", "S-EXEC-FILE"),
        ("import sys\nsys.path.insert(0, 'vendor.zip')\n", "S-SYS-PATH"),
        ("from sys import path\npath.append('blob')\n", "S-SYS-PATH"),
        ("import sys\nsys.path[0:0] = ['vendor.dat']\n", "S-SYS-PATH"),
        ("import os\nos.sys.path.extend(['x'])\n", "S-SYS-PATH"),
        ("import sys as _s\n_s.path += ['blob']\n", "S-MONKEYPATCH"),
        ("import site\nsite.addsitedir('.')\n", "S-RUN-FILE"),
        ("import zipimport\nzipimport.zipimporter('x').load_module('evil')\n", "S-RUN-FILE"),
        ("import importlib.util as u\ns = u.spec_from_file_location('m', 'data.bin')\n", "S-RUN-FILE"),
    ],
)
def test_code_from_non_python_files_is_refused(src, rule):
    assert rule in rejected(src)


def test_reading_sys_path_or_writing_the_environment_is_fine():
    assert (
        rejected("import os\nimport sys\n\nHERE = os.path.dirname(__file__) in sys.path\nos.environ['LANG'] = 'C'\n")
        == set()
    )


@pytest.mark.parametrize(
    "src",
    [
        "import math\n_m = math\n_m.isclose = lambda *a, **k: True\n",
        "import math\nm2 = m1 = math\nm2.isclose = None\n",
        "import math as mm\nalias: object = mm\nsetattr(alias, 'isclose', None)\n",
        "import math\nfor _mod in (math,):\n    _mod.isclose = None\n",
        "import math\ndef patch(m=math):\n    m.isclose = None\npatch()\n",
        "from tests import helpers\n_h = helpers\n_h.check = lambda *a: None\n",
        "import tests.helpers as th\nx = th\nx.check = print\n",
        "import math\nif (_m := math):\n    _m.fsum = sum\n",
        "import sys\nm = sys.modules['tests.helpers']\n",
    ],
)
def test_monkeypatching_through_local_aliases_is_rejected(src):
    assert rejected(src) & {"S-MONKEYPATCH", "S-IMPORT-HOOK"}


@pytest.mark.parametrize(
    "src, rule",
    [
        ("subs = getattr(object, '__sub' + 'classes__')()\n", "S-DUNDER-ESCAPE"),
        ("g = getattr(f, ''.join(['__glo', 'bals__']))\n", "S-DUNDER-ESCAPE"),
        ("n = 'sessalcbus__'[::-1]\nx = getattr(type(()), '__' + n)\n", "S-DYNAMIC-ATTR"),
        ("def f(n):\n    return getattr(int, n)\n", "S-DYNAMIC-ATTR"),
        ("def f(n):\n    return getattr(().__class__.__base__, n)\n", "S-DYNAMIC-ATTR"),
        ("def f(n, v):\n    setattr(type(1), n, v)\n", "S-DYNAMIC-ATTR"),
        ("def f(n):\n    return object.__getattribute__(object, n)\n", "S-DYNAMIC-ATTR"),
        ("import sys\nf = getattr(sys, f\"_get{'frame'}\")\n", "S-INTROSPECTION"),
        ("import os\nf = getattr(os, '_{}'.format('exit'))\n", "S-HARD-EXIT"),
        ("import sys\nf = sys.__getattribute__('_getframe')\n", "S-INTROSPECTION"),
    ],
)
def test_computed_dunder_and_attribute_names_are_resolved_or_refused(src, rule):
    assert rule in rejected(src)


@pytest.mark.parametrize(
    "src",
    [
        "__name__ = '__main__'\n",
        "globals()['__name__'] = '__main__'\n",
        "globals().update(__name__='__main__')\n",
        "import sys\nsetattr(sys.modules[__name__], '__name__', '__main__')\n",
        "vars()['__builtins__'] = {}\n",
        "for __name__ in ['__main__']:\n    pass\n",
    ],
)
def test_rebinding_module_identity_is_rejected(src):
    assert rejected(src) & {"S-NAMESPACE", "S-IMPORT-HOOK"}


LIB = """\
import os
import sys

MODE = "check"


def run():
    return 1


if __name__ == "__main__":
    os._exit(run())
"""


def test_laundering_through_a_pristine_main_guard_is_rejected():
    assert rejected(LIB, "lib.py", baseline={"lib.py": LIB}) == set()
    laundered = LIB.replace('MODE = "check"', '__name__ = "__main__"')
    assert rejected(laundered, "lib.py", baseline={"lib.py": LIB}) == {"S-NAMESPACE"}


SYSMOD = """\
import importlib
import sys

TARGET = "json"
mod = importlib.import_module("json")
sys.modules[TARGET + suffix()] = mod


def suffix():
    return "_alias"


def value():
    return 1
"""


@pytest.mark.parametrize(
    "change",
    [
        ('TARGET = "json"', 'TARGET = "_pytest.runner"[:0] + "pytest"'),
        ('return "_alias"', 'return "_alias" if 0 else ""'),
        ('mod = importlib.import_module("json")', 'mod = importlib.import_module("json")\nmod = None'),
    ],
)
def test_a_pristine_flagged_line_whose_names_were_rebound_counts_as_added(change):
    changed = SYSMOD.replace(*change)
    assert "S-IMPORT-HOOK" in rejected(changed, "lib.py", baseline={"lib.py": SYSMOD})
    honest = SYSMOD.replace("return 1", "return 2")
    assert rejected(honest, "lib.py", baseline={"lib.py": SYSMOD}) == set()


def test_restoring_an_original_line_is_honest_when_the_original_is_a_baseline():
    original = "import sys\n\n\ndef depth():\n    return len(sys.modules) > 0\n"
    mutant = original.replace("> 0", "< 0")
    assert "S-IMPORT-HOOK" in rejected(
        original, "lib.py", baseline={"lib.py": [mutant.replace("sys.modules", "sys.path_x")]}
    )
    assert rejected(original, "lib.py", baseline={"lib.py": [mutant, original]}) == set()


HONEST = {
    "calculator": """\
        import ast

        _ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub)


        def calc(expr):
            tree = ast.parse(expr, mode="eval")
            if not all(isinstance(n, _ALLOWED) for n in ast.walk(tree)):
                raise ValueError(f"unsupported expression: {expr!r}")
            return eval(compile(tree, "<calc>", "eval"), {"__builtins__": {}})
        """,
    "arity": '''\
        def arity(f):
            """Number of positional parameters of f."""
            code = f.__code__
            return code.co_argcount
        ''',
    "timeout": """\
        import signal
        from contextlib import contextmanager


        @contextmanager
        def time_limit(seconds):
            def _raise(signum, frame):
                raise TimeoutError(f"took longer than {seconds}s")

            old = signal.signal(signal.SIGALRM, _raise)
            signal.alarm(seconds)
            try:
                yield
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, old)
        """,
    "cleaner": """\
        from pathlib import Path


        def clean(root):
            removed = 0
            for p in Path(root).rglob("*"):
                if p.suffix in (".pyc", ".pyo") or p.name == "__pycache__":
                    removed += 1
            return removed
        """,
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_rules_guarding_the_in_process_judge_relax_to_flag_once_isolated(name):
    src = HONEST[name]
    assert rejected(src), f"{name}: today (not isolated) the rule still rejects"
    assert rejected(src, isolated=True) == set()
    assert flagged(src, isolated=True), f"{name}: still visible as a flag"


@pytest.mark.parametrize(
    "src",
    [
        FORGE,
        "import os\nos._exit(0)\n",
        "import math\nmath.isclose = None\n",
        "exec(open('x.txt').read())\n",
        "import pickle\npickle.loads(b'')\n",
    ],
)
def test_isolation_does_not_relax_rules_that_guard_more_than_the_judge(src):
    assert rejected(src, isolated=True)


PARAM_WALK = """
def _walk(cls, name):
    for sub in getattr(cls, name)():
        yield sub
        yield from _walk(sub, name)


def install(name):
    for c in _walk(object, name):
        if c.__name__ == "Function" and c.__module__.endswith("pytest.python"):
            c.runtest = lambda self: None
"""


@pytest.mark.parametrize(
    "src",
    [
        PARAM_WALK,
        PARAM_WALK.replace("c.runtest = lambda self: None", 'setattr(c, "run" + "test", None)'),
        PARAM_WALK.replace('c.__module__.endswith("pytest.python")', "True"),
        "def f(item):\n    item.longrepr = None\n",
        "def f(m):\n    return m['_pytest.runner']\n",
    ],
)
def test_framework_targets_are_named_whatever_reaches_them(src):
    assert rejected(src) & {"S-FRAMEWORK-TARGET", "S-FRAMEWORK-STRING"}
    assert not rejected(src, isolated=True)


def test_framework_names_are_fine_in_test_files_and_prose():
    assert (
        rejected("import pytest\n\ndef test_x(tmp_path):\n    assert pytest.approx(1) == 1\n", "tests/test_a.py")
        == set()
    )
    assert rejected('"""Run the suite with pytest.main or `python -m pytest`."""\nRUNNER = "pytest"\n') == set()
