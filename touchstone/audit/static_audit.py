"""Static audit of the graded diff: every changed file, as the interpreter would see it.

- Python sources are decoded exactly as the interpreter decodes them
  (`tokenize.detect_encoding`); a coding cookie other than UTF-8
  (`unicode_escape`, `utf-7`, ...) is refused: the text a scanner reads and the
  code the interpreter runs would differ.
- Any file whose bytes are a zip archive (whatever its name: zipimport reads
  a zip from its end, so a prefix does not hide it) is refused: code in it
  runs once it is on `sys.path` and no rule here can read it.
- Each Python source goes through the AST rules (`ast_audit`), judged by what
  the candidate added: a finding whose rule and line text already occur in a
  version of the file the task ships (the pristine workspace, and for
  mutation tasks the original before the mutation) is the task's, unless the
  candidate changed what that line means by rebinding a name it uses.
"""

from __future__ import annotations

import ast
import codecs
import io
import tokenize
import zipfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from touchstone.harness import is_test_file
from touchstone.audit.ast_audit import Resolver, Visitor
from touchstone.audit.policy import AuditPolicy, StaticRule, load_policy
from touchstone.audit.finding import AuditFinding
from touchstone import pyast

_UTF8 = {"utf-8", "utf-8-sig"}


def decode_source(data: bytes) -> tuple[str | None, str | None]:
    """(text, None) as the interpreter would decode `data`, or (None, why) when
    the declared encoding is not UTF-8 or the bytes do not decode."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return None, f"unreadable source encoding: {exc}"
    if codecs.lookup(encoding).name not in _UTF8:
        return None, f"declares source encoding {encoding!r}: only UTF-8 source is audited"
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as exc:
        return None, f"is not valid {encoding}: {exc}"


def is_archive(data: bytes) -> bool:
    try:
        return zipfile.is_zipfile(io.BytesIO(data))
    except OSError:
        return False


Sources = Mapping[str, bytes | str]


def audit_files(
    files: Sources,
    policy: AuditPolicy,
    baseline: Mapping[str, bytes | str | list[bytes | str]] | None = None,
    *,
    isolated: bool = False,
) -> list[AuditFinding]:
    """Findings for each changed `path -> content` (bytes as on disk), minus
    those the task ships (`baseline`: the versions of each file the task
    ships). `isolated`: the test run keeps candidate code out of the judging
    process, so rules with `severity_when_isolated` relax. Files that do not
    parse are left to the compile check."""
    findings: list[AuditFinding] = []
    for path in sorted(files):
        data = _bytes(files[path])
        if is_archive(data):
            findings += _file_findings(policy, "archive", path, "is a zip archive (importable from sys.path)", isolated)
        if not path.endswith(".py"):
            continue
        text, problem = decode_source(data)
        if problem:
            findings += _file_findings(policy, "encoding", path, problem, isolated)
            continue
        shipped = (baseline or {}).get(path, [])
        shipped = [shipped] if isinstance(shipped, (str, bytes)) else shipped
        versions = [t for t in (decode_source(_bytes(v))[0] for v in shipped) if t is not None]
        findings += _added(path, text, versions, policy, isolated)
    return findings


def _bytes(content: bytes | str) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _file_findings(policy: AuditPolicy, kind: str, path: str, why: str, isolated: bool) -> list[AuditFinding]:
    return [AuditFinding(rule=r.id, severity=r.severity_for(isolated=isolated), path=path,
                         evidence=f"{path} {why} ({r.description})")
            for r in policy.static if r.kind == kind]  # fmt: skip


def audit_source(path: str, source: str, policy: AuditPolicy, *, isolated: bool = False) -> list[AuditFinding]:
    tree = _parse(path, source)
    return [] if tree is None else _visit(path, tree, policy.static, isolated)


def _parse(path: str, source: str) -> ast.Module | None:
    try:
        return pyast.parse_shared(source)  # read only: the rules visit it
    except (SyntaxError, ValueError):
        return None


def _visit(path: str, tree: ast.Module, rules: list[StaticRule], isolated: bool) -> list[AuditFinding]:
    visitor = Visitor(path, rules, Resolver(tree), is_test_file(path), isolated)
    visitor.visit(tree)
    return visitor.findings


def _added(path: str, text: str, versions: list[str], policy: AuditPolicy, isolated: bool) -> list[AuditFinding]:
    """Findings of `text` not explained by any shipped version: compared as a
    multiset of (rule, text of the flagged line), so a second copy of a
    pre-existing construct, or a changed line holding one, still counts; and a
    pristine line counts as added when a name it uses is bound differently."""
    tree = _parse(path, text)
    if tree is None:
        return []
    found = _visit(path, tree, policy.static, isolated)
    if not versions:
        return found
    added = set(range(len(found)))
    lines = text.splitlines()
    # the names each flagged line uses, and only their bindings: a big module's other names never matter
    names = _names_by_line(tree, {f.line for f in found})
    wanted = {n for ns in names.values() for n in ns}
    bindings = _bindings(tree, wanted)
    for version in versions:
        vtree = _parse(path, version)
        if vtree is None:
            continue
        vlines, vbind = version.splitlines(), _bindings(vtree, wanted)
        existing = Counter(_key(f, vlines) for f in _visit(path, vtree, policy.static, isolated))
        still = set()
        for i, f in enumerate(found):
            key = _key(f, lines)
            same_meaning = all(bindings.get(n) == vbind.get(n) for n in names.get(f.line, ()))
            if existing[key] > 0 and same_meaning:
                existing[key] -= 1
            else:
                still.add(i)
        added &= still
    return [f for i, f in enumerate(found) if i in added]


def _key(f: AuditFinding, lines: list[str]) -> tuple[str, str]:
    """A finding by rule and the text of its line: moving code keeps the key,
    changing what a flagged line does makes a new one."""
    text = lines[f.line - 1].strip() if f.line and f.line <= len(lines) else f.evidence
    return f.rule, text


def _names_by_line(tree: ast.AST, lines: set[int | None]) -> dict[int, set[str]]:
    """line -> the names used on it, for `lines` (one walk of the tree)."""
    out: dict[int, set[str]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.lineno in lines:
            out.setdefault(n.lineno, set()).add(n.id)
    return out


def _bindings(tree: ast.AST, names: set[str]) -> dict[str, Counter]:
    """name -> multiset of the statements that bind it anywhere in the file
    (whole functions and classes; a function's parameters by its signature),
    for `names` only (dumping every binding of a big module costs seconds)."""
    out: dict[str, Counter] = {}

    def bind(name: str, node: ast.AST) -> None:
        if name in names:
            out.setdefault(name, Counter())[ast.dump(node)] += 1

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                bind(arg.arg, a)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0], node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor,
                               ast.comprehension, ast.withitem, ast.ExceptHandler, ast.Delete, ast.Global)):  # fmt: skip
            for name in _stored(node):
                bind(name, _binding_part(node))
    return out


def _stored(node: ast.AST) -> set[str]:
    if isinstance(node, ast.ExceptHandler):
        return {node.name} if node.name else set()
    if isinstance(node, ast.Global):
        return set(node.names)
    targets = getattr(node, "targets", None) or [getattr(node, "target", None) or getattr(node, "optional_vars", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}  # fmt: skip


def _binding_part(node: ast.AST) -> ast.AST:
    """The part of a statement that decides the value it binds (a loop's
    target and iterable, not its body)."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return ast.Tuple(elts=[node.target, node.iter], ctx=ast.Load())
    return node


def reference_rules(workspace: Path, reference: Path, policy: AuditPolicy | None = None) -> list[str]:
    """Ids of rejecting rules that fire on a task's reference code (judged
    against the starting workspace, as a candidate would be) and that a task
    may allow (`auto_allow`); what a proposer writes to `source.meta.audit_allow`."""
    policy = policy or load_policy()
    files = {p.relative_to(reference).as_posix(): p.read_bytes() for p in sorted(reference.rglob("*")) if p.is_file()}
    shipped = {rel: [(workspace / rel).read_bytes()] for rel in files if (workspace / rel).is_file()}
    allowable = {r.id for r in policy.static if r.auto_allow}
    found = audit_files(files, policy, shipped)
    return sorted({f.rule for f in found if f.severity == "reject" and f.rule in allowable})
