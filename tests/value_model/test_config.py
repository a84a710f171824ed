"""Training configuration: the shipped recipes load, and bad values are reported all at once."""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT
from value_model.config import TrainConfig, load_config


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

    def test_every_invalid_value_is_reported_in_one_error(self):
        with pytest.raises(ValueError, match="max_length must be >= 16.*val_fraction must be in"):
            TrainConfig(max_length=4, val_fraction=1.5)
