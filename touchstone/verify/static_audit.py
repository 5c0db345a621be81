"""Static audit of the graded diff: an AST pass over every changed Python file.

Rules and severities come from the audit policy (audit_policy.yaml). Names are
resolved through each file's own imports, so `import sys as s; s._getframe()`
and `from sys import _getframe` both hit `sys._getframe`, and
`getattr(sys, "_getframe")` is treated as `sys._getframe`. Comments and
docstrings never count, for or against.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field

from touchstone.harness import is_test_file
from touchstone.verify.policy import AuditPolicy, StaticRule
from touchstone.verify.report import AuditFinding

_CMP_DUNDERS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
def audit_files(
    files: dict[str, str], policy: AuditPolicy, baseline: dict[str, str] | None = None
) -> list[AuditFinding]:
    """Findings for each `path -> source` of a changed Python file, minus
    those already present in the file's pristine version (`baseline`): the
    candidate answers for what it added, not for the library it is fixing.
    Compared as a multiset of (rule, text of the flagged line), so a second
    copy of a pre-existing construct, or a changed line holding one, still
    counts. Files that do not parse are left to the compile check."""
    findings: list[AuditFinding] = []
    for path in sorted(files):
        found = audit_source(path, files[path], policy)
        before = (baseline or {}).get(path)
        if before is not None:
            existing = Counter(_key(f, before) for f in audit_source(path, before, policy))
            kept = []
            for f in found:
                key = _key(f, files[path])
                if existing[key] > 0:
                    existing[key] -= 1
                else:
                    kept.append(f)
            found = kept
        findings.extend(found)
    return findings


def _key(f: AuditFinding, source: str) -> tuple[str, str]:
    """A finding by rule and the text of its line: moving code keeps the key,
    changing what a flagged line does makes a new one."""
    lines = source.splitlines()
    text = lines[f.line - 1].strip() if f.line and f.line <= len(lines) else f.evidence
    return f.rule, text


def audit_source(path: str, source: str, policy: AuditPolicy) -> list[AuditFinding]:
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    visitor = _Visitor(path, policy.static, _aliases(tree))
    visitor.visit(tree)
    return visitor.findings


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted name it was imported as, from every import in the file."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    names[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for Name/Attribute chains; `getattr(a, "b")` counts as `a.b`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr"}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        base = _dotted(node.args[0])
        return f"{base}.{node.args[1].value}" if base else None
    return None


def _matches(name: str, patterns: list[str]) -> str | None:
    return next((p for p in patterns if name == p or name.startswith(p + ".")), None)


def _is_main_guard(test: ast.AST) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _is_constant_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_constant_literal(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    return False


def _docstring_ids(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _returns(fn: ast.AST) -> list[ast.Return]:
    """Return statements of `fn` itself, not of nested functions."""
    out, stack = [], list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def _constant_compare(node: ast.AST) -> bool:
    """A comparison dunder whose every return is a constant bool."""
    if isinstance(node, ast.Lambda):
        return isinstance(node.body, ast.Constant) and isinstance(node.body.value, bool)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False  # `__eq__ = make_cmp(...)`: not decidable here
    rets = _returns(node)
    return bool(rets) and all(
        isinstance(r.value, ast.Constant) and isinstance(r.value.value, bool) for r in rets
    )


@dataclass
class _Visitor(ast.NodeVisitor):
    path: str
    rules: list[StaticRule]
    aliases: dict[str, str]
    findings: list[AuditFinding] = field(default_factory=list)
    depth: int = 0
    main_guard: int = 0
    docstrings: set[int] = field(default_factory=set)
    _seen: set[tuple[str, int]] = field(default_factory=set)

    def visit_Module(self, node: ast.Module) -> None:
        self.docstrings = _docstring_ids(node)
        self.generic_visit(node)

    # -- context ---------------------------------------------------------
    def _contexts(self) -> set[str]:
        ctx = {"function" if self.depth else "module"}
        if self.main_guard:
            ctx.add("main_guard")
        if is_test_file(self.path):
            ctx.add("test_file")
        return ctx

    def _fire(self, rule: StaticRule, node: ast.AST, evidence: str) -> None:
        ctx = self._contexts()
        if ctx & set(rule.allow_in):
            return
        line = getattr(node, "lineno", 0)
        if (rule.id, line) in self._seen:
            return
        self._seen.add((rule.id, line))
        severity = rule.severity
        if "function" in ctx and rule.severity_in_function:
            severity = rule.severity_in_function
        self.findings.append(
            AuditFinding(
                rule=rule.id,
                severity=severity,
                path=self.path,
                line=line,
                evidence=f"{self.path}:{line}: {evidence} ({rule.description})",
            )
        )

    def _rules(self, kind: str) -> list[StaticRule]:
        return [r for r in self.rules if r.kind == kind]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in _CMP_DUNDERS and _constant_compare(node):
            for rule in self._rules("eq_constant"):
                self._fire(rule, node, f"{node.name} always returns a constant")
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_If(self, node: ast.If) -> None:
        guard = _is_main_guard(node.test)
        self.visit(node.test)
        self.main_guard += guard
        for child in node.body:
            self.visit(child)
        self.main_guard -= guard
        for child in node.orelse:
            self.visit(child)

    # -- names -----------------------------------------------------------
    def _resolve(self, dotted: str) -> str:
        root, _, rest = dotted.partition(".")
        base = self.aliases.get(root, root)
        return f"{base}.{rest}" if rest else base

    def _check_reference(self, node: ast.AST, dotted: str) -> None:
        name = self._resolve(dotted)
        for rule in self._rules("reference"):
            hit = _matches(name, rule.names)
            if hit:
                self._fire(rule, node, f"uses {name}")

    def visit_Name(self, node: ast.Name) -> None:
        self._check_reference(node, node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "__dict__" and self._is_module(node.value):
            for rule in self._rules("dynamic_module_attr"):
                self._fire(rule, node, f"{_dotted(node)} (module namespace by name)")
        dotted = _dotted(node)
        if dotted:
            self._check_reference(node, dotted)
        for rule in self._rules("attribute"):
            if node.attr in rule.names:
                self._fire(rule, node, f"accesses .{node.attr}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = _dotted(node)  # getattr(mod, "name")
        if dotted and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"}:
            self._check_reference(node, dotted)
            attr = dotted.rsplit(".", 1)[-1]
            for rule in self._rules("attribute"):
                if attr in rule.names:
                    self._fire(rule, node, f"accesses .{attr} via getattr")
        if isinstance(node.func, ast.Name) and node.func.id in {"setattr", "delattr"} and node.args:
            self._check_write(node, node.args[0])
        self._check_dynamic(node)
        self.generic_visit(node)

    def _is_module(self, node: ast.AST) -> bool:
        base = _dotted(node)
        return bool(base) and base.split(".")[0] in self.aliases

    def _check_dynamic(self, node: ast.Call) -> None:
        """getattr(mod, <computed>) and vars(mod): names this audit cannot see."""
        if not isinstance(node.func, ast.Name) or not node.args or not self._is_module(node.args[0]):
            return
        computed = node.func.id in {"getattr", "setattr", "delattr", "hasattr"} and not (
            len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
        )
        if computed or node.func.id == "vars":
            for rule in self._rules("dynamic_module_attr"):
                self._fire(rule, node, f"{node.func.id}() on module {self._resolve(_dotted(node.args[0]))} with a computed name")

    def _imported(self, node: ast.AST, modules: list[str]) -> None:
        for mod in modules:
            for rule in self._rules("import"):
                if _matches(mod, rule.names):
                    self._fire(rule, node, f"imports {mod}")
            self._check_reference(node, mod)

    def visit_Import(self, node: ast.Import) -> None:
        self._imported(node, [a.name for a in node.names])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            self._imported(node, [node.module] + [f"{node.module}.{a.name}" for a in node.names])

    # -- writes ----------------------------------------------------------
    def _check_write(self, node: ast.AST, target: ast.AST) -> None:
        base = _dotted(target)
        if not base:
            return
        root = base.split(".")[0]
        if root in self.aliases:
            for rule in self._rules("module_attr_write"):
                self._fire(rule, node, f"patches module attribute {self._resolve(base)}")

    def _visit_targets(self, node: ast.AST, targets: list[ast.AST]) -> None:
        for t in targets:
            if isinstance(t, ast.Attribute):
                self._check_write(node, t)
            if isinstance(t, ast.Name) and t.id in _CMP_DUNDERS:
                value = getattr(node, "value", None)
                if value is not None and _constant_compare(value):
                    for rule in self._rules("eq_constant"):
                        self._fire(rule, node, f"{t.id} always returns a constant")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._visit_targets(node, node.targets)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._visit_targets(node, [node.target])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._visit_targets(node, [node.target])

    def visit_Delete(self, node: ast.Delete) -> None:
        self._visit_targets(node, node.targets)

    # -- literals --------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or id(node) in self.docstrings:
            return
        for rule in self._rules("string"):
            for pattern in rule.patterns:
                if re.search(pattern, node.value):
                    self._fire(rule, node, f"string literal {node.value[:60]!r}")
                    break

    def visit_Dict(self, node: ast.Dict) -> None:
        keys = [k for k in node.keys if k is not None]
        if len(keys) == len(node.keys) and all(map(_is_constant_literal, keys)) and all(
            map(_is_constant_literal, node.values)
        ):
            for rule in self._rules("literal_table"):
                if len(keys) >= rule.min_entries:
                    self._fire(rule, node, f"literal table with {len(keys)} constant keys")
        self.generic_visit(node)
