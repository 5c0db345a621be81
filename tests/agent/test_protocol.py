"""The text tool protocol (touchstone/agent/protocol.py): its template renders the tools and
keeps the assistant's text verbatim, and its parser reads every reply a small model writes,
well-formed or not, without raising."""

from __future__ import annotations

import json

import pytest
from transformers import PreTrainedTokenizerFast

from touchstone.agent.protocol import TOOL_TEMPLATE, parse_reply, speaks_text_protocol
from touchstone.episode.tools import TOOL_SCHEMAS, call_error, is_valid_call

CALL = '{"name": "bash", "arguments": {"command": "python -m pytest -q"}}'

WELL_FORMED = [
    f"<tool_call>[{CALL}]</tool_call>",  # SmolLM2's own format: a list in the tags
    f"<tool_call>{CALL}</tool_call>",  # one object in the tags
    f"<tool_call>\n[\n{CALL}\n]\n</tool_call>",
    f"Let me run the tests first.\n<tool_call>[{CALL}]</tool_call>",  # a thought before the call
    f"<tool_call>[{CALL}]",  # cut off before the closing tag
    f"```json\n{CALL}\n```",  # a fenced call
    f"```\n[{CALL}]\n```",
    f"I will call {CALL} now.",  # a bare object in prose
    '<tool_call>[{"type": "function", "function": ' + CALL + "}]</tool_call>",  # OpenAI nesting
    '<tool_call>[{"name": "bash", "parameters": {"command": "python -m pytest -q"}}]</tool_call>',  # `parameters`
]


@pytest.mark.parametrize("text", WELL_FORMED)
def test_well_formed_calls_in_every_shape_are_read(text):
    message = parse_reply(text, turn=2)
    assert message["content"] == text  # the model's text is the record, verbatim
    call = message["tool_calls"][0]
    assert call["id"] == "call_2_0" and call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "python -m pytest -q"}
    assert is_valid_call(message)


