"""Does a task's workspace (or statement) reveal its answer? Static, host-side.

1. Artifacts that carry history, stale copies or opaque payloads, by name
   (VCS directories, caches, backups, patches) *and by content*: bytecode by
   its magic number, archives and compressed streams by their magic bytes, git
   object stores and bare repositories under any name, any other binary file.
2. The reference's change as a token stream: each changed run of reference
   lines (widened with its neighbours until it is long enough to be
   distinctive) must not appear, formatting-free, in the statement, in any
   non-Python workspace file, or in the comments and string literals of the
   workspace's Python files (a solution commented out in the stub, pasted into
   a docstring). Every carrier is also searched decoded: base64, hex, character
   codes, reversed, rot13, zlib.
3. The hidden test cases: a statement that lists the tests' inputs with their
   expected outputs (read from `assert f(x) == y`, `assert f(x) is True` and
   `pytest.mark.parametrize` rows of the hidden tests) hands over the answers a
   solution could copy. Rejected when it holds at least `MIN_LISTED_CASES` of
   them and at least half of all (formatting, quotes and case aside, each
   expected value near its input); an example or two is an honest statement.
4. Live code: a function of the reference's change defined again, same name
   and same normalized AST, anywhere in the workspace (a stale copy, a second
   definition behind a flag). A *sibling* with another name and the same body
   is ordinary duplicated code, not a leak; whether such code already solves
   the task is decided by running the hidden tests (validation's dynamic leak
   check), not by looking.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import fnmatch
import io
import re
import tokenize
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from touchstone.tasks.mutate import changed_lines
from touchstone.tasks.schema import Task
from touchstone.taskmaking.similarity import normalized_dump, tokens
from touchstone import pyast

ARTIFACTS = [
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    "__pycache__",
    "*.pyc",
    "*.pyo",
    ".pytest_cache",
    "*.orig",
    "*.rej",
    "*.bak",
    "*.swp",
    "*~",
    ".#*",
    "*.patch",
    "*.diff",
]
MIN_TOKENS = 4  # a shorter changed span is widened with context: `return x` alone reveals nothing
LINE_TOKENS = 8  # a line (or run of lines) of a longer change this long is distinctive on its own
MAGIC = [
    (b"PK\x03\x04", "zip archive"),
    (b"PK\x05\x06", "zip archive"),
    (b"\x1f\x8b", "gzip stream"),
    (b"BZh", "bzip2 stream"),
    (b"\xfd7zXZ\x00", "xz stream"),
    (b"7z\xbc\xaf\x27\x1c", "7z archive"),
    (b"PACK", "git pack"),
    (b"\xfftOc", "git pack index"),
    (b"DIRC", "git index"),
    (b"SQLite format 3\x00", "sqlite database"),
    (b"\x28\xb5\x2f\xfd", "zstd stream"),
]
_B64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?:\\x)?(?:[0-9a-fA-F]{2}(?:\\x|[ :])?){8,}")


def find_leaks(task: Task) -> list[str]:
    """Problems found, each naming the file; empty when the task leaks nothing."""
    ws = task.workspace_dir
    problems = [f"workspace/{p.relative_to(ws).as_posix()}: {why}" for p, why in artifacts(ws)]
    problems += listed_test_cases(task)
    ref_dir = task.reference_dir
    if ref_dir is None:
        return problems
    prints, funcs = answer_fingerprints(task)
    carriers = {"task.json statement": task.statement}
    for p in sorted(ws.rglob("*")):
        if p.is_file() and not p.is_symlink() and (text := _read_text(p)) is not None:
            carriers[f"workspace/{p.relative_to(ws).as_posix()}"] = _inert_text(text) if p.suffix == ".py" else text
            if p.suffix == ".py":
                problems += [f"workspace/{p.relative_to(ws).as_posix()}: {why}" for why in _live_copies(text, funcs)]
    for where, text in carriers.items():
        for how, variant in decodings(text):
            hit = _contains(variant, prints)
            if hit:
                problems.append(f"{where}: contains the reference's change to {hit}" + (f" ({how})" if how else ""))
                break
    return problems


# -- 1. artifacts ------------------------------------------------------------------------


def artifacts(root: Path) -> list[tuple[Path, str]]:
    found = []
    for p in sorted(root.rglob("*")):
        if any(fnmatch.fnmatch(p.name, pat) for pat in ARTIFACTS):
            found.append((p, "history/cache/backup artifact"))
        elif p.is_dir() and _is_git_store(p):
            found.append((p, "git object store / repository (under another name)"))
        elif p.is_file() and not p.is_symlink() and (kind := sniff(p)):
            found.append((p, kind))
    return found


def _is_git_store(d: Path) -> bool:
    """A bare repository or a .git directory renamed: HEAD plus objects/ or refs/."""
    return (d / "HEAD").is_file() and ((d / "objects").is_dir() or (d / "refs").is_dir())


def sniff(path: Path) -> str | None:
    """What a file's bytes say it is, when that is bytecode, a container or binary."""
    with path.open("rb") as f:
        head = f.read(8192)
    if len(head) >= 16 and head[2:4] == b"\r\n" and 2900 <= int.from_bytes(head[:2], "little") < 4000:
        return "Python bytecode (by magic number)"
    for magic, kind in MAGIC:
        if head.startswith(magic):
            return f"{kind} (by magic bytes)"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "tar archive (by magic bytes)"
    if head[:1] == b"\x78" and len(head) >= 2 and (head[0] * 256 + head[1]) % 31 == 0:
        try:
            if re.match(rb"(blob|tree|commit|tag) \d+\x00", zlib.decompressobj().decompress(head, 64)):
                return "git loose object (zlib)"
        except zlib.error:
            pass
        return "zlib stream"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        return "pickle data"
    if b"\x00" in head:
        return "binary file"
    return None


