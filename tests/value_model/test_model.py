"""The value model: pooling per backbone family, padding invariance, and the saved artefact's round trip."""

from __future__ import annotations

import json

import pytest
import torch

from value_model.inference import predict_values
from value_model.model import ValueModel, is_decoder, resolve_backbone
from value_model.serialize import encode_pairs

PROMPTS = ["fix the crash in the parser", "make slugify strip dashes"]
CANDIDATES = ["diff --git a/p.py b/p.py\n-    raise\n+    return None", "diff --git a/s.py b/s.py\n+.strip('-')"]


class TestBackbones:
    def test_the_packaged_minilm_resolves_to_a_local_directory(self):
        assert (resolve_backbone("minilm") / "config.json").is_file()

    def test_a_missing_backbone_directory_is_refused_without_downloading(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="never downloads"):
            resolve_backbone(str(tmp_path / "nope"))

    def test_auto_pooling_is_mean_for_encoders_and_last_token_for_decoders(self, tiny_encoder_dir, tiny_decoder_dir):
        encoder, _ = ValueModel.from_backbone(str(tiny_encoder_dir))
        decoder, _ = ValueModel.from_backbone(str(tiny_decoder_dir))
        assert (encoder.pooling, decoder.pooling) == ("mean", "last")
        assert is_decoder(decoder.backbone.config) and not is_decoder(encoder.backbone.config)

    @pytest.mark.parametrize(("name", "options", "decoder"), [
        # base-model directories of newer decoders: no ForCausalLM architecture to go by
        ("Gemma3TextConfig", {}, True),
        ("Gemma3TextConfig", {"architectures": ["Gemma3TextModel"]}, True),
        ("Qwen3_5TextConfig", {}, True),
        ("Qwen3_5Config", {"architectures": ["Qwen3_5Model"]}, True),
        ("Qwen3Config", {"architectures": ["Qwen3ForSequenceClassification"]}, True),
        ("GPT2Config", {"architectures": ["GPT2LMHeadModel"]}, True),
        # encoders, including families that also have a causal-LM class
        ("BertConfig", {}, False),
        ("BertConfig", {"architectures": ["BertForMaskedLM"]}, False),
        ("XLMRobertaConfig", {"architectures": ["XLMRobertaModel"]}, False),
        ("ModernBertConfig", {}, False),
        ("BertConfig", {"is_decoder": True}, True),  # BERT set up as a decoder
    ])
    def test_decoders_are_told_from_encoders_by_their_config_alone(self, name, options, decoder):
        import transformers

        assert is_decoder(getattr(transformers, name)(**options)) is decoder

    @pytest.mark.parametrize("model_type", [
        "qwen2", "qwen3", "qwen3_moe", "llama", "mistral", "mixtral", "gemma", "gemma2", "gemma3", "phi3",
        "gpt2", "gpt_neox", "olmo2", "granite", "deepseek_v3",
    ])
    def test_the_decoder_families_are_decoders_by_their_model_type_alone(self, model_type):
        from transformers import AutoConfig

        assert is_decoder(AutoConfig.for_model(model_type))

    def test_a_base_gemma3_text_model_directory_pools_on_the_last_token(self, tmp_path, minilm_tokenizer):
        from transformers import AutoModel, Gemma3TextConfig

        config = Gemma3TextConfig(vocab_size=minilm_tokenizer.vocab_size, hidden_size=32,
                                  intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=1, head_dim=16)
        AutoModel.from_config(config).save_pretrained(tmp_path)  # architectures: ["Gemma3TextModel"]
        minilm_tokenizer.save_pretrained(tmp_path)
        model, _ = ValueModel.from_backbone(str(tmp_path))
        assert model.pooling == "last"


class TestPaddingInvariance:
    @pytest.mark.parametrize("fixture", ["tiny_encoder_dir", "tiny_decoder_dir"])
    def test_a_sequence_scores_the_same_alone_and_padded_in_a_batch(self, fixture, request):
        model, tokenizer = ValueModel.from_backbone(str(request.getfixturevalue(fixture)))
        model.eval()
        with torch.no_grad():
            batch = encode_pairs(tokenizer, PROMPTS, CANDIDATES, max_length=64).inputs
            together = model(**batch)
            alone = [model(**encode_pairs(tokenizer, [p], [c], max_length=64).inputs)[0]
                     for p, c in zip(PROMPTS, CANDIDATES, strict=True)]
        assert torch.allclose(together, torch.stack(alone), atol=1e-5)

    def test_last_token_pooling_handles_left_padding(self, tiny_decoder_dir):
        model, tokenizer = ValueModel.from_backbone(str(tiny_decoder_dir))
        hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
        right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
        left = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
        assert torch.equal(model.pool(hidden, right)[0], hidden[0, 1])
        assert torch.equal(model.pool(hidden, left)[0], hidden[0, 3])


