"""touchstone.pyast: a parse that loses CPython 3.11's AST-depth race to a parse
outside the lock is retried; any other error is the caller's."""

from __future__ import annotations

import ast

import pytest

from touchstone import pyast


def test_a_raced_parse_is_retried_and_other_errors_are_not(monkeypatch):
    # The race itself (python/cpython gh-106905) cannot be triggered on demand: its error is.
    real, calls = ast.parse, []

    def raced_once(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=45, after=112)")
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", raced_once)
    assert isinstance(pyast.parse("x = 1"), ast.Module) and calls == ["x = 1", "x = 1"]
    with pytest.raises(SyntaxError):
        pyast.parse("def (")
    monkeypatch.setattr(ast, "parse", lambda *a, **k: (_ for _ in ()).throw(SystemError("something else")))
    with pytest.raises(SystemError, match="something else"):
        pyast.parse("x = 1")


def test_a_shared_parse_is_one_tree_per_text_and_a_syntax_error_is_raised_every_time():
    text = "def f(x):\n    return x + 1\n"
    tree = pyast.parse_shared(text)
    assert pyast.parse_shared("".join(text)) is tree  # an equal text, another string object
    assert ast.dump(tree) == ast.dump(pyast.parse(text)) and pyast.parse(text) is not tree
    for _ in range(2):
        with pytest.raises(SyntaxError):
            pyast.parse_shared("def (")