# -- 2. the change as tokens, in any carrier ---------------------------------------------


def answer_fingerprints(task: Task) -> tuple[dict[str, list[tuple[str, ...]]], dict[str, set[str]]]:
    """Per reference file: the token streams of its changed spans; and the
    normalized ASTs of the reference's changed functions, by name."""
    ref, ws = task.reference_dir, task.workspace_dir
    prints: dict[str, list[tuple[str, ...]]] = {}
    funcs: dict[str, set[str]] = {}
    for path in sorted(p for p in ref.rglob("*") if p.is_file()) if ref else []:
        rel = path.relative_to(ref).as_posix()
        text = _read_text(path)
        if text is None:
            continue
        current = ws / rel
        old = _read_text(current) if current.is_file() else None
        prints[rel] = changed_spans(text, old)
        if path.suffix == ".py":
            for name, dump in changed_defs(text, old).items():
                funcs.setdefault(name, set()).add(dump)
    return prints, funcs


def changed_spans(reference: str, workspace: str | None) -> list[tuple[str, ...]]:
    """Token streams of the reference's changed line runs, each widened with
    neighbouring lines until it has MIN_TOKENS tokens, and of every run of
    consecutive changed lines with LINE_TOKENS tokens (so one line copied out of
    a long change is found too)."""
    ref = reference.splitlines()
    spans: list[tuple[str, ...]] = []
    for j1, j2 in _runs(changed_lines(reference, workspace)):  # the diff every check shares (head and tail cut)
        if not any(line.strip() for line in ref[j1:j2]):
            continue
        lo, hi = j1, j2
        toks = tokens("\n".join(ref[lo:hi]))
        while len(toks) < MIN_TOKENS and (lo > 0 or hi < len(ref)):
            lo, hi = max(0, lo - 1), min(len(ref), hi + 1)
            toks = tokens("\n".join(ref[lo:hi]))
        if len(toks) >= MIN_TOKENS:
            spans.append(tuple(toks))
        for start in range(j1, j2):
            end = start + 1
            while len(line := tokens("\n".join(ref[start:end]))) < LINE_TOKENS and end < j2:
                end += 1
            if len(line) >= LINE_TOKENS and tuple(line) not in spans:
                spans.append(tuple(line))
    return spans


