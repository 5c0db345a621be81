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


def shape_tokens(code: str) -> list[str]:
    """Tokens of the code with every local name collapsed to one symbol, docstrings,
    annotations and module-level imports dropped: what stays is the code's shape,
    so renaming, reordering names' first uses or adding `from typing import List`
    changes nothing (an attribute such as `.append` is kept: it is the API used)."""
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return tokens(code)
    tree.body = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    try:
        text = ast.unparse(normalize(tree))
    except RecursionError:
        return tokens(code)
    return ["v" if _LOCAL.fullmatch(t) else t for t in tokens(text)]


_LOCAL = re.compile(r"v\d+")  # the names _Normalizer gives


def winnowed(toks: list[str], k: int = 6, window: int = 4) -> set[int]:
    """MOSS-style fingerprints: the hashes of the token k-grams, keeping the smallest
    hash of every `window` consecutive ones. Two texts that share a run of at least
    k + window - 1 tokens share a fingerprint, wherever the run sits."""
    grams = [toks[i : i + k] for i in range(len(toks) - k + 1)] or ([toks] if toks else [])
    hashes = [int.from_bytes(hashlib.blake2b("\x00".join(g).encode(), digest_size=8).digest(), "big") for g in grams]
    if len(hashes) <= window:
        return {min(hashes)} if hashes else set()
    return {min(hashes[i : i + window]) for i in range(len(hashes) - window + 1)}


def containment(part: set, whole: set) -> float:
    """Share of `part`'s fingerprints found in `whole`."""
    return len(part & whole) / len(part) if part else 0.0


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
