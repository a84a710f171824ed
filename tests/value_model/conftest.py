"""Fixtures of the value-model tests: a lake of real agent trajectories with outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

AGENT_FORMATS = ("tau-bench", "tau2-bench")


@pytest.fixture(scope="session")
def agent_lake(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    """A lake of real multi-turn trajectories with 0/1 outcomes: tau-bench and tau2-bench airline runs
    (12 trajectories of 6 tasks, tool calls and tool results, both outcomes on several tasks).

    Their candidates are ``answer``s labelled ``resolved``; step-level (``action``) examples come from
    their steps. Treat the data tables as read only.
    """
    from trajectory_lake import Lake, ingest

    lake = Lake(tmp_path_factory.mktemp("agent-lake"))
    ingest([shared_data / "formats" / name for name in AGENT_FORMATS], lake)
    return lake


@pytest.fixture(scope="session")
def action_examples(agent_lake):
    """Step-level examples of the agent lake (:func:`value_model.data.load_action_examples`)."""
    from value_model.data import load_action_examples

    return load_action_examples(agent_lake, trajectory_kind="answer", label="resolved")


@pytest.fixture(scope="session")
def tiny_qwen_style_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Qwen3 with a Qwen-style tokenizer built here (no hub): byte-level BPE, no special
    tokens added to an encoding, and the padding token is the end-of-text token (``pad == eos``)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModel, PreTrainedTokenizerFast, Qwen3Config

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(["fix the crash in the parser: diff --git a/p.py b/p.py raise return None"] * 4,
                            trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=specials[0], pad_token=specials[0])
    config = Qwen3Config(vocab_size=bpe.get_vocab_size(), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                         max_position_embeddings=1024, architectures=["Qwen3ForCausalLM"])
    directory = tmp_path_factory.mktemp("tiny-qwen-style")
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
