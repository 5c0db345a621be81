"""The AST pass of the static audit over one Python source.

Names are judged by what they mean, not how they are spelled: every local
name bound to a module (by import, by assignment `_m = math`, by a loop over
modules, by a default argument) resolves to that module; importers with a
constant argument (`__import__('sys')`, `importlib.import_module`,
`pkgutil.resolve_name`, `sys.modules['x']`) resolve to what they import;
`getattr(mod, <constant expression>)` resolves to `mod.name`; and every
resolved name is also matched in its canonical form, so standard-library
re-exports (`os.sys.modules`, `shutil.os._exit`) hit the rule for the
original. Comments and docstrings never count.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field

from touchstone.audit.names import canonical, fold_str
from touchstone.audit.policy import StaticRule
from touchstone.audit.finding import AuditFinding

CMP_DUNDERS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
# Calls that return a module named by their (constant) argument.
_IMPORTERS = {"__import__": "root", "builtins.__import__": "root", "importlib.__import__": "root",
              "importlib.import_module": "full", "pkgutil.resolve_name": "full"}  # fmt: skip
_GETATTRS = {"getattr", "hasattr", "setattr", "delattr"}
_BUILTIN_TYPES = {n for n, v in vars(builtins).items() if isinstance(v, type)}
_CLASS_WALK = {"__class__", "__base__", "__bases__", "__mro__"}
# Names whose rebinding changes what pristine code means (`__name__ = '__main__'`
# makes a main-guarded line run at import).
NAMESPACE_NAMES = {"__name__", "__builtins__", "__spec__", "__loader__", "__file__", "__package__"}
_NAMESPACE_CALLS = {"globals", "vars", "locals"}
_FILE_READS = {"open", "io.open", "read", "read_text", "read_bytes", "readlines", "readline", "get_data"}


def is_main_guard(test: ast.AST) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


class Resolver:
    """Local name -> dotted name of the module (or imported object) it stands for."""

    def __init__(self, tree: ast.AST):
        self.aliases: dict[str, str] = {}
        self.nodes = list(ast.walk(tree))  # one walk, shared by every pre-pass
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    root = a.name.split(".")[0]
                    self.aliases[a.asname or root] = a.name if a.asname else root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        bindings = [pair for node in self.nodes for pair in self._bindings(node)]
        for _ in range(3):  # aliases of aliases of aliases
            for target, value in bindings:
                name = (
                    target.id if isinstance(target, ast.Name) else target.arg if isinstance(target, ast.arg) else None
                )
                if name and name not in self.aliases and self.rooted(value):
                    resolved = self.name(value)
                    if resolved:
                        self.aliases[name] = resolved

    @staticmethod
    def _bindings(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
        """(target, value) pairs a statement binds: assignments, loops over literal
        collections, default arguments."""
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(
            node.iter, (ast.Tuple, ast.List, ast.Set)
        ):
            pairs = [(node.target, e) for e in node.iter.elts]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args.posonlyargs + node.args.args
            pairs = list(zip(args[len(args) - len(node.args.defaults) :], node.args.defaults))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
        return pairs

    def name(self, node: ast.AST) -> str | None:
        """Dotted name `node` stands for, aliases applied (None: not a name)."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.name(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            return self.call_name(node)
        if isinstance(node, ast.Subscript):
            key = fold_str(node.slice)
            if key is None:
                return None
            if self.is_namespace_call(node.value):
                return self.aliases.get(key, key)
            base = self.name(node.value)
            if base and canonical(base) == "sys.modules":
                return key
            if base and base.endswith(".__dict__"):
                return f"{base[: -len('.__dict__')]}.{key}"
        return None

    def call_name(self, node: ast.Call) -> str | None:
        func = self.name(node.func)
        if func in _GETATTRS and len(node.args) >= 2:
            base, attr = self.name(node.args[0]), fold_str(node.args[1])
            return f"{base}.{attr}" if base and attr else None
        if func == "vars" and len(node.args) == 1:
            return None  # vars(mod)[...] is handled as a subscript of a namespace
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            base, key = self.name(node.func.value), fold_str(node.args[0])
            if base and key and canonical(base) == "sys.modules":
                return key
        mode = _IMPORTERS.get(func or "") or _IMPORTERS.get(canonical(func) if func else "")
        if mode and node.args:
            target = fold_str(node.args[0])
            if target:
                target = target.replace(":", ".")
                return target.split(".")[0] if mode == "root" else target
        return None

    def is_namespace_call(self, node: ast.AST) -> bool:
        """`globals()` / `vars()` / `locals()` without arguments, or `vars(mod)`."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _NAMESPACE_CALLS):
            return False
        return not node.args or (node.func.id == "vars" and self.rooted(node.args[0]))

    def rooted(self, node: ast.AST) -> bool:
        """Whether `node` reaches a module or an imported object (not a plain local value)."""
        while True:
            if isinstance(node, ast.Name):
                return node.id in self.aliases
            if isinstance(node, ast.Attribute):
                node = node.value
            elif isinstance(node, ast.Call):
                func = self.name(node.func)
                if func in _GETATTRS and node.args:
                    node = node.args[0]
                else:
                    return self.call_name(node) is not None
            elif isinstance(node, ast.Subscript):
                return self.name(node) is not None and not self.is_namespace_call(node.value)
            else:
                return False

    def builtin_type(self, node: ast.AST) -> bool:
        """A builtin type, `type(x)`, or a walk through `__class__`/`__base__`/`__mro__`."""
        if isinstance(node, ast.Name):
            return node.id in _BUILTIN_TYPES and node.id not in self.aliases
        if isinstance(node, ast.Attribute):
            return node.attr in _CLASS_WALK or self.builtin_type(node.value)
        if isinstance(node, ast.Subscript):
            return self.builtin_type(node.value)
        return isinstance(node, ast.Call) and self.name(node.func) == "type" and len(node.args) == 1


def _docstring_ids(nodes: list[ast.AST]) -> set[int]:
    ids = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _is_constant_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_constant_literal(e) for e in node.elts)
    return isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)


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


def constant_compare(node: ast.AST) -> bool:
    """A comparison dunder whose every return is a constant bool."""
    if isinstance(node, ast.Lambda):
        return isinstance(node.body, ast.Constant) and isinstance(node.body.value, bool)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False  # `__eq__ = make_cmp(...)`: not decidable here
    rets = _returns(node)
    return bool(rets) and all(isinstance(r.value, ast.Constant) and isinstance(r.value.value, bool) for r in rets)


def _prefixes(name: str) -> list[str]:
    """`a.b.c` -> `a`, `a.b`, `a.b.c`: a rule name matches itself and everything below it."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _matches(name: str, patterns: set[str] | list[str]) -> bool:
    return any(p in patterns for p in _prefixes(name))


