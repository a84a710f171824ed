"""``export_slice`` as trainers read it: the rows of every real harness format, loaded back as Hugging
Face ``datasets`` loads them and rendered through ``apply_chat_template`` (what TRL's SFT trainer does
with a ``messages`` + ``tools`` row), with a chat template that follows the published ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from trajectory_lake import Lake, ingest
from trajectory_lake.cli import main
from trajectory_lake.slices import (
    SliceSpec,
    _answer_calls,
    _messages,
    export_slice,
    load_manifest,
    resolve_slice,
)

# The constructs the published tool-calling templates use: Llama 3.1 and DeepSeek-V3 test a key's
# presence ("'tool_calls' in message"), Qwen2.5 and Llama 3.1 render "arguments | tojson", Qwen3
# reads "reasoning_content", tool results carry the tool's name, tools are rendered as JSON.
_TEMPLATE = (
    "{%- if tools %}<|tools|>{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}{% endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'tool' %}<|tool|>{{ message.name }}: {{ message.content }}<|end|>\n"
    "{%- elif 'tool_calls' in message %}<|assistant|>"
    "{%- if message.reasoning_content is defined %}<think>{{ message.reasoning_content }}</think>{% endif %}"
    "{{ message.content }}"
    "{%- for call in message.tool_calls %}<call>{\"name\": \"{{ call.function.name }}\", "
    "\"arguments\": {{ call.function.arguments | tojson }}}</call>{% endfor %}<|end|>\n"
    "{%- else %}<|{{ message.role }}|>{{ message.content }}<|end|>\n{%- endif %}"
    "{%- endfor %}"
)


@pytest.fixture(scope="module")
def exported(shared_data, tmp_path_factory):
    """Every format's sample exported (all candidates, labelled or not) as Parquet and as JSONL."""
    root = tmp_path_factory.mktemp("export")
    lake = Lake(root / "lake")
    ingest([shared_data / "formats"], lake)
    out = {"lake": lake}
    for kind in ("patch", "answer"):
        manifest = resolve_slice(lake, SliceSpec(name=kind, kind=kind, labelled_only=False, val_fraction=0.0))
        for fmt in ("parquet", "jsonl"):
            out[kind, fmt] = export_slice(lake, manifest, root / f"{kind}-{fmt}", fmt=fmt)["train"]
    return out


def _read_parquet(path):
    """The rows as ``datasets`` gives them: a struct's every field (None where a row lacks it), a JSON
    value decoded."""
    rows = pq.read_table(path).to_pylist()
    for row in rows:
        for name in {"messages", "prompt", "completion"} & set(row):
            row[name] = [json.loads(m) if isinstance(m, str) else m for m in row[name]]
    return rows


def _tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words)
    tokenizer.chat_template = _TEMPLATE
    return tokenizer


@pytest.mark.parametrize("kind", ["patch", "answer"])
def test_parquet_rows_are_the_jsonl_rows_and_each_message_keeps_only_its_own_keys(exported, kind):
    jsonl = [json.loads(line) for line in exported[kind, "jsonl"].read_text().splitlines()]
    parquet = _read_parquet(exported[kind, "parquet"])
    assert parquet == jsonl
    assert any("tool_calls" in m for row in jsonl for m in row["messages"])
    assert all(value is not None for row in parquet for m in row["messages"] for value in m.values())


@pytest.mark.parametrize(("kind", "fmt"), [("patch", "parquet"), ("answer", "parquet"), ("answer", "jsonl")])
def test_every_row_renders_through_apply_chat_template_with_its_calls_and_results(exported, kind, fmt):
    tokenizer = _tokenizer()
    rows = _read_parquet(exported[kind, fmt]) if fmt == "parquet" else [
        json.loads(line) for line in exported[kind, fmt].read_text().splitlines()]
    calls = results = 0
    for row in rows:
        text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"] or None, tokenize=False)
        for message in row["messages"]:
            for call in message.get("tool_calls", []):
                arguments = call["function"]["arguments"]
                assert isinstance(arguments, dict) or not arguments.lstrip().startswith("{")
                # a dict renders as an object, not as a JSON string inside a string
                assert f'"arguments": {json.dumps(arguments, ensure_ascii=False)}' in text
                calls += 1
            if message["role"] == "tool":
                assert f"<|tool|>{message['name']}: {message['content']}" in text
                results += 1
    assert calls and results


def test_tool_results_are_named_and_console_output_without_a_call_is_a_user_turn():
    steps = [
        {"role": "user", "content": "fix it", "tool_calls": None, "tool_call_id": None, "reasoning": None},
        {"role": "tool", "content": "Aider v0.35", "tool_calls": None, "tool_call_id": None,
         "reasoning": None},
        {"role": "assistant", "content": "", "reasoning": "look first", "tool_call_id": None,
         "tool_calls": [{"id": "a", "name": "bash", "arguments": '{"command": "ls"}'},
                        {"id": None, "name": "view", "arguments": "[REDACTED_ARGUMENTS len=9]"}]},
        {"role": "tool", "content": "x.py", "tool_calls": None, "tool_call_id": "a", "reasoning": None},
        {"role": "tool", "content": "1: pass", "tool_calls": None, "tool_call_id": None, "reasoning": None},
    ]
    messages = _messages("the task", steps, "the patch")
    assert messages == [
        {"role": "user", "content": "fix it"},
        {"role": "user", "content": "Aider v0.35"},
        {"role": "assistant", "content": "", "reasoning_content": "look first", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}},
            {"type": "function", "function": {"name": "view", "arguments": "[REDACTED_ARGUMENTS len=9]"}}]},
        {"role": "tool", "content": "x.py", "tool_call_id": "a", "name": "bash"},
        {"role": "tool", "content": "1: pass", "name": "view"},
        {"role": "assistant", "content": "the patch"},
    ]
    # Tool output before any user turn is not the trajectory's own task turn: the prompt still opens it.
    banner, act = steps[1], {**steps[2], "tool_calls": None}
    assert [m["content"] for m in _messages("the task", [banner, act], "p")] == [
        "the task", "Aider v0.35", "", "p"]
    assert _messages("the task", [banner, *steps[:1]], "p")[:2] == [
        {"role": "user", "content": "Aider v0.35"}, {"role": "user", "content": "fix it"}]
    # An action candidate is the next step after its prefix: the last assistant turn, as for a patch.
    assert _messages(None, steps[:1], "ls -la")[-1] == {"role": "assistant", "content": "ls -la"}
    assert _answer_calls([{"role": "tool", "content": "out"}]) == [{"role": "user", "content": "out"}]


