"""Training configuration: the shipped recipes load, and bad values are reported all at once."""

from __future__ import annotations

import re

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


# spellings a device setting may not take; each passed TrainConfig before (all but the last four
# started with "cuda:", and the number crashed it with an AttributeError) and failed once training
# moved the model, after the data was read
BAD_DEVICES = ["cuda:abc", "cuda:-1", "cuda:", "cuda:01", "cuda:\u0663", "cuda:128", "cuda:0 ", "cuda:1\n",
               " cuda", "CUDA", "tpu", 0]
GOOD_DEVICES = ["auto", "cpu", "cuda", "cuda:0", "cuda:7", "cuda:127"]


class TestDevice:
    @pytest.mark.parametrize("device", BAD_DEVICES)
    def test_a_misspelt_device_is_refused_when_the_config_is_made(self, device):
        refused = r"invalid TrainConfig: device must be auto, cpu, cuda or cuda:N"
        with pytest.raises(ValueError, match=refused):
            TrainConfig(device=device)

    @pytest.mark.parametrize("device", ["cuda:abc", 1])
    def test_a_misspelt_device_in_a_file_is_one_error_naming_the_setting(self, tmp_path, device):
        path = tmp_path / "x.toml"
        path.write_text(f"[train]\ndevice = {device!r}\n".replace("'", '"'))
        with pytest.raises(ValueError) as caught:
            load_config(path)
        (line,) = str(caught.value).splitlines()
        assert line == f"invalid TrainConfig: device must be auto, cpu, cuda or cuda:N, got {device!r}"

    def test_the_config_and_usable_device_accept_the_same_spellings(self, monkeypatch):
        # harvest train (TrainConfig.device) and harvest evaluate --device (usable_device) read one rule
        from value_model._runtime import usable_device

        monkeypatch.setattr("torch.cuda.is_available", lambda: True)
        monkeypatch.setattr("torch.cuda.device_count", lambda: 128)  # every spelt index exists
        for device in [*GOOD_DEVICES, *BAD_DEVICES]:
            try:
                TrainConfig(device=device)
            except ValueError:
                config = False
            else:
                config = True
            try:
                usable_device(device)
            except ValueError:
                usable = False
            else:
                usable = True
            assert (config, usable) == (device in GOOD_DEVICES,) * 2, device

    @pytest.mark.parametrize(
        ("device", "local_rank", "cuda_devices", "message"),
        [
            ("cuda", 0, 0, "device 'cuda': this machine has no CUDA device"),
            ("cuda:3", 0, 2, "device 'cuda:3': this machine has 2 CUDA device(s), cuda:0 to cuda:1"),
            ("auto", 2, 2, "device 'auto' (cuda:2, for LOCAL_RANK 2): this machine has 2 CUDA device(s)"),
        ],
    )
    def test_a_device_this_machine_has_not_is_named_with_the_rank_it_is_for(
        self, monkeypatch, device, local_rank, cuda_devices, message
    ):
        from value_model._runtime import usable_device

        monkeypatch.setattr("torch.cuda.is_available", lambda: cuda_devices > 0)
        monkeypatch.setattr("torch.cuda.device_count", lambda: cuda_devices)
        with pytest.raises(ValueError, match=re.escape(message)):
            usable_device(device, local_rank=local_rank)


class _ReadTooSoon(Exception):
    """Raised where training reads its data: a missing device must be reported before."""


