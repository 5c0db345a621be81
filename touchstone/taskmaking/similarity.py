"""Comparing code and statements regardless of naming and formatting: the
normalized AST (local names renamed in order of first appearance, docstrings
and annotations dropped), token n-grams over that normalized form, and
statement text. Used by the LLM proposer's dedup, the contamination check and
the leak check."""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from touchstone import pyast

# a lenient tokenizer that works on any text (code in comments, decoded strings,
# prose): words, two-char operators, then any other non-space character
_TOKEN = re.compile(r"\w+|==|!=|<=|>=|//|\*\*|->|:=|[^\s\w]")


class _Normalizer(ast.NodeTransformer):
    """Rename every local name to its order of first appearance and drop docstrings,
    so renamed or re-documented copies compare equal."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _n(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def _strip_docstring(self, node):
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]

    def visit_FunctionDef(self, node):
        node.name = self._n(node.name)
        self._strip_docstring(node)
        node.returns = None
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.name = self._n(node.name)
        self._strip_docstring(node)
        self.generic_visit(node)
        return node

    def visit_arg(self, node):
        node.arg, node.annotation = self._n(node.arg), None
        return node

    def visit_Name(self, node):
        node.id = self._n(node.id)
        return node


def normalize(node: ast.AST) -> ast.AST:
    """A normalized copy-in-place of `node` (callers pass a fresh parse)."""
    return _Normalizer().visit(node)


def normalized_dump(code: str | ast.AST) -> str:
    tree = pyast.parse(code) if isinstance(code, str) else code
    return ast.dump(normalize(tree), annotate_fields=False)


def normalized_ast_hash(code: str) -> str:
    return hashlib.sha256(normalized_dump(code).encode()).hexdigest()


def tokens(text: str) -> list[str]:
    """Formatting-free tokens of any text; quote styles are unified."""
    return ["'" if t == '"' else t for t in _TOKEN.findall(text)]


def code_tokens(code: str) -> list[str]:
    """Tokens of the normalized code (names renamed, docstrings dropped); falls back
    to the raw tokens when the code does not parse."""
    try:
        return tokens(ast.unparse(normalize(pyast.parse(code))))
    except (SyntaxError, ValueError, RecursionError):
        return tokens(code)


def ngrams(toks: list[str], n: int = 5) -> set[tuple[str, ...]]:
    if len(toks) < n:
        return {tuple(toks)} if toks else set()
    return {tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _norm_text(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def text_similarity(a: str, b: str) -> float:
    """difflib ratio over lowercased words (punctuation and spacing ignored)."""
    return difflib.SequenceMatcher(None, _norm_text(a), _norm_text(b), autojunk=False).ratio()


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def word_shingles(text: str, n: int = 3) -> set[tuple[str, ...]]:
    return ngrams(words(text), n)


def distinctive_words(text: str, common: set[tuple[str, ...]], n: int = 3) -> list[str]:
    """The words of `text` outside every shingle in `common` (a template's
    boilerplate): what is left says what this text is about."""
    ws = words(text)
    covered = set()
    for i in range(len(ws) - n + 1):
        if tuple(ws[i : i + n]) in common:
            covered.update(range(i, i + n))
    return [w for i, w in enumerate(ws) if i not in covered]