def test_jsonl_is_one_object_per_line(exported):
    lines = exported["patch", "jsonl"].read_text().split("\n")
    assert lines[-1] == "" and all(isinstance(json.loads(line), dict) for line in lines[:-1])
    assert all("\n" not in line for line in lines)


def test_a_new_export_into_the_same_directory_leaves_no_split_of_the_old_one(lite_lake, tmp_path):
    runs = ["20240402_sweagent_gpt4"]
    halves = resolve_slice(lite_lake, SliceSpec(name="run", runs=runs, val_fraction=0.5))
    assert set(export_slice(lite_lake, halves, tmp_path, fmt="jsonl")) == {"train", "val"}
    manifest = resolve_slice(lite_lake, SliceSpec(name="run", runs=runs, val_fraction=0.0))
    assert set(export_slice(lite_lake, manifest, tmp_path)) == {"train"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "train.parquet"]
    with pytest.raises(ValueError, match="fmt must be parquet or jsonl, got 'json'"):
        export_slice(lite_lake, manifest, tmp_path, fmt="json")


def test_an_answer_the_trajectory_ends_with_is_its_last_turn_once(exported):
    rows = [json.loads(line) for line in exported["answer", "jsonl"].read_text().splitlines()]
    codex = [r for r in rows if r["messages"][-1]["content"].startswith("[REDACTED_TEXT")]
    assert codex  # the Codex samples (texts redacted in the shared data): the answer is the last message
    for row in rows:
        assert row["messages"][-1]["role"] == "assistant" and row["messages"][-2] != row["messages"][-1]


def test_jsonl_is_utf8_whatever_the_locale(exported, tmp_path):
    """JSON Lines is UTF-8; a locale that is not (Windows' cp1252, LANG=C without UTF-8 mode) must not
    change the bytes written nor refuse the text."""
    manifest = resolve_slice(exported["lake"], SliceSpec(name="p", labelled_only=False, val_fraction=0.0))
    manifest.save(tmp_path / "m.json")
    code = ("import sys; from trajectory_lake import Lake; "
            "from trajectory_lake.slices import export_slice, load_manifest; "
            "export_slice(Lake(sys.argv[1]), load_manifest(sys.argv[2]), sys.argv[3], fmt='jsonl')")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    args = [exported["lake"].uri, str(tmp_path / "m.json"), str(tmp_path / "out")]
    subprocess.run([sys.executable, "-c", code, *args], env=env, check=True, capture_output=True)
    text = (tmp_path / "out" / "train.jsonl").read_bytes().decode("utf-8")
    assert text == exported["patch", "jsonl"].read_text(encoding="utf-8") and not text.isascii()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_the_prompt_completion_layout_is_trls_unpaired_preference_rows(lite_lake, tmp_path, fmt):
    spec = SliceSpec(name="r", runs=["20240402_sweagent_gpt4"], val_fraction=0.0)
    manifest = resolve_slice(lite_lake, spec)
    whole_rows = export_slice(lite_lake, manifest, tmp_path / "m", fmt="jsonl")["train"].read_text()
    messages = [json.loads(line) for line in whole_rows.splitlines()]
    path = export_slice(lite_lake, manifest, tmp_path / "pc", fmt=fmt, layout="prompt-completion")["train"]
    rows = _read_parquet(path) if fmt == "parquet" else [json.loads(x) for x in path.read_text().splitlines()]
    assert len(rows) == len(messages) and {r["label"] for r in rows} == {True, False}
    tokenizer = _tokenizer()
    for row, whole in zip(rows, messages, strict=True):
        assert row["prompt"] + row["completion"] == whole["messages"]
        assert row["completion"][0]["role"] == "assistant"
        assert row["label"] is (whole["label"] > 0.5) and row["score"] == whole["label"]
        prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False)
        text = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
        assert text.startswith(prompt)
    if fmt == "parquet":
        assert str(pq.read_schema(path).field("label").type) == "bool"


def test_harvest_slice_exports_the_prompt_completion_layout(lite_lake, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[slice]\nname = "run"\nruns = ["20240402_sweagent_gpt4"]\nval_fraction = 0.0\n')
    result = CliRunner().invoke(main, ["slice", str(spec), "--lake", lite_lake.uri, "--no-save",
                                       "--export", str(tmp_path / "x"), "--format", "jsonl",
                                       "--layout", "prompt-completion"])
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / "x" / "train.jsonl").read_text().splitlines()[0])
    assert set(row) >= {"prompt", "completion", "label", "score", "tools"} and "messages" not in row
    with pytest.raises(ValueError, match="layout must be messages or prompt-completion"):
        export_slice(lite_lake, load_manifest(json.loads(result.stdout)), tmp_path / "y", layout="kto")