class TestDeviceMissingFailsBeforeTheData:
    @pytest.fixture(autouse=True)
    def no_cuda(self, monkeypatch):
        monkeypatch.setattr("torch.cuda.is_available", lambda: False)
        monkeypatch.setattr("torch.cuda.device_count", lambda: 0)

    def test_train_from_lake_refuses_a_cuda_device_before_reading_the_slice(self, monkeypatch):
        from value_model import pipeline

        monkeypatch.setattr(pipeline, "resolve_slice", _raise_read_too_soon)
        with pytest.raises(ValueError, match=r"device 'cuda': this machine has no CUDA device"):
            pipeline.train_from_lake(None, TrainConfig(device="cuda"), register=None)

    def test_fit_refuses_a_cuda_device_before_serializing_the_examples(self, monkeypatch):
        import polars as pl

        from value_model import trainer

        monkeypatch.setattr(trainer, "serialize_examples", _raise_read_too_soon)
        rows = pl.DataFrame({"task_id": ["a"], "prompt": ["p"], "content": ["c"], "label": [1.0]})
        with pytest.raises(ValueError, match=r"device 'cuda:0': this machine has no CUDA device"):
            trainer.fit(None, None, rows, rows.clear(), TrainConfig(device="cuda:0"))

    def test_a_torchrun_process_group_is_not_started_on_a_missing_device(self, monkeypatch):
        import torch.distributed as dist

        from value_model._runtime import distributed_session

        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_RANK", "0")
        monkeypatch.setattr(dist, "is_initialized", lambda: False)
        monkeypatch.setattr(dist, "init_process_group", _raise_read_too_soon)
        with pytest.raises(ValueError, match=r"device 'cuda': this machine has no CUDA device"):
            with distributed_session(device="cuda"):
                pass

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--device", "cuda:abc"], "device must be auto, cpu, cuda or cuda:N, got 'cuda:abc'"),
            (["--device", "cuda:"], "device must be auto, cpu, cuda or cuda:N, got 'cuda:'"),
            (["--device", "cuda"], "device 'cuda': this machine has no CUDA device"),
        ],
    )
    def test_harvest_train_reports_a_bad_device_in_one_line_before_reading_the_lake(
        self, tmp_path, monkeypatch, args, message
    ):
        from click.testing import CliRunner

        from trajectory_lake.cli import main
        from value_model import pipeline

        monkeypatch.setattr(pipeline, "resolve_slice", _raise_read_too_soon)
        result = CliRunner().invoke(main, ["train", "--lake", str(tmp_path / "lake"), *args])
        assert result.exit_code in (1, 2) and isinstance(result.exception, SystemExit), result.exception
        errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and message in errors[0], result.output
        assert "Traceback" not in result.output

    def test_harvest_train_on_a_lake_that_does_not_exist_is_one_error_line(self, tmp_path):
        # a traceback before (TableNotFoundError resolving the slice), where the lake commands print one line
        from click.testing import CliRunner

        from trajectory_lake.cli import main

        result = CliRunner().invoke(main, ["train", "--lake", str(tmp_path / "no-lake"), "--device", "cpu"])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
        errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and f"no lake at {tmp_path / 'no-lake'}" in errors[0], result.output
        assert "Traceback" not in result.output


def _raise_read_too_soon(*args, **kwargs):
    raise _ReadTooSoon


