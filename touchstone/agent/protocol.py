"""The text tool protocol: tool calling for chat models whose own template has no tools.

SmolLM2's chat template is plain ChatML: it cannot render `tools` or `tool_calls`. SmolLM2
was tuned on function calling in one format (its model card, the APIGen part of SmolTalk):
the tools as JSON inside `<tools>...</tools>` in the system message, and a reply that is
`<tool_call>[{"name": ..., "arguments": {...}}]</tool_call>`. `TOOL_TEMPLATE` is that
ChatML with the tools described this way, tool results as `<tool_response>` user turns, and
the assistant's text rendered verbatim inside `{% generation %}` markers (SFT's assistant
masks). A checkpoint whose chat template carries `MARKER` speaks this protocol
(`speaks_text_protocol`); the `hf:` policy then reads replies with `parse_reply`.

Why the assistant's raw text is the record: the template renders a reply's `content` as it is,
so a trajectory re-rendered for training is exactly the tokens the model sampled (the calls
are derived from the text, not re-serialized into it). A message whose content holds no call
(a run of the teacher, whose calls live in `tool_calls` only) gets its calls written after its
text in the protocol's format, so teacher rows, when a round asks for them, teach the same
format the model is read in.

`parse_reply` never raises: a reply it cannot read is an assistant message with a nameless
call (or none), which the loop records as an invalid turn with an error observation.

A ```python block is an edit where the conversation makes it one: asked to fix a function whose
source the conversation shows (a user message saying "the function `NAME` in `PATH`" followed by
that source in a ```python block, as curriculum level 1 states its tasks), a small instruct model
answers with the corrected function in a ```python block far more often than with a call. Such
a block, when it defines that function (same name) and holds no call, is read as
`str_replace(PATH, shown source, block)`, re-indented to the shown source's indentation. The
reply stays the record verbatim (the template renders a reply holding a ```python block as it is).
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from typing import Any, NamedTuple

MARKER = "touchstone-text-tool-protocol-v1"
CALL_END = "</tool_call>"
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

TOOL_TEMPLATE = (
    "{#- " + MARKER + ": ChatML with tools in the system message (SmolLM2's function-calling format); "
    "the assistant's text is rendered verbatim (touchstone/agent/protocol.py) -#}\n"
    "{%- macro tools_block() -%}\n"
    "{%- if tools -%}\n"
    "{{- '\\n\\nYou have access to the following tools:\\n<tools>[' -}}\n"
    "{%- for tool in tools -%}{{- (tool.function if tool.function is defined else tool) | tojson -}}"
    "{{- ', ' if not loop.last else '' -}}{%- endfor -%}\n"
    "{{- ']</tools>\\n\\nTo call a tool, reply with exactly one call in this format:\\n"
    '<tool_call>[{"name": "tool_name", "arguments": {"argument": "value"}}]</tool_call>\' -}}\n'
    "{%- endif -%}\n"
    "{%- endmacro -%}\n"
    "{%- for message in messages -%}\n"
    "{%- if loop.first and message['role'] != 'system' -%}\n"
    "{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM + "' + tools_block() + '<|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- if message['role'] == 'system' -%}\n"
    "{{- '<|im_start|>system\\n' + message['content'] + tools_block() + '<|im_end|>\\n' -}}\n"
    "{%- elif message['role'] == 'assistant' -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- generation -%}{{- message['content'] -}}\n"
    # a run of another policy (the teacher's): its calls written as this protocol writes them
    "{%- if message.tool_calls and '<tool_call>' not in message['content'] and '\"name\"' not in message['content']"
    " and '```python' not in message['content'] -%}\n"
    "{{- ('\\n' if message['content'] else '') + '<tool_call>[' -}}\n"
    "{%- for call in message.tool_calls -%}"
    "{{- {'name': call.function.name, 'arguments': call.function.arguments} | tojson -}}"
    "{{- ', ' if not loop.last else '' -}}{%- endfor -%}\n"
    "{{- ']</tool_call>' -}}\n"
    "{%- endif -%}\n"
    "{{- '<|im_end|>' -}}{%- endgeneration -%}\n"
    "{{- '\\n' -}}\n"
    "{%- elif message['role'] == 'tool' -%}\n"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' -}}\n"
    "{%- else -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n"
)

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_PYTHON_FENCE = re.compile(r"```python[^\n]*\n(.*?)(?:```|$)", re.S)
_SHOWN = re.compile(
    r"the function `(?P<name>[\w.]+)` in `(?P<path>[^`\n]+)`[^`]*?```python\n(?P<code>.*?)\n```", re.S | re.I
)
_FENCE = re.compile(r"```[ \t]*(\w*)[^\n]*\n(.*?)(?:```|$)", re.S)


def speaks_text_protocol(tokenizer) -> bool:
    template = getattr(tokenizer, "chat_template", None)
    template = template.get("default", "") if isinstance(template, dict) else template or ""
    return MARKER in template


def parse_reply(text: str, turn: int, shown: dict[str, ShownFunction] | None = None) -> dict[str, Any]:
    """The assistant message a reply says: `content` is the reply verbatim; `tool_calls`
    holds the calls found, in order (the loop runs the first). Where they are looked for,
    first match wins: `<tool_call>` blocks (a JSON list of calls or one call; a missing closing
    tag is tolerated, as a reply cut off by the token limit has none), then ```json / ```
    fences, then the first bare JSON object with a `name`. A reply that has call markup but
    no readable call gets one nameless call whose arguments are the unreadable text, so the
    loop records an error observation (an invalid turn), never a crash."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    found, unreadable = _calls(text)
    if not found and unreadable is None:
        found = _code_edits(text, shown or {})
    if not found and unreadable is not None:
        found = [("", unreadable)]
    if found:
        message["tool_calls"] = [
            {"id": f"call_{turn}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(found)
        ]
    return message


def _calls(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """(calls, the first unreadable candidate's text or None)."""
    unreadable = None
    for candidates in (_tool_call_blocks(text), _fenced(text), _bare_objects(text)):
        calls = []
        for candidate in candidates:
            read = _read_calls(candidate)
            if read:
                calls += read
            elif unreadable is None:
                unreadable = candidate
        if calls:
            return calls, None
    return [], unreadable


def _tool_call_blocks(text: str) -> list[str]:
    return [m.group(1).strip() for m in _TOOL_CALL.finditer(text)]


def _fenced(text: str) -> list[str]:
    return [
        body.strip()
        for lang, body in _FENCE.findall(text)
        if lang.lower() in ("", "json", "tool_call") and '"name"' in body
    ]


def _bare_objects(text: str) -> list[str]:
    """Each top-level `{...}` span that mentions a name (a call written without markup)."""
    spans, depth, start, quoted, escaped = [], 0, 0, False, False
    for i, ch in enumerate(text):
        if quoted:  # inside a JSON string: braces do not count
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"' and depth:  # quotes of the prose around an object do not count either
            quoted = True
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0 and '"name"' in text[start : i + 1]:
                spans.append(text[start : i + 1])
    return spans


def _read_calls(candidate: str) -> list[tuple[str, str]]:
    """Calls in one candidate: a JSON list of {name, arguments} objects or one such object
    (also with OpenAI's {"function": {...}} nesting). Arguments become a JSON string (a string
    value is kept as the model wrote it: the tool's own validation reports it). [] if unreadable."""
    try:
        value = json.loads(candidate)
    except (json.JSONDecodeError, RecursionError):
        return []
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("function"), dict):
            item = item["function"]
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return []
        args = item.get("arguments", item.get("parameters", {}))
        calls.append((item["name"], args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)))
    return calls


