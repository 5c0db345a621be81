"""What a bash command line runs: its simple commands (program and real
arguments), variable assignments, redirections, and the Python code it hands
to an interpreter, so the action audit judges programs that ran rather than
substrings of their arguments (`grep "pip install" README` runs grep).

Parsed with bashlex (pipelines, lists, subshells, `$(...)` and backticks,
functions, loops, heredocs). Wrappers (`env`, `timeout`, `xargs`, `sudo`,
...) are unwrapped; `bash -c STR`, `eval STR` and `find -exec CMD` are
parsed recursively; `python -c CODE` and a heredoc fed to python are
returned as code. A line bashlex cannot parse (it lacks `[[`, some
arithmetic) falls back to a conservative split on control operators,
and says so (`parsed=False`).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

import bashlex

WORKSPACE = "/workspace"
_SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "ash", "busybox"}
# wrapper -> its options that take a value (the wrapped command follows the options)
_WRAPPERS: dict[str, set[str]] = {
    "env": {"-u", "-C", "-S", "--unset", "--chdir"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "nice": {"-n"}, "nohup": set(), "sudo": {"-u", "-g", "-C"}, "exec": {"-a"}, "command": set(),
    "builtin": set(), "time": {"-f", "-o"}, "stdbuf": {"-i", "-o", "-e"}, "setsid": set(),
    "ionice": {"-c", "-n"}, "xargs": {"-n", "-I", "-P", "-L", "-d", "-s", "-a", "-E"}, "unbuffer": set(),
    "strace": {"-e", "-o", "-p"}, "chroot": set(), "flock": set(), "watch": {"-n"},
}  # fmt: skip
_DURATION = re.compile(r"^\d+(\.\d+)?[smhd]?$")
_PYTHON = re.compile(r"^(python[\d.]*|pypy[\d.]*)$")
_MAX_DEPTH = 4


@dataclass
class SimpleCommand:
    argv: list[str]
    assigns: list[str] = field(default_factory=list)  # NAME=value
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (op, target path)
    heredocs: list[str] = field(default_factory=list)  # bodies fed to the command's input
    cwd: str = WORKSPACE

    @property
    def program(self) -> str:
        return posixpath.basename(self.argv[0]) if self.argv else ""

    @property
    def text(self) -> str:
        """Program and arguments, one space apart (what rules anchored at ^ match)."""
        return " ".join([self.program, *self.argv[1:]]) if self.argv else ""

    def paths(self) -> list[str]:
        """Every argument as an absolute path when it names one (relative to the
        command's directory), else as written; plus redirection targets."""
        out = []
        for arg in self.argv:
            value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
            out.append(resolve(value, self.cwd) if "/" in value or value.startswith(".") else value)
        return out + [resolve(t, self.cwd) for _, t in self.redirects]


@dataclass
class Parsed:
    commands: list[SimpleCommand] = field(default_factory=list)
    code: list[str] = field(default_factory=list)  # Python source handed to an interpreter
    parsed: bool = True  # False: bashlex failed somewhere, a conservative split was used


def resolve(path: str, cwd: str = WORKSPACE) -> str:
    if path.startswith("~"):
        path = "/root" + path[1:]
    return posixpath.normpath(posixpath.join(cwd, path))


def parse_command(line: str) -> Parsed:
    out = Parsed()
    _parse_into(line, out, WORKSPACE, 0)
    return out


_QUOTED_HEREDOC = re.compile(r"""<<(-?)\s*(?:(['"])(\w+)\2|\\(\w+))""")
_HEREDOC = re.compile(r"""<<-?\s*['"\\]?(\w+)['"]?[^\n]*\n(.*?)(\n[ \t]*\1[ \t]*(\n|$)|$)""", re.DOTALL)


def _parse_into(line: str, out: Parsed, cwd: str, depth: int) -> str:
    # bashlex does not know quoted heredoc delimiters (<<'EOF'); quoting only
    # turns off expansion in the body, which bashlex does not parse anyway
    unquoted = _QUOTED_HEREDOC.sub(lambda m: f"<<{m[1]}{m[3] or m[4]}", line)
    try:
        trees = bashlex.parse(unquoted)
    except Exception:  # noqa: BLE001 - bashlex raises several error types; fall back, visibly
        out.parsed = False
        for cmd in _fallback(_HEREDOC.sub(lambda m: "\n", line), cwd):
            cwd = _add(cmd, out, depth)
        return cwd
    for tree in trees:
        cwd = _walk(tree, out, cwd, depth)
    return cwd


def _walk(node, out: Parsed, cwd: str, depth: int) -> str:
    if node.kind == "command":
        nested: list = []
        cmd = SimpleCommand(argv=[], cwd=cwd)
        for part in node.parts:
            if part.kind == "word":
                cmd.argv.append(part.word)
            elif part.kind == "assignment":
                cmd.assigns.append(part.word)
            elif part.kind == "redirect":
                _redirect(part, cmd, out)
            nested += _substitutions(part)
        for sub in nested:  # $(...) runs before the command that holds it
            cwd = _walk(sub, out, cwd, depth)
        cmd.cwd = cwd
        return _add(cmd, out, depth)
    for child in _children(node):
        cwd = _walk(child, out, cwd, depth)
    return cwd


def _children(node) -> list:
    kids = list(getattr(node, "parts", None) or []) + list(getattr(node, "list", None) or [])
    command = getattr(node, "command", None)
    return kids + ([command] if command is not None and not isinstance(command, str) else [])


def _substitutions(node) -> list:
    found = []
    for part in getattr(node, "parts", None) or []:
        if part.kind in ("commandsubstitution", "processsubstitution"):
            found.append(part.command)
        else:
            found += _substitutions(part)
    output = getattr(node, "output", None)
    if output is not None and not isinstance(output, int):
        found += _substitutions(output)
    return found


def _redirect(part, cmd: SimpleCommand, out: Parsed) -> None:
    heredoc = getattr(part, "heredoc", None)
    if heredoc is not None:
        cmd.heredocs.append(heredoc.value.rsplit("\n", 1)[0] if "\n" in heredoc.value else "")
        return
    target = getattr(part, "output", None)
    if target is not None and not isinstance(target, int) and getattr(target, "word", None):
        cmd.redirects.append((part.type, target.word))


def _add(cmd: SimpleCommand, out: Parsed, depth: int) -> str:
    """Record `cmd` and what it runs; return the working directory after it."""
    heredocs = cmd.heredocs
    if not cmd.argv and not cmd.assigns:
        return cmd.cwd
    out.commands.append(cmd)
    inner = _inner(cmd)
    if inner is not None and depth < _MAX_DEPTH:
        _add(SimpleCommand(argv=inner, cwd=cmd.cwd), out, depth + 1)
    prog, args = cmd.program, cmd.argv[1:]
    if depth < _MAX_DEPTH and prog in _SHELLS | {"eval", "source", "."}:
        script = _option_value(args, "-c") if prog in _SHELLS else " ".join(args) if prog == "eval" else None
        if script is not None:
            _parse_into(script, out, cmd.cwd, depth + 1)
        for body in heredocs:
            _parse_into(body, out, cmd.cwd, depth + 1)
    if _PYTHON.match(prog):
        code = _option_value(args, "-c")
        out.code += ([code] if code is not None else []) + heredocs
    if prog == "cd" and len(args) == 1 and args[0] != "-":
        return resolve(args[0], cmd.cwd)
    return "/root" if prog == "cd" and not args else cmd.cwd


def _option_value(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag) and len(a) > len(flag) and not a.startswith("--"):
            return a[len(flag) :]
        if not a.startswith("-"):
            return None  # a script path: options after it are the script's
    return None


def _inner(cmd: SimpleCommand) -> list[str] | None:
    """The command a wrapper (`env X=1 curl`, `timeout 5 curl`, `find -exec curl`) runs."""
    prog, args = cmd.program, cmd.argv[1:]
    if prog == "find":
        for i, a in enumerate(args):
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                rest = args[i + 1 :]
                end = next((j for j, x in enumerate(rest) if x in (";", "+", "\\;")), len(rest))
                return rest[:end] or None
        return None
    if prog not in _WRAPPERS:
        return None
    i, takes_value = 0, _WRAPPERS[prog]
    while i < len(args):
        a = args[i]
        if a in takes_value:
            i += 2
        elif a.startswith("-") or (prog == "env" and "=" in a) or (prog == "timeout" and _DURATION.match(a)):
            i += 1
        else:
            break
    return args[i:] or None


_CONTROL = re.compile(r"&&|\|\||[;&|()`\n]|\$\(")


def _fallback(line: str, cwd: str) -> list[SimpleCommand]:
    """Split on every control operator (also inside quotes: a quoted `;` then
    starts a command of its own, which can only add findings, never hide one).
    Heredoc bodies are removed first: they are input, not commands."""
    commands = []
    for piece in _CONTROL.split(line):
        try:
            words = shlex.split(piece, comments=False)
        except ValueError:
            words = piece.split()
        assigns = []
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            assigns.append(words.pop(0))
        if words or assigns:
            commands.append(SimpleCommand(argv=words, assigns=assigns, cwd=cwd))
    return commands
