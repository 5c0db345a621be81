"""The default model: deterministic, loads with the Auto classes, and its
tokenizer works with TRL's assistant masks and tool-call parsing."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import get_training_chat_template

from cli import main
from touchstone.checkpoint import content_hash, verify_checkpoint
from training.model_init import code_files, init_model, train_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]
CHAT = [
    {"role": "system", "content": "You fix bugs."},
    {"role": "user", "content": "Fix add()."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "bash", "arguments": {"cmd": "pytest"}}}],
    },
    {"role": "tool", "name": "bash", "content": "1 failed"},
    {"role": "assistant", "content": "Fixed."},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return init_model(tmp_path_factory.mktemp("m") / "ckpt", pretrain_steps=2)


def test_init_is_deterministic(model_dir, tmp_path):
    again = init_model(tmp_path / "again", pretrain_steps=2)
    assert content_hash(again) == content_hash(model_dir)
    assert verify_checkpoint(model_dir).content_hash == content_hash(model_dir)


def test_loads_with_auto_classes_and_tokenizes_as_trained(model_dir):
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    text = "def add(a, b):\n    return a + b  # café\n<tool_call>"
    assert tok(text)["input_ids"] == train_tokenizer(code_files())(text)["input_ids"]
    assert model.config.vocab_size == len(tok)
    prompt = tok.apply_chat_template(
        CHAT[:2], tools=TOOLS, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > prompt["input_ids"].shape[1]


def test_trl_assistant_masks_cover_only_assistant_turns(model_dir):
    tok = AutoTokenizer.from_pretrained(model_dir)
    rendered = tok.apply_chat_template(CHAT, tools=TOOLS, tokenize=False)
    assert '<tools>\n{"type": "function"' in rendered and "<tool_response>\n1 failed\n</tool_response>" in rendered
    enc = tok.apply_chat_template(
        CHAT,
        tools=TOOLS,
        chat_template=get_training_chat_template(tok),
        return_assistant_tokens_mask=True,
        return_dict=True,
    )
    trained = tok.decode([i for i, m in zip(enc["input_ids"], enc["assistant_masks"]) if m])
    assert '"arguments": {"cmd": "pytest"}' in trained and "Fixed." in trained
    assert "1 failed" not in trained and "Fix add()" not in trained


def test_tool_calls_parse_from_generated_text(model_dir):
    tok = AutoTokenizer.from_pretrained(model_dir)
    parsed = tok.parse_response(
        '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call><|im_end|>', prefix=""
    )
    assert parsed["tool_calls"][0]["function"] == {"name": "bash", "arguments": {"cmd": "ls"}}


def test_cli_refuses_non_empty_dir(tmp_path):
    (tmp_path / "x").write_text("keep me")
    result = CliRunner().invoke(main, ["model", "init", "--out", str(tmp_path), "--pretrain-steps", "0"])
    assert result.exit_code != 0 and "not empty" in result.output
    assert (tmp_path / "x").read_text() == "keep me"


def test_cli_builds_a_loadable_model(tmp_path):
    result = CliRunner().invoke(main, ["model", "init", "--out", str(tmp_path / "m"), "--pretrain-steps", "0"])
    assert result.exit_code == 0, result.output
    assert verify_checkpoint(tmp_path / "m").round is None
    AutoModelForCausalLM.from_pretrained(tmp_path / "m")


def test_the_agents_words_are_whole_tokens(model_dir):
    """Tool names, argument keys and the teacher's test command are single tokens,
    so a tool call is a short sequence the tiny model can learn to reproduce."""
    from touchstone.agent.teacher.procedure import FIRST_ACTION
    from touchstone.episode.tools import TOOL_SCHEMAS

    tok = AutoTokenizer.from_pretrained(model_dir)
    for schema in TOOL_SCHEMAS:
        fn = schema["function"]
        for word in [*fn["name"].split("_"), *fn["parameters"]["properties"], "arguments"]:
            assert len(tok.tokenize(f'"{word}"')) == 3, (word, tok.tokenize(f'"{word}"'))
    assert "PYTHONDONTWRITEBYTECODE" in tok.tokenize(FIRST_ACTION.args["command"])
    call = '<tool_call>\n{"name": "bash", "arguments": {"command": "%s"}}\n</tool_call>' % FIRST_ACTION.args["command"]
    assert len(tok.tokenize(call)) <= 35


def test_the_teachers_look_ups_are_short(model_dir):
    """The fixed parts of the teacher's greps are whole tokens, so a look-up the
    tiny model imitates is about 60 pieces, not 95 (docs/EXPERIMENTS.md)."""
    from touchstone.agent.teacher.procedure import find_functions, find_literals

    tok = AutoTokenizer.from_pretrained(model_dir)
    functions = tok.tokenize(find_functions(["name"]).args["command"])
    assert {"grep", "exclude", "-dir", "=tests"} <= set(functions), functions
    assert len(functions) <= 62
    assert len(tok.tokenize(find_literals(["word"]).args["command"])) <= 45