class ShownFunction(NamedTuple):
    path: str
    source: str  # as the conversation showed it (the file's text, indentation included)


def shown_functions(messages: list[dict[str, Any]]) -> dict[str, ShownFunction]:
    """Functions the conversation's user messages show with their file, by bare name (the last
    part of `Class.method`): what a ```python block in a reply may redefine as an edit."""
    shown = {}
    for msg in messages:
        if msg.get("role") == "user" and isinstance(msg.get("content"), str):
            for m in _SHOWN.finditer(msg["content"]):
                shown[m["name"].rsplit(".", 1)[-1]] = ShownFunction(m["path"], m["code"])
    return shown


def _code_edits(text: str, shown: dict[str, ShownFunction]) -> list[tuple[str, str]]:
    """The first ```python block that parses and defines one shown function, as a
    `str_replace` call on its file ([] when none does)."""
    for block in _PYTHON_FENCE.findall(text):
        code = textwrap.dedent(block).strip("\n")
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        target = shown.get(names[0]) if len(names) == 1 else None
        if target is None or code == textwrap.dedent(target.source).strip("\n"):
            continue  # not an edit of a shown function (or the same source again)
        indent = target.source[: len(target.source) - len(target.source.lstrip())]
        new = textwrap.indent(code, indent).lstrip() if indent else code
        old = target.source.strip()
        args = {"path": target.path, "old": old, "new": new}
        return [("str_replace", json.dumps(args, ensure_ascii=False))]
    return []