@dataclass
class Visitor(ast.NodeVisitor):
    path: str
    rules: list[StaticRule]
    resolver: Resolver
    in_test_file: bool
    isolated: bool = False
    findings: list[AuditFinding] = field(default_factory=list)
    depth: int = 0
    main_guard: int = 0
    docstrings: set[int] = field(default_factory=set)
    _seen: set[tuple[str, int]] = field(default_factory=set)
    _by_kind: dict[str, list[StaticRule]] = field(default_factory=dict)
    _ref_index: tuple = ()

    def visit_Module(self, node: ast.Module) -> None:
        self.docstrings = _docstring_ids(self.resolver.nodes)
        self.generic_visit(node)

    # -- firing ----------------------------------------------------------
    def _contexts(self) -> set[str]:
        ctx = {"function" if self.depth else "module"}
        if self.main_guard:
            ctx.add("main_guard")
        if self.in_test_file:
            ctx.add("test_file")
        return ctx

    def fire(self, rule: StaticRule, node: ast.AST, evidence: str) -> None:
        ctx = self._contexts()
        line = getattr(node, "lineno", 0)
        if ctx & set(rule.allow_in) or (rule.id, line) in self._seen:
            return
        self._seen.add((rule.id, line))
        severity = rule.severity_for(in_function="function" in ctx, isolated=self.isolated)
        self.findings.append(AuditFinding(rule=rule.id, severity=severity, path=self.path, line=line,
                                          evidence=f"{self.path}:{line}: {evidence} ({rule.description})"))  # fmt: skip

    def _rules(self, kind: str) -> list[StaticRule]:
        if not self._by_kind:
            for r in self.rules:
                self._by_kind.setdefault(r.kind, []).append(r)
        return self._by_kind.get(kind, [])

    # -- context ---------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in CMP_DUNDERS and constant_compare(node):
            for rule in self._rules("eq_constant"):
                self.fire(rule, node, f"{node.name} always returns a constant")
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_If(self, node: ast.If) -> None:
        guard = is_main_guard(node.test)
        self.visit(node.test)
        self.main_guard += guard
        for child in node.body:
            self.visit(child)
        self.main_guard -= guard
        for child in node.orelse:
            self.visit(child)

    # -- names -----------------------------------------------------------
    def check_reference(self, node: ast.AST, name: str, rooted: bool) -> None:
        """Match `name` and (for names that reach a real module) its canonical form."""
        canon = canonical(name) if rooted else name
        shown = name if canon == name else f"{name} (= {canon})"
        written, canonical_index = self._reference_index()
        hits = [r for p in _prefixes(name) for r in written.get(p, ())]
        if rooted:
            hits += [r for p in _prefixes(canon) for r in canonical_index.get(p, ())]
        for rule in {r.id: r for r in hits}.values():  # each rule once
            self.fire(rule, node, f"uses {shown}")

    def _reference_index(self) -> tuple[dict[str, list[StaticRule]], dict[str, list[StaticRule]]]:
        """Reference rules by each name they list, as written and in canonical form."""
        if not self._ref_index:
            written: dict[str, list[StaticRule]] = {}
            canon: dict[str, list[StaticRule]] = {}
            for rule in self._rules("reference"):
                for n in rule.names:
                    written.setdefault(n, []).append(rule)
                    canon.setdefault(canonical(n), []).append(rule)
            self._ref_index = (written, canon)
        return self._ref_index

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.check_reference(node, self.resolver.name(node) or node.id, node.id in self.resolver.aliases)
        elif node.id in NAMESPACE_NAMES:
            self._namespace(node, f"rebinds {node.id}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "__dict__" and self.resolver.rooted(node.value):
            self._dynamic(node, f"{self.resolver.name(node)} (module namespace by name)")
        name = self.resolver.name(node)
        if name:
            self.check_reference(node, name, self.resolver.rooted(node))
        self._attribute(node, node.attr, "")
        self.generic_visit(node)

    def _attribute(self, node: ast.AST, attr: str, how: str) -> None:
        for rule in self._rules("attribute"):
            if attr in rule.names:
                self.fire(rule, node, f"accesses .{attr}{how}")

    def _dynamic(self, node: ast.AST, evidence: str) -> None:
        for rule in self._rules("dynamic_module_attr"):
            self.fire(rule, node, evidence)

    def _namespace(self, node: ast.AST, evidence: str) -> None:
        for rule in self._rules("namespace_write"):
            self.fire(rule, node, evidence)

    def visit_Call(self, node: ast.Call) -> None:
        func = self.resolver.name(node.func)
        if func in _GETATTRS and len(node.args) >= 2:
            self._reflective(node, func, node.args[0], node.args[1])
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "__getattribute__" and node.args:
            target, attr = (node.args[0], node.args[1]) if len(node.args) > 1 else (node.func.value, node.args[0])
            self._reflective(node, "getattr", target, attr)
        elif func == "vars" and node.args and self.resolver.rooted(node.args[0]):
            self._dynamic(node, f"vars() of {self.resolver.name(node.args[0])}")
        imported = self.resolver.call_name(node) if func not in _GETATTRS else None
        if imported:
            self._imported(node, [imported])
        if isinstance(node.func, ast.Attribute) and node.func.attr in {"update", "setdefault", "__setitem__"} \
                and self.resolver.is_namespace_call(node.func.value):  # fmt: skip
            self._namespace(node, f"writes the module namespace through {node.func.value.func.id}()")
        value = fold_str(node)  # '/'.join(['tests', ...]): judged as the string it builds
        if value is not None:
            self._strings(node, value)
        if func in {"eval", "exec", "compile"} and any(self._reads_file(a) for a in node.args):
            for rule in self._rules("exec_file"):
                self.fire(rule, node, f"{func}() of text read from a file")
        self.generic_visit(node)

    def _reads_file(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = self.resolver.name(sub.func)
                attr = sub.func.attr if isinstance(sub.func, ast.Attribute) else name
                if attr in _FILE_READS or name in _FILE_READS:
                    return True
        return False

    def _reflective(self, node: ast.Call, func: str, target: ast.AST, attr_node: ast.AST) -> None:
        """getattr/setattr/delattr/hasattr/__getattribute__ with a constant or computed name."""
        attr = fold_str(attr_node)
        rooted = self.resolver.rooted(target)
        if attr is not None:
            base = self.resolver.name(target)
            if base:
                self.check_reference(node, f"{base}.{attr}", rooted)
            self._attribute(node, attr, f" via {func}")
        elif rooted or self.resolver.builtin_type(target):
            self._dynamic(node, f"{func}() on {self.resolver.name(target) or ast.unparse(target)} with a computed name")
        if func in {"setattr", "delattr"}:
            self._check_write(node, target)
            if attr in NAMESPACE_NAMES:
                self._namespace(node, f"{func}(..., {attr!r})")

    def _imported(self, node: ast.AST, modules: list[str]) -> None:
        for mod in modules:
            canon = canonical(mod)
            for rule in self._rules("import"):
                if _matches(mod, rule.names) or _matches(canon, rule.names):
                    self.fire(rule, node, f"imports {mod}")
            self.check_reference(node, mod, True)

    def visit_Import(self, node: ast.Import) -> None:
        self._imported(node, [a.name for a in node.names])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            self._imported(node, [node.module] + [f"{node.module}.{a.name}" for a in node.names])

    # -- writes ----------------------------------------------------------
    def _check_write(self, node: ast.AST, target: ast.AST) -> None:
        if self.resolver.rooted(target):
            for rule in self._rules("module_attr_write"):
                self.fire(rule, node, f"patches {self.resolver.name(target) or ast.unparse(target)}")

    def _visit_targets(self, node: ast.AST, targets: list[ast.AST]) -> None:
        for t in targets:
            if isinstance(t, ast.Attribute):
                self._check_write(node, t)
            if isinstance(t, ast.Subscript) and self.resolver.is_namespace_call(t.value):
                self._namespace(node, f"writes {ast.unparse(t)}")
            elif isinstance(t, ast.Subscript) and self.resolver.rooted(t.value):
                # item assignment is a call of __setitem__ (sys.path[0:0] = [...])
                self.check_reference(node, f"{self.resolver.name(t.value)}.__setitem__", True)
            if isinstance(t, ast.Name) and t.id in CMP_DUNDERS:
                value = getattr(node, "value", None)
                if value is not None and constant_compare(value):
                    for rule in self._rules("eq_constant"):
                        self.fire(rule, node, f"{t.id} always returns a constant")
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
    def _strings(self, node: ast.AST, value: str) -> None:
        for rule in self._rules("string"):
            if any(re.search(p, value) for p in rule.patterns):
                self.fire(rule, node, f"string {value[:60]!r}")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.docstrings:
            self._strings(node, node.value)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        value = fold_str(node)  # 'te' + 'sts/': judged as the string it builds
        if value is not None:
            self._strings(node, value)
        self.generic_visit(node)

    visit_JoinedStr = visit_BinOp

    def visit_Dict(self, node: ast.Dict) -> None:
        keys = [k for k in node.keys if k is not None]
        if (
            len(keys) == len(node.keys)
            and all(map(_is_constant_literal, keys))
            and all(map(_is_constant_literal, node.values))
        ):
            for rule in self._rules("literal_table"):
                if len(keys) >= rule.min_entries:
                    self.fire(rule, node, f"literal table with {len(keys)} constant keys")
        self.generic_visit(node)