def _runs(lines: set[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive 1-based line numbers, as 0-based [start, end) slices."""
    runs: list[tuple[int, int]] = []
    for n in sorted(lines):
        if runs and runs[-1][1] == n - 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n - 1, n))
    return runs


def _contains(text: str, prints: dict[str, list[tuple[str, ...]]]) -> str | None:
    hay = "\x00" + "\x00".join(tokens(text)) + "\x00"
    for rel, spans in prints.items():
        if any("\x00" + "\x00".join(s) + "\x00" in hay for s in spans):
            return rel
    return None


def _inert_text(source: str) -> str:
    """What a Python file says but does not run: its comments (without `#`) and
    string literals (evaluated, so escapes are decoded), one per line."""
    parts: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                parts.append(tok.string.lstrip("#"))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source  # not Python after all: all of it is inert text
    try:
        tree = pyast.parse_shared(source)
    except (SyntaxError, ValueError):
        return source
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            parts.append(value)
        elif isinstance(node, (ast.List, ast.Tuple)) and (codes := _char_codes(node)):
            parts.append(codes)
    return "\n".join(parts)


def _char_codes(node: ast.List | ast.Tuple) -> str | None:
    """`[114, 101, 116, ...]`: printable character codes spelled as a list."""
    values = [e.value for e in node.elts if isinstance(e, ast.Constant) and type(e.value) is int]
    if len(values) >= 8 and len(values) == len(node.elts) and all(9 <= v < 127 for v in values):
        return "".join(map(chr, values))
    return None


def decodings(text: str, depth: int = 2) -> Iterator[tuple[str, str]]:
    """(how, variant) of a carrier: as is, reversed, rot13, and every base64 /
    hex blob in it decoded (zlib-inflated when it is compressed), recursively."""
    yield "", text
    yield "reversed", text[::-1]
    yield "rot13", codecs.decode(text, "rot13")
    if depth == 0:
        return
    for blob, how in _blobs(text):
        for sub_how, variant in decodings(blob, depth - 1):
            yield (f"{how}, {sub_how}" if sub_how else how), variant


def _blobs(text: str) -> Iterator[tuple[str, str]]:
    for m in _B64.finditer(text):
        raw = m.group(0)
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                data = decode(raw + "=" * (-len(raw) % 4))
            except (binascii.Error, ValueError):
                continue
            if (s := _printable(data)) is not None:
                yield s, "base64"
                break
    for m in _HEX.finditer(text):
        digits = re.sub(r"\\x|[ :]", "", m.group(0))
        try:
            data = bytes.fromhex(digits[: len(digits) // 2 * 2])
        except ValueError:
            continue
        if (s := _printable(data)) is not None:
            yield s, "hex"


def _printable(data: bytes) -> str | None:
    try:
        data = zlib.decompress(data)
    except zlib.error:
        pass
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s if s and sum(c.isprintable() or c in "\n\t" for c in s) / len(s) > 0.95 else None


# -- 3. the hidden test cases, listed in the statement ---------------------------------------

MIN_LISTED_CASES = 3  # fewer is an example or two
CASE_WINDOW = 12  # tokens between an input and its expected value


def hidden_test_cases(tests_dir: Path) -> list[tuple[str, str]]:
    """(input, expected) source pairs of the hidden tests' literal checks: `assert
    call(args) == literal` (either side), `assert call(args) is True/False/None`,
    and `pytest.mark.parametrize` rows (the last item is the expected value)."""
    cases: list[tuple[str, str]] = []
    for path in sorted(tests_dir.rglob("*.py")):
        try:
            tree = pyast.parse(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert) and (case := _asserted_case(node.test)):
                cases.append(case)
            elif isinstance(node, ast.Call) and _is_parametrize(node.func) and len(node.args) >= 2:
                rows = node.args[1]
                for row in rows.elts if isinstance(rows, (ast.List, ast.Tuple)) else []:
                    if isinstance(row, ast.Tuple) and len(row.elts) >= 2 and _literal(row.elts[-1]):
                        cases.append((", ".join(ast.unparse(e) for e in row.elts[:-1]), ast.unparse(row.elts[-1])))
    return list(dict.fromkeys(cases))


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _asserted_case(test: ast.expr) -> tuple[str, str] | None:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is))):
        return None
    for call, want in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        if isinstance(call, ast.Call) and call.args and _literal(want) and not isinstance(want, ast.Call):
            return ", ".join(ast.unparse(a) for a in call.args), ast.unparse(want)
    return None


def _is_parametrize(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "parametrize"


def _case_tokens(text: str) -> list[str]:
    """Tokens for finding a case in prose: lowercased, quotes dropped."""
    return [t.lower() for t in tokens(text) if t not in ("'", "`")]


def _find_all(hay: list[str], needle: list[str]) -> list[int]:
    n = len(needle)
    return [i for i in range(len(hay) - n + 1) if hay[i : i + n] == needle] if n else []


def _listed(hay: list[str], given: str, expected: str) -> bool:
    """Does `hay` hold the input with its expected value near it (either order)?"""
    ins, outs = _find_all(hay, _case_tokens(given)), _find_all(hay, _case_tokens(expected))
    n_in, n_out = len(_case_tokens(given)), len(_case_tokens(expected))
    return any(0 <= o - (i + n_in) <= CASE_WINDOW or 0 <= i - (o + n_out) <= CASE_WINDOW for i in ins for o in outs)


def listed_test_cases(task: Task) -> list[str]:
    """A finding when the statement lists the hidden tests' cases (input and expected output)."""
    cases = hidden_test_cases(task.hidden_tests_dir)
    hay = _case_tokens(task.statement)
    listed = [(given, want) for given, want in cases if _listed(hay, given, want)]
    if len(listed) < MIN_LISTED_CASES or len(listed) * 2 < len(cases):
        return []
    shown = "; ".join(f"{given} -> {want}" for given, want in listed[:3])
    return [
        f"task.json statement: lists {len(listed)} of the {len(cases)} hidden test cases with their "
        f"expected outputs (e.g. {shown}): a solution could copy the answers"
    ]


# -- 4. live copies of a changed function ----------------------------------------------------


def changed_defs(reference: str, workspace: str | None) -> dict[str, str]:
    """name -> normalized dump of every function (at any depth) of the reference
    that the workspace does not define the same way (docstrings and names aside)."""
    # a function none of whose lines changed is in the workspace as it is: only the others are normalized
    lines = changed_lines(reference, workspace) if workspace is not None else None
    ref = _defs(reference, lambda n: lines is None or any(i in lines for i in range(n.lineno, n.end_lineno + 1)))
    old = _defs(workspace, lambda n: n.name in ref) if workspace is not None else {}
    return {name: dump for name, dump in ref.items() if old.get(name) != dump}


def _defs(source: str, wanted: Callable[[ast.AST], bool] = lambda n: True) -> dict[str, str]:
    try:
        tree = pyast.parse_shared(source)
    except SyntaxError:
        return {}
    out: dict[str, str] = {}
    for n in ast.walk(tree):  # breadth first: a name's outermost definition wins
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name not in out and wanted(n):
            out[n.name] = normalized_dump(pyast.parse(ast.unparse(n)))
    return out


def _live_copies(source: str, funcs: dict[str, set[str]]) -> list[str]:
    if not funcs:
        return []
    try:
        tree = pyast.parse_shared(source)
    except SyntaxError:
        return []
    found = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in funcs:
            if normalized_dump(pyast.parse(ast.unparse(n))) in funcs[n.name]:
                found.append(f"defines {n.name} (line {n.lineno}) exactly as the reference does")
    return found


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


# -- 5. probes for the dynamic check (run by validation) ---------------------------------------

# keyed by (type, value): in a plain dict True and 1 (and False and 0) are one key
_FLAG_VALUES = {(bool, True): "False", (bool, False): "True", (int, 0): "1", (int, 1): "0", (type(None), None): "True"}


def flag_probes(source: str) -> list[tuple[str, str]]:
    """(description, text) of `source` with its module-level flags flipped: all
    at once, then each alone. A flag is a top-level `NAME = True/False/0/1/None`."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    flags = [
        n
        for n in tree.body
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and isinstance(n.value, ast.Constant)
        and (type(n.value.value), n.value.value) in _FLAG_VALUES
        and n.lineno == n.end_lineno
    ]
    if not flags:
        return []
    lines = source.splitlines(keepends=True)

    def flipped(chosen: list[ast.Assign]) -> str:
        out = list(lines)
        for n in chosen:
            name = n.targets[0].id
            out[n.lineno - 1] = f"{' ' * n.col_offset}{name} = {_FLAG_VALUES[type(n.value.value), n.value.value]}\n"
        return "".join(out)

    probes = [(f"flags {', '.join(n.targets[0].id for n in flags)} flipped", flipped(flags))]
    if len(flags) > 1:
        probes += [(f"flag {n.targets[0].id} flipped", flipped([n])) for n in flags]
    return probes


def definers(modules: dict[str, str], function: str, exclude: str) -> list[str]:
    """Workspace modules other than `exclude` that define `function` at top level
    (or bind it by assignment), in path order."""
    out = []
    for rel, text in modules.items():
        if rel == exclude:
            continue
        try:
            tree = pyast.parse(text)
        except SyntaxError:
            continue
        if any(
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name == function
            or isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == function for t in n.targets)
            for n in tree.body
        ):
            out.append(rel)
    return out
