"""Self-proposed bugs in real code (SWE-smith's model-written bugs): the policy
is shown one function of a seed project that the project's passing tests call,
and rewrites it with a bug. The rewritten function replaces the original in
its file and the mutation proposer's task builder takes over: the project's
own tests decide whether it is a task (some test must fail; the failing ones
become the required tests, the statement is written from their messages, never
by the model) and validation runs as for every task. The task keeps the seed's
layout (workspace = the bugged project, reference = the original file), so it
is a `mutation` task with operator `llm_rewrite` and the proposal's lineage in
`source.meta.proposal`.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

from touchstone.tasks.mutate import Mutation
from touchstone.taskmaking.proposers.common import Candidate, reject
from touchstone.taskmaking.proposers.llm import ProposalError, json_object
from touchstone.taskmaking.proposers.mutation import SeedReport, build_candidate
from touchstone.tasks.schema import TaskSource, load_task_set
from touchstone.tasks.seeding import Seed
from touchstone.taskmaking.similarity import normalized_dump
from touchstone.taskmaking.validate import ValidationConfig
from touchstone import pyast

OPERATOR = "llm_rewrite"
SYSTEM_PROMPT = """You introduce realistic bugs into real Python code, to train a coding agent to find and fix them.
You are shown one function of a project with a test suite. Reply with ONE JSON object and nothing else:
  "function": the complete function rewritten with one subtle bug (same name and signature) that the
              project's tests would catch. No comment or name may reveal the bug."""


@dataclass(frozen=True)
class Site:
    """A function of a seed project that its passing tests call."""

    seed: Seed
    report: SeedReport
    path: str
    qualname: str

    @property
    def unit(self) -> str:  # as the mutation proposer names it, so held-out exclusion applies
        return f"{self.seed.name.split('==')[0]}:{self.seed.module_of(self.path)}:{self.qualname}"


def _find(tree: ast.AST, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    head, _, rest = qualname.partition(".")
    for node in getattr(tree, "body", []):
        if getattr(node, "name", None) != head:
            continue
        if not rest and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
        if rest and isinstance(node, ast.ClassDef):
            return _find(node, rest)
    return None


def sites(usable: list[tuple[Seed, SeedReport]], exclude_units: set[str]) -> list[Site]:
    """Covered functions of the usable seeds that hold no held-out unit (sorted, so a seed draws the same)."""
    found = []
    for seed, report in usable:
        for path in seed.sources:
            tree = pyast.parse((seed.root / path).read_text())
            names = report.covered.get(path, {}) if report.covered else {}
            for qualname in sorted(names):
                site = Site(seed, report, path, qualname)
                if site.unit not in exclude_units and _find(tree, qualname) is not None:
                    found.append(site)
    return found


def _span(node: ast.AST) -> tuple[int, int]:
    """0-based [start, end) lines of a definition, its decorators included."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1, node.end_lineno


def function_source(site: Site) -> str:
    """The function as the policy sees it: decorators included, dedented."""
    text = (site.seed.root / site.path).read_text()
    start, end = _span(_find(pyast.parse(text), site.qualname))
    return textwrap.dedent("".join(text.splitlines(keepends=True)[start:end]))


def bug_messages(site: Site) -> list[dict]:
    user = (
        f"Project: {site.seed.name}\nFile: {site.path}\nFunction: {site.qualname}\n\n"
        f"```python\n{function_source(site)}\n```\n\nRewrite this function with one bug."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def rewritten_file(text: str, site: Site) -> str:
    """The seed file with the site's function replaced by the model's rewrite.
    Raises ProposalError naming what is wrong with the answer."""
    value = json_object(text).get("function")
    if not isinstance(value, str) or not value.strip():
        raise ProposalError("no 'function' string in the answer")
    new = textwrap.dedent(value).strip("\n")
    try:
        body = pyast.parse(new).body
    except SyntaxError as exc:
        raise ProposalError(f"function does not parse: line {exc.lineno}: {exc.msg}") from None
    original_text = (site.seed.root / site.path).read_text()
    node = _find(pyast.parse(original_text), site.qualname)
    defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(body) != 1 or len(defs) != 1 or defs[0].name != node.name:
        raise ProposalError(f"the answer must be exactly one function named {node.name!r}")
    if normalized_dump(defs[0]) == normalized_dump(pyast.parse(function_source(site)).body[0]):
        raise ProposalError("the rewritten function is the original program")
    lines = original_text.splitlines(keepends=True)
    start, end = _span(node)
    indented = textwrap.indent(new, " " * node.col_offset) + "\n"
    return "".join(lines[:start]) + indented + "".join(lines[end:])


def bug_candidate(
    task_id: str, text: str, site: Site, lineage: dict, cfg: ValidationConfig, duplicate: bool = False
) -> Candidate:
    """Parse now; the task is built (the project's tests run on the bug) and
    validated later. `duplicate`: the same rewrite of the same function came earlier."""
    meta = {"path": site.path, "proposal": lineage}
    source = TaskSource(proposer="mutation", origin=site.seed.name, unit=site.unit, operator=OPERATOR, meta=meta)
    try:
        new_file = rewritten_file(text, site)
    except ProposalError as exc:
        verdict = reject(task_id, "malformed", str(exc))
        return Candidate(task_id, source, lambda _d: verdict)
    if duplicate:
        verdict = reject(task_id, "duplicate", f"the same bug in {site.unit} is already a task or proposal this round")
        return Candidate(task_id, source, lambda _d: verdict)
    node = _find(pyast.parse((site.seed.root / site.path).read_text()), site.qualname)
    mutation = Mutation(
        operator=OPERATOR, path=site.path, unit=site.unit.split(":", 1)[1], lineno=node.lineno, source=new_file
    )
    source = source.model_copy(update={"meta": {**meta, "lineno": node.lineno}})
    return Candidate(
        task_id, source, lambda d: build_candidate(site.seed, site.report, mutation, d, cfg, source=source)
    )


def answer_digest(text: str) -> str | None:
    """What identifies a rewrite for deduplication: its function, normalized (None: no function)."""
    try:
        value = json_object(text).get("function")
        body = pyast.parse(textwrap.dedent(value)).body if isinstance(value, str) else []
    except (ProposalError, SyntaxError):
        return None
    return normalized_dump(body[0]) if len(body) == 1 else None


def pool_digests(pool: list[Path]) -> set[tuple[str, str]]:
    """(unit, normalized bugged function) of the pool's seed-project tasks, so a
    rewrite equal to a mutation task of this round is a duplicate."""
    found = set()
    for root in pool:
        for task in load_task_set(root):
            path, unit = task.source.meta.get("path"), task.source.unit
            if task.source.proposer != "mutation" or not path or not (task.workspace_dir / path).is_file():
                continue
            node = _find(pyast.parse((task.workspace_dir / path).read_text()), unit.rsplit(":", 1)[-1])
            if node is not None:
                found.add((unit, normalized_dump(node)))
    return found
