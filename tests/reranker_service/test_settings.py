"""Settings: the frozen service config, its validation, and ``Settings.from_env`` (``HARVEST_*``)."""

from __future__ import annotations

import dataclasses

import pytest

from reranker_service import Settings


class TestValidation:
    def test_defaults_are_valid_when_nothing_is_given(self):
        settings = Settings()
        assert (settings.host, settings.port, settings.api_keys, settings.tracking_uri) == (
            "127.0.0.1",
            8765,
            (),
            None,
        )

    def test_settings_are_frozen_when_built(self):
        with pytest.raises(dataclasses.FrozenInstanceError):
            Settings().port = 1  # type: ignore[misc]

    def test_every_problem_is_reported_at_once_when_several_values_are_invalid(self):
        with pytest.raises(ValueError, match="invalid Settings") as raised:
            Settings(model="", port=0, max_candidates=0, max_request_bytes=0, max_queue=0)
        message = str(raised.value)
        for part in (
            "model must name",
            "port must be in 1..65535, got 0",
            "max_candidates must be >= 1",
            "max_request_bytes must be >= 1",
            "max_queue must be >= 1",
        ):
            assert part in message

    def test_positional_arguments_are_refused(self):
        with pytest.raises(TypeError):
            Settings("models:/x@y")  # type: ignore[misc]

    def test_updated_ignores_none_and_changes_the_rest(self):
        settings = Settings().updated(port=9000, model=None)
        assert (settings.port, settings.model) == (9000, Settings().model)


class TestFromEnv:
    def test_port_api_keys_and_tracking_uri_are_read_from_the_environment(self):
        env = {
            "HARVEST_PORT": "9001",
            "HARVEST_API_KEYS": "k1, k2,,",
            "MLFLOW_TRACKING_URI": "sqlite:///x.db",
        }
        settings = Settings.from_env(env)
        assert settings.port == 9001
        assert settings.api_keys == ("k1", "k2")
        assert settings.tracking_uri == "sqlite:///x.db"

    def test_every_harvest_variable_is_read_when_set(self):
        env = {
            "HARVEST_MODEL": "models:/m@a",
            "HARVEST_HOST": "0.0.0.0",
            "HARVEST_MAX_CANDIDATES": "8",
            "HARVEST_MAX_REQUEST_BYTES": "4096",
            "HARVEST_MAX_QUEUE": "3",
        }
        settings = Settings.from_env(env)
        assert (
            settings.model,
            settings.host,
            settings.max_candidates,
            settings.max_request_bytes,
            settings.max_queue,
        ) == ("models:/m@a", "0.0.0.0", 8, 4096, 3)

    def test_empty_variables_keep_the_defaults(self):
        assert Settings.from_env({"HARVEST_PORT": "", "HARVEST_API_KEYS": ""}) == Settings()

    def test_os_environ_is_read_when_no_mapping_is_given(self, monkeypatch):
        monkeypatch.setenv("HARVEST_PORT", "9002")
        monkeypatch.setenv("HARVEST_API_KEYS", "only")
        settings = Settings.from_env()
        assert (settings.port, settings.api_keys) == (9002, ("only",))

    def test_overrides_win_over_the_environment_and_none_is_ignored(self):
        settings = Settings.from_env(
            {"HARVEST_PORT": "9001", "HARVEST_MAX_QUEUE": "5"}, port=9100, max_queue=None
        )
        assert (settings.port, settings.max_queue) == (9100, 5)

    @pytest.mark.parametrize(
        ("variable", "raw"),
        [
            ("HARVEST_PORT", "eighty"),
            ("HARVEST_MAX_CANDIDATES", "1.5"),
            ("HARVEST_MAX_QUEUE", "many"),
            ("HARVEST_MAX_REQUEST_BYTES", "8MiB"),
        ],
    )
    def test_unparsable_value_raises_value_error_naming_the_variable(self, variable, raw):
        with pytest.raises(ValueError, match=f"{variable}='{raw}' is not a valid int"):
            Settings.from_env({variable: raw})

    @pytest.mark.parametrize(("variable", "raw"), [("HARVEST_PORT", "70000"), ("HARVEST_MAX_QUEUE", "0")])
    def test_out_of_range_value_raises_value_error_naming_the_variable(self, variable, raw):
        # The value parses as an int but fails validation; the message should still say where it came from.
        with pytest.raises(ValueError, match=variable):
            Settings.from_env({variable: raw})


class TestServingSettings:
    def test_booleans_floats_and_optional_ints_are_parsed_from_the_environment(self):
        settings = Settings.from_env(
            {
                "HARVEST_NEIGHBORS": "yes",
                "HARVEST_LAKE": "/tmp/lake",
                "HARVEST_MAX_WAIT_MS": "2.5",
                "HARVEST_INDEX_VERSION": "7",
                "HARVEST_RELOAD_POLL_S": "30",
            }
        )
        assert (
            settings.neighbors,
            settings.lake,
            settings.max_wait_ms,
            settings.index_version,
            settings.reload_poll_s,
        ) == (True, "/tmp/lake", 2.5, 7, 30.0)

    def test_shutdown_timeout_is_read_from_the_environment_and_a_flag_wins(self):
        assert Settings().shutdown_timeout_s == 30.0
        env = {"HARVEST_SHUTDOWN_TIMEOUT_S": "2.5"}
        assert Settings.from_env(env).shutdown_timeout_s == 2.5
        assert (
            Settings.from_env(env, shutdown_timeout_s="0").shutdown_timeout_s == 0
        )  # --shutdown-timeout-s 0
        with pytest.raises(ValueError, match=r"shutdown_timeout_s must be >= 0.*HARVEST_SHUTDOWN_TIMEOUT_S"):
            Settings.from_env({"HARVEST_SHUTDOWN_TIMEOUT_S": "-1"})

    def test_drain_is_off_by_default_read_from_the_environment_and_never_negative(self):
        assert Settings().drain_s == 0
        assert Settings.from_env({"HARVEST_DRAIN_S": "5"}).drain_s == 5.0
        assert Settings.from_env({"HARVEST_DRAIN_S": "5"}, drain_s="1.5").drain_s == 1.5  # --drain-s 1.5
        with pytest.raises(ValueError, match=r"drain_s must be >= 0.*HARVEST_DRAIN_S"):
            Settings.from_env({"HARVEST_DRAIN_S": "-1"})

    def test_flag_strings_are_parsed_like_variables(self):
        settings = Settings.from_env({}, index_version="3", max_wait_ms="0.5", neighbors=False)
        assert (settings.index_version, settings.max_wait_ms, settings.neighbors) == (3, 0.5, False)

    def test_an_unparsable_boolean_names_the_variable(self):
        with pytest.raises(ValueError, match="HARVEST_NEIGHBORS='maybe' is not a valid bool"):
            Settings.from_env({"HARVEST_NEIGHBORS": "maybe"})

    def test_neighbors_without_a_lake_is_refused(self):
        with pytest.raises(ValueError, match="neighbors needs a lake"):
            Settings(neighbors=True)

    def test_api_keys_file_adds_keys_and_skips_comments(self, tmp_path):
        from reranker_service.settings import load_api_keys

        path = tmp_path / "keys"
        path.write_text("# team A\nka\n\n  kb  \nka\n")
        assert load_api_keys(Settings(api_keys=("k0",), api_keys_file=str(path))) == ("k0", "ka", "kb")
