"""Training configuration: the shipped recipes load, and bad values are reported all at once."""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT
from value_model.config import Objectives, TrainConfig, load_config


class TestLoadConfig:
    def test_the_cpu_recipe_matches_the_defaults_harvest_train_uses(self):
        assert load_config(REPO_ROOT / "configs" / "cpu-minilm.toml") == TrainConfig()

    def test_flags_override_the_file(self):
        config = load_config(REPO_ROOT / "configs" / "cpu-minilm.toml", epochs=1.0, max_length=None)
        assert config.epochs == 1.0 and config.max_length == TrainConfig().max_length

    def test_unknown_keys_in_a_file_are_named(self, tmp_path):
        path = tmp_path / "x.toml"
        path.write_text("[train]\nepoch = 3\n")
        with pytest.raises(ValueError, match=r"unknown training options \['epoch'\]"):
            load_config(path)

    def test_keys_outside_the_train_table_are_refused_not_ignored(self, tmp_path):
        path = tmp_path / "x.toml"
        path.write_text('lora_rank = 8\n[train]\nepochs = 1.0\n')  # a key above the table header
        with pytest.raises(ValueError, match=r"outside \[train\]: \['lora_rank'\]"):
            load_config(path)
        path.write_text("[train]\nepochs = 1.0\n[trian]\nlora_rank = 8\n")  # a misspelt second table
        with pytest.raises(ValueError, match=r"outside \[train\]: \['trian'\]"):
            load_config(path)

    def test_every_invalid_value_is_reported_in_one_error(self):
        with pytest.raises(ValueError, match="max_length must be >= 16.*val_fraction must be in"):
            TrainConfig(max_length=4, val_fraction=1.5)


class TestObjectives:
    @pytest.mark.parametrize(
        ("value", "active"),
        [("bce", {"bce": 1.0}), ("bce=1,pairwise=0.5", {"bce": 1.0, "pairwise": 0.5}),
         ({"pairwise": 2, "bce": 0}, {"pairwise": 2.0})],
    )
    def test_a_name_a_weighted_string_or_a_table_give_the_same_typed_weights(self, value, active):
        config = TrainConfig(objective=value)
        assert config.objective == Objectives(**active) and config.objective.active() == active

    def test_a_toml_table_sets_weighted_objectives(self, tmp_path):
        path = tmp_path / "x.toml"
        path.write_text("[train]\nobjective = { bce = 1.0, pairwise = 0.5 }\n")
        assert load_config(path).objective.active() == {"bce": 1.0, "pairwise": 0.5}
        assert load_config(path).to_dict()["objective"] == "bce=1,pairwise=0.5"

    def test_unknown_objectives_and_zero_weights_are_refused(self):
        with pytest.raises(ValueError, match=r"unknown objectives \['listwise'\]"):
            TrainConfig(objective="listwise")
        with pytest.raises(ValueError, match="at least one objective needs a weight"):
            TrainConfig(objective={"bce": 0.0})

    def test_td_needs_action_examples(self):
        with pytest.raises(ValueError, match="td objective scores actions"):
            TrainConfig(objective="td", kind="patch")
        assert TrainConfig(objective="td", kind="action").objective.active() == {"td": 1.0}


class TestRecipes:
    def test_the_qwen3_recipe_loads_with_its_backbone_from_the_environment(self, monkeypatch):
        monkeypatch.setenv("HARVEST_MODELS", "/models")
        config = load_config(REPO_ROOT / "configs" / "qwen3-4b.toml")
        assert config.backbone == "/models/Qwen3-4B"
        assert (config.pooling, config.max_length) == ("last", 32768)
        assert config.lora_rank > 0 and config.gradient_checkpointing and config.include_context

    def test_the_qwen3_recipe_trains_in_bf16_on_gpus_and_in_float32_on_a_cpu_smoke_run(self):
        # precision = "bf16" meant bf16 on the CPU too (a frozen bf16 backbone, bf16 autocast); "auto" does
        # bf16 on CUDA only
        import contextlib

        import torch

        from value_model._runtime import autocast
        from value_model.trainer import backbone_dtype

        config = load_config(REPO_ROOT / "configs" / "qwen3-4b.toml", backbone="/models/Qwen3-4B")
        cpu = config.updated(device="cpu")
        assert backbone_dtype(cpu) is None
        assert isinstance(autocast(cpu.precision, torch.device("cpu")), contextlib.nullcontext)
        assert backbone_dtype(config.updated(device="cuda")) == torch.bfloat16

    def test_the_qwen3_recipe_on_its_8_gpus_has_micro_batches_where_pairs_meet(self):
        # its pairwise term compares a task's candidates inside one micro-batch; with 1 sequence per
        # micro-batch (batch 32 / (8 GPUs x 4 accumulation steps) before) it was 0; training refuses that now
        config = load_config(REPO_ROOT / "configs" / "qwen3-4b.toml")
        assert config.objective.pairwise > 0
        assert config.batch_size // (8 * config.grad_accum_steps) >= 2

    def test_a_flag_overrides_the_recipes_backbone(self, monkeypatch):
        monkeypatch.delenv("HARVEST_MODELS", raising=False)
        config = load_config(REPO_ROOT / "configs" / "qwen3-4b.toml", backbone="/elsewhere/qwen")
        assert config.backbone == "/elsewhere/qwen"

    def test_scale_options_are_validated_together(self):
        with pytest.raises(ValueError, match="grad_accum_steps must be >= 1.*lora_rank must be >= 0.*device must be"):
            TrainConfig(grad_accum_steps=0, lora_rank=-1, device="tpu")