class TestValueTypes:
    """A value of the wrong type, or a number TOML and click both accept but training cannot use (nan,
    inf), is refused when the config is made: before, a wrong type crashed with a TypeError traceback,
    ``include_context = "false"`` switched context on, ``lora_targets = "q_proj"`` became six one-letter
    module names, and ``epochs = inf`` passed until training computed its step count, after the data
    was read."""

    @pytest.mark.parametrize(
        ("values", "message"),
        [
            ({"epochs": "2"}, "epochs must be a number, got '2'"),
            ({"max_length": "256"}, "max_length must be an integer, got '256'"),
            ({"max_length": 256.0}, "max_length must be an integer, got 256.0"),
            ({"batch_size": True}, "batch_size must be an integer, got True"),
            ({"include_context": "false"}, "include_context must be true or false, got 'false'"),
            ({"lora_targets": "q_proj"}, "lora_targets must be a list of strings, got 'q_proj'"),
            ({"backbone": 7}, "backbone must be a string, got 7"),
            ({"pooling": 1}, "pooling must be a string, got 1"),
        ],
    )
    def test_a_value_of_the_wrong_type_is_one_value_error(self, values, message):
        with pytest.raises(ValueError, match=re.escape(message)):
            TrainConfig(**values)

    def test_wrong_types_in_a_file_are_all_named_in_one_line(self, tmp_path):
        path = tmp_path / "x.toml"
        path.write_text('[train]\nepochs = "2"\ninclude_context = "false"\n')
        with pytest.raises(ValueError) as caught:
            load_config(path)
        (line,) = str(caught.value).splitlines()
        assert "epochs must be a number" in line and "include_context must be true or false" in line

    @pytest.mark.parametrize("name", ["epochs", "learning_rate", "head_learning_rate", "weight_decay",
                                      "lora_alpha", "gamma", "warmup_ratio", "combiner_l2"])
    @pytest.mark.parametrize("value", [float("nan"), float("inf")])
    def test_a_number_that_is_not_finite_is_refused(self, name, value):
        with pytest.raises(ValueError, match=rf"{name} must be a finite number, got {value!r}"):
            TrainConfig(**{name: value})

    def test_weight_decay_may_not_be_negative(self):
        with pytest.raises(ValueError, match=r"weight_decay must be >= 0, got -0.01"):
            TrainConfig(weight_decay=-0.01)

    def test_harvest_train_reports_a_non_finite_epochs_before_reading_the_lake(self, tmp_path, monkeypatch):
        from click.testing import CliRunner

        from trajectory_lake.cli import main
        from value_model import pipeline

        monkeypatch.setattr(pipeline, "resolve_slice", _raise_read_too_soon)
        result = CliRunner().invoke(main, ["train", "--lake", str(tmp_path / "lake"), "--epochs", "inf"])
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.exception
        assert "epochs must be a finite number, got inf" in result.output

    def test_the_values_the_recipes_and_the_command_line_give_are_accepted(self):
        config = TrainConfig(epochs=1, lora_targets=["q_proj", "v_proj"], combiner=["value"], weight_decay=0)
        assert config.lora_targets == ("q_proj", "v_proj") and config.combiner == ("value",)
        assert config.updated(epochs=0.5).epochs == 0.5


class TestDeviceUnderTorchrun:
    """``cuda:N`` names one GPU for every process: under torchrun the ranks of one machine then shared
    it, and NCCL refused that only at the first collective, after rank 0 had resolved and saved the
    slice."""

    @pytest.fixture
    def torchrun(self, monkeypatch):
        import torch.distributed as dist

        calls = {}
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_RANK", "0")
        monkeypatch.setattr("torch.cuda.is_available", lambda: True)
        monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
        monkeypatch.setattr("torch.cuda.set_device", lambda device: calls.setdefault("device", str(device)))
        monkeypatch.setattr(dist, "is_initialized", lambda: False)
        monkeypatch.setattr(dist, "init_process_group", lambda **kwargs: calls.update(init=kwargs))
        monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
        return calls

    def test_two_ranks_of_one_machine_may_not_share_one_named_gpu(self, torchrun, monkeypatch):
        from value_model._runtime import distributed_session

        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        with pytest.raises(ValueError, match=r"device 'cuda:1' puts the 2 ranks of this machine on one GPU"):
            with distributed_session(device="cuda:1"):
                pass
        assert "init" not in torchrun

    @pytest.mark.parametrize(("device", "local_world_size"), [("cuda", "2"), ("auto", "2"), ("cuda:1", "1")])
    def test_one_gpu_a_rank_is_accepted(self, torchrun, monkeypatch, device, local_world_size):
        # cuda and auto take cuda:LOCAL_RANK; one rank a machine (multi-node) may name its GPU
        from value_model._runtime import distributed_session

        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world_size)
        with distributed_session(device=device):
            pass
        assert torchrun["device"] == ("cuda:1" if device == "cuda:1" else "cuda:0") and "init" in torchrun