MALFORMED = [
    "",  # nothing at all
    "   \n\n",
    "I think the bug is in add(). Let me fix it.",  # prose without a call
    "<tool_call>",  # markup only
    "<tool_call></tool_call>",
    '<tool_call>[{"name": "bash", "arguments": {"command": "ls"</tool_call>',  # unbalanced JSON
    "<tool_call>[{'name': 'bash', 'arguments': {'command': 'ls'}}]</tool_call>",  # Python dict, not JSON
    '<tool_call>["bash", "ls"]</tool_call>',  # a list of strings
    '<tool_call>{"arguments": {"command": "ls"}}</tool_call>',  # no name
    '<tool_call>{"name": 7, "arguments": {}}</tool_call>',  # a name that is not a string
    "<tool_call>" + "[" * 5000 + "</tool_call>",  # deep nesting
    '```json\n{"name": "bash", "arguments": \n```',  # a fence cut short
    "```python\ndef add(a, b):\n    return a + b\n```",  # code, no call
    '{"name": "bash", "arguments": {"command": "ls"}',  # a bare object never closed
    '<tool_call>[{"name": "bash", "arguments": {"command": "ls"}}]</tool_call>\x00\udcff',  # odd bytes after
    "<|im_start|>assistant\n<tool_call>",  # the model imitating the template
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_replies_never_raise_and_are_recorded_as_invalid_or_kept_verbatim(text):
    message = parse_reply(text, turn=0)
    assert message["role"] == "assistant" and message["content"] == text
    calls = message.get("tool_calls") or []
    if "<tool_call>" in text and '"command": "ls"}}]' not in text:
        # call markup without a readable call: one nameless call the loop reports as an error
        assert len(calls) == 1 and calls[0]["function"]["name"] == ""
        assert call_error("", calls[0]["function"]["arguments"]).startswith("unknown tool")
    for call in calls:
        assert isinstance(call["function"]["name"], str) and isinstance(call["function"]["arguments"], str)


def test_arguments_of_the_wrong_shape_reach_the_tools_validation():
    message = parse_reply('<tool_call>[{"name": "bash", "arguments": "ls -la"}]</tool_call>', turn=0)
    assert message["tool_calls"][0]["function"]["arguments"] == "ls -la"
    assert not is_valid_call(message)  # the tool says why: not valid JSON


def test_two_calls_are_both_recorded_in_order():
    text = '<tool_call>[{"name": "read_file", "arguments": {"path": "a.py"}}, {"name": "submit", "arguments": {}}]</tool_call>'
    names = [c["function"]["name"] for c in parse_reply(text, turn=0)["tool_calls"]]
    assert names == ["read_file", "submit"]  # the loop runs the first and reports the second as not executed


@pytest.fixture(scope="module")
def tokenizer():
    from training.model_init import default_model

    tok = PreTrainedTokenizerFast.from_pretrained(default_model())
    tok.chat_template = TOOL_TEMPLATE
    return tok


def test_the_template_describes_the_tools_and_keeps_the_reply_verbatim(tokenizer):
    reply = f"Run them.\n<tool_call>[{CALL}]</tool_call>"
    chat = [
        {"role": "system", "content": "Fix the bug."},
        {"role": "user", "content": "add() is wrong"},
        {"role": "assistant", "content": reply, "tool_calls": parse_reply(reply, 0)["tool_calls"]},
        {"role": "tool", "tool_call_id": "call_0_0", "content": "exit code: 1"},
    ]
    text = tokenizer.apply_chat_template(chat, tools=TOOL_SCHEMAS, tokenize=False, add_generation_prompt=True)
    assert speaks_text_protocol(tokenizer)
    assert "<tools>[" in text and '"name": "str_replace"' in text  # the schemas, as SmolLM2 reads them
    assert f"<|im_start|>assistant\n{reply}<|im_end|>\n" in text  # rendered once, as written
    assert "<tool_response>\nexit code: 1\n</tool_response>" in text and text.endswith("<|im_start|>assistant\n")
    enc = tokenizer.apply_chat_template(chat, tools=TOOL_SCHEMAS, return_assistant_tokens_mask=True, return_dict=True)
    masked = [t for t, m in zip(enc["input_ids"], enc["assistant_masks"]) if m]
    assert tokenizer.decode(masked) == reply + "<|im_end|>"  # SFT trains on exactly the model's tokens


def test_a_teacher_message_gets_its_calls_written_in_the_protocol(tokenizer):
    """The teacher's calls live in `tool_calls` (its content is a thought): rendered for training,
    the call is written as the model is asked to write it, and parses back to the same call."""
    call = {"type": "function", "function": {"name": "read_file", "arguments": {"path": "calc.py"}}}
    chat = [
        {"role": "user", "content": "fix add"},
        {"role": "assistant", "content": "Look at the code.", "tool_calls": [call]},
    ]
    enc = tokenizer.apply_chat_template(chat, tools=TOOL_SCHEMAS, return_assistant_tokens_mask=True, return_dict=True)
    trained = tokenizer.decode([t for t, m in zip(enc["input_ids"], enc["assistant_masks"]) if m])
    assert trained.startswith("Look at the code.\n<tool_call>[") and trained.endswith("]</tool_call><|im_end|>")
    parsed = parse_reply(trained.removesuffix("<|im_end|>"), 0)["tool_calls"][0]["function"]
    assert parsed["name"] == "read_file" and json.loads(parsed["arguments"]) == {"path": "calc.py"}


SHOWN_FILE = (
    "class Inflector:\n    def ordinal(self, n):\n        return n - 1\n\n    def other(self):\n        return 0\n"
)
SHOWN_STATEMENT = (
    "`test_ordinal` fails.\n\nThe bug is in the function `Inflector.ordinal` in `inflection/__init__.py`. "
    "Its current source:\n```python\n    def ordinal(self, n):\n        return n - 1\n```\n"
    "Fix it with one `str_replace` on that file, then call `submit`."
)


def test_a_python_block_redefining_the_shown_function_is_an_edit_of_its_file():
    """SmolLM2 answers a level-1 task with the corrected function in a ```python block: read as
    one str_replace of the shown source, re-indented as in the file, so it applies once."""
    from touchstone.agent.protocol import shown_functions

    shown = shown_functions([{"role": "user", "content": SHOWN_STATEMENT}])
    reply = "The fix:\n```python\ndef ordinal(self, n):\n    return n + 1\n```\nThis adds one."
    message = parse_reply(reply, 1, shown)
    assert message["content"] == reply
    call = message["tool_calls"][0]["function"]
    args = json.loads(call["arguments"])
    assert call["name"] == "str_replace" and args["path"] == "inflection/__init__.py"
    assert SHOWN_FILE.count(args["old"]) == 1
    fixed = SHOWN_FILE.replace(args["old"], args["new"])
    assert "    def ordinal(self, n):\n        return n + 1\n" in fixed and "def other" in fixed
    assert is_valid_call(message)


@pytest.mark.parametrize(
    "reply",
    [
        "```python\ndef test_ordinal(number):\n    return number - 1\n```",  # another name: not the shown function
        "```python\ndef ordinal(self, n):\n    return n - 1\n```",  # the shown source again: no edit
        "```python\ndef ordinal(self, n):\n    return (n +\n```",  # does not parse
        "```python\ndef ordinal(self, n):\n    return n + 1\n\ndef helper():\n    pass\n```",  # two functions
    ],
)
def test_a_python_block_that_is_no_edit_of_a_shown_function_is_no_call(reply):
    from touchstone.agent.protocol import shown_functions

    assert "tool_calls" not in parse_reply(reply, 0, shown_functions([{"role": "user", "content": SHOWN_STATEMENT}]))
    assert "tool_calls" not in parse_reply("```python\ndef ordinal(self, n):\n    return n + 1\n```", 0)  # none shown


def test_a_call_wins_over_a_python_block_and_the_block_reply_renders_verbatim(tokenizer):
    from touchstone.agent.protocol import shown_functions

    shown = shown_functions([{"role": "user", "content": SHOWN_STATEMENT}])
    both = f"```python\ndef ordinal(self, n):\n    return n + 1\n```\n<tool_call>[{CALL}]</tool_call>"
    assert parse_reply(both, 0, shown)["tool_calls"][0]["function"]["name"] == "bash"
    reply = "```python\ndef ordinal(self, n):\n    return n + 1\n```"
    chat = [
        {"role": "user", "content": SHOWN_STATEMENT},
        {"role": "assistant", "content": reply, "tool_calls": parse_reply(reply, 0, shown)["tool_calls"]},
    ]
    enc = tokenizer.apply_chat_template(chat, tools=TOOL_SCHEMAS, return_assistant_tokens_mask=True, return_dict=True)
    trained = tokenizer.decode([t for t, m in zip(enc["input_ids"], enc["assistant_masks"]) if m])
    assert trained == reply + "<|im_end|>"  # SFT trains on the model's own tokens, no call appended