class TestArtefact:
    @pytest.mark.parametrize("fixture", ["tiny_encoder_dir", "tiny_decoder_dir"])
    def test_a_saved_model_reloads_with_identical_scores(self, fixture, request, tmp_path):
        model, tokenizer = ValueModel.from_backbone(str(request.getfixturevalue(fixture)))
        before, _ = predict_values(model, tokenizer, PROMPTS, CANDIDATES, max_length=64)
        model.save(tmp_path / "artefact", tokenizer, max_length=64, calibration={"scale": 2.0, "bias": -1.0})
        loaded, loaded_tokenizer, info = ValueModel.load(tmp_path / "artefact")
        after, _ = predict_values(loaded, loaded_tokenizer, PROMPTS, CANDIDATES, max_length=64)
        assert after == pytest.approx(before, abs=1e-5)
        assert info["pooling"] == model.pooling and info["calibration"] == {"scale": 2.0, "bias": -1.0}
        # the backbone directory is a plain Hugging Face model directory
        saved = json.loads((tmp_path / "artefact" / "backbone" / "config.json").read_text())
        assert saved["model_type"] == model.backbone.config.model_type

    def test_loading_a_directory_without_harvest_json_fails_clearly(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="not a Harvest value model"):
            ValueModel.load(tmp_path)


class TestPaddingSide:
    @pytest.mark.parametrize("fixture", ["tiny_encoder_dir", "tiny_decoder_dir"])
    def test_scores_do_not_depend_on_the_padding_side_or_the_batch(self, fixture, request):
        model, tokenizer = ValueModel.from_backbone(str(request.getfixturevalue(fixture)))
        prompts, candidates = [*PROMPTS, "x"], [*CANDIDATES, "a much longer candidate " * 6]
        scores = {}
        for side in ("right", "left"):
            tokenizer.padding_side = side
            batch, _ = predict_values(model, tokenizer, prompts, candidates, max_length=64, batch_size=3)
            alone, _ = predict_values(model, tokenizer, prompts, candidates, max_length=64, batch_size=1)
            assert batch == pytest.approx(alone, abs=1e-5)
            scores[side] = batch
        assert scores["left"] == pytest.approx(scores["right"], abs=1e-5)


class TestPadIsEos:
    """Qwen tokenizers pad with their end-of-text token: the pooled token must come from the attention mask,
    never from ``input_ids != pad_token_id`` (transformers #35352: such a rule scores the wrong token)."""

    @pytest.mark.parametrize("side", ["right", "left"])
    def test_the_last_real_token_is_pooled_even_when_it_is_the_padding_token(self, tiny_qwen_style_dir, side):
        model, tokenizer = ValueModel.from_backbone(str(tiny_qwen_style_dir))
        model.eval()
        tokenizer.padding_side = side
        assert tokenizer.pad_token_id == tokenizer.eos_token_id and model.pooling == "last"
        # the first candidate ends with a real end-of-text token, the same id as the padding
        prompts, candidates = [PROMPTS[0], "x"], [CANDIDATES[0] + "<|endoftext|>", "return None " * 16]
        batch = encode_pairs(tokenizer, prompts, candidates, max_length=64).inputs
        assert batch["input_ids"].shape[1] > int(batch["attention_mask"][0].sum())  # the first one is padded
        with torch.no_grad():
            together = model(**batch)
            alone = torch.stack([model(**encode_pairs(tokenizer, [p], [c], max_length=64).inputs)[0]
                                 for p, c in zip(prompts, candidates, strict=True)])
            ids = encode_pairs(tokenizer, prompts[:1], candidates[:1], max_length=64).inputs["input_ids"]
            hidden = model.backbone(input_ids=ids).last_hidden_state
        assert ids[0, -1] == tokenizer.eos_token_id
        assert torch.allclose(together, alone, atol=1e-5)
        assert torch.allclose(alone[0], model.head(hidden[0, -1]).squeeze(-1), atol=1e-5)


class TestLora:
    def test_lora_trains_adapters_and_the_head_only(self, tiny_decoder_dir):
        model, _ = ValueModel.from_backbone(str(tiny_decoder_dir))
        model.add_lora(rank=4, alpha=8.0, dropout=0.0)
        trainable = {name for name, p in model.named_parameters() if p.requires_grad}
        assert {"head.weight", "head.bias"} <= trainable
        assert all("lora_" in name for name in trainable - {"head.weight", "head.bias"})

    def test_a_lora_model_saves_merged_and_reloads_without_peft_with_the_same_scores(self, tiny_decoder_dir, tmp_path):
        model, tokenizer = ValueModel.from_backbone(str(tiny_decoder_dir))
        model.add_lora(rank=4, alpha=8.0, dropout=0.0)
        with torch.no_grad():  # move the adapters off their zero init, as training would
            for name, p in model.backbone.named_parameters():
                if "lora_B" in name:
                    p.normal_(std=0.5)
            model.head.weight.normal_()
        before, _ = predict_values(model, tokenizer, PROMPTS, CANDIDATES, max_length=64)
        model.save(tmp_path / "artefact", tokenizer, max_length=64)
        assert not model.has_lora
        saved = {p.name for p in (tmp_path / "artefact" / "backbone").iterdir()}
        assert "adapter_config.json" not in saved and "config.json" in saved
        loaded, loaded_tokenizer, _ = ValueModel.load(tmp_path / "artefact")
        after, _ = predict_values(loaded, loaded_tokenizer, PROMPTS, CANDIDATES, max_length=64)
        assert after == pytest.approx(before, abs=1e-4)
        assert not any("lora" in name for name, _ in loaded.named_parameters())
