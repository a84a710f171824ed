"""Training, MLflow registration and evaluation, end to end on real lake data with small backbones."""

from __future__ import annotations

import dataclasses

import json

import mlflow
import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from trajectory_lake.cli import main
from trajectory_lake.slices import SLICE_TABLES
from value_model.config import TrainConfig
from value_model.data import load_examples, split_by_task
from value_model.inference import Calibration, Scorer
from value_model.model import ValueModel
from value_model.pipeline import evaluate_registered, train_from_lake
from value_model.tracking import ModelNotFoundError, log_and_register, resolve_model
from value_model.trainer import evaluate_frame, fit

pytestmark = pytest.mark.slow


@pytest.fixture
def harvest_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def _synthetic(n_tasks: int) -> pl.DataFrame:
    """Tasks whose good candidate says 'correct fix' and bad one 'broken hack': learnable from content."""
    rows = []
    for t in range(n_tasks):
        for label, text in ((1.0, "correct fix keeps tests passing"), (0.0, "broken hack disables the tests")):
            rows.append({"task_id": f"t{t}", "candidate_id": f"t{t}-{int(label)}", "prompt": f"issue number {t}",
                         "content": f"diff {t}: {text}", "label": label})
    return pl.DataFrame(rows)


class TestFit:
    def test_training_learns_a_content_signal_that_transfers_to_held_out_tasks(self, tiny_encoder_dir):
        data = _synthetic(40)
        train, val = split_by_task(data, val_fraction=0.25, seed=0)
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        config = TrainConfig(backbone=str(tiny_encoder_dir), max_length=32, epochs=6, batch_size=8,
                             learning_rate=1e-3, head_learning_rate=1e-2, warmup_ratio=0.0)
        result = fit(model, tokenizer, train, val, config)
        assert result.metrics["auroc"] > 0.9
        assert result.metrics["gap_closed"] > 0.9
        assert result.calibration.scale > 0

    def test_training_a_decoder_backbone_runs_with_last_token_pooling(self, tiny_decoder_dir):
        data = _synthetic(8)
        train, val = split_by_task(data, val_fraction=0.25, seed=0)
        model, tokenizer = ValueModel.from_backbone(str(tiny_decoder_dir))
        result = fit(model, tokenizer, train, val, TrainConfig(max_length=32, epochs=1, batch_size=4))
        assert model.pooling == "last" and set(result.metrics) >= {"best_at_1", "auroc", "brier"}

    def test_pairwise_with_micro_batches_of_one_example_is_refused_not_zero(self, tiny_encoder_dir):
        # pairs only meet inside a micro-batch: with one example per micro-batch the term was always 0
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        config = TrainConfig(backbone=str(tiny_encoder_dir), max_length=32, epochs=1, batch_size=4,
                             grad_accum_steps=4, objective="bce=1,pairwise=0.25")
        with pytest.raises(ValueError, match=r"micro-batches hold 1 example .*grad_accum_steps 4"):
            fit(model, tokenizer, _synthetic(4), _synthetic(4).clear(), config)
        halved = dataclasses.replace(config, grad_accum_steps=2)
        result = fit(model, tokenizer, _synthetic(4), _synthetic(4).clear(), halved)
        assert len(result.step_losses) == 2

    def test_a_global_batch_that_the_micro_batches_cannot_make_is_refused(self, tiny_encoder_dir):
        # 9 over 2 micro-batches of 4 used to train 8 per step, unlike one process at batch_size 9
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        config = TrainConfig(backbone=str(tiny_encoder_dir), max_length=32, epochs=1, batch_size=9,
                             grad_accum_steps=2)
        with pytest.raises(ValueError, match=r"batch_size 9 .* not a multiple .* use 8 or 10"):
            fit(model, tokenizer, _synthetic(8), _synthetic(8).clear(), config)

    def test_splits_sharing_a_task_are_refused(self, tiny_encoder_dir):
        data = _synthetic(2)
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        with pytest.raises(ValueError, match="in both splits"):
            fit(model, tokenizer, data, data, TrainConfig(max_length=32))

    def test_a_diverged_model_is_named_so_not_blamed_on_the_candidates(self):
        # the metrics refuse NaN scores (bf77058) with advice about the data: the values are the model's
        frame = _synthetic(2)
        values = np.array([np.nan, 0.5, np.nan, 0.1])
        with pytest.raises(ValueError, match="2 of 4 validation examples are NaN or infinite: training div"):
            evaluate_frame(frame, values, Calibration())

    def test_calibration_never_inverts_the_ranking(self):
        anti = Calibration.fit([3.0, 2.0, 1.0, 0.0], [0, 0, 1, 1])
        assert anti.scale >= 0
        good = Calibration.fit([0.0, 1.0, 2.0, 3.0, 0.5, 2.5], [0, 0, 1, 1, 0, 1])
        assert good.scale > 0 and good.apply(pl.Series([3.0]).to_numpy())[0] > 0.5


class TestRegistry:
    def test_reference_positives_add_one_gold_patch_per_training_task(self, lite_lake, harvest_home, tiny_encoder_dir):
        base = TrainConfig(backbone=str(tiny_encoder_dir), max_length=32, epochs=1, max_examples=8)
        plain = train_from_lake(lite_lake, base, register=None)
        more = train_from_lake(lite_lake, dataclasses.replace(base, reference_positives=True), register=None)
        train, _ = split_by_task(load_examples(lite_lake).frame, val_fraction=base.val_fraction,
                                 seed=base.split_seed)
        assert more.lineage["reference_positives"] == train.get_column("task_id").n_unique()
        # max_examples caps what is trained on, gold patches included
        assert more.n_train == plain.n_train == 8
        assert more.n_val == plain.n_val and more.lineage["val_tasks"] == plain.lineage["val_tasks"]

    def test_train_from_lake_logs_and_registers_a_model_that_loads_by_alias(self, lite_lake, harvest_home, tiny_encoder_dir):
        config = TrainConfig(backbone=str(tiny_encoder_dir), max_length=48, epochs=1, max_examples=32)
        report = train_from_lake(lite_lake, config, register="lite-value")
        assert report.registered.model_uri == "models:/lite-value/1"
        assert (harvest_home / "mlflow.db").is_file()  # the default local store
        directory, facts = resolve_model("models:/lite-value@champion")
        assert facts["version"] == "1" and facts["run_id"] == report.registered.run_id
        scorer = Scorer.from_directory(directory)
        assert scorer.info["lineage"]["table_versions"] == {t: lite_lake.version(t) for t in SLICE_TABLES}
        # the training slice is saved in the lake, so vacuum keeps the versions it read
        manifest = scorer.info["slice_manifest"]
        assert manifest["slice_id"] in lite_lake.read("slices")["slice_id"].to_list()
        assert lite_lake.pinned_versions()["candidates"] >= {manifest["versions"]["candidates"]}
        # params, metrics and lineage are on the run
        run = mlflow.get_run(report.registered.run_id)
        assert run.data.params["max_length"] == "48"
        assert "val_best_at_1" in run.data.metrics and "baseline_majority_vote_best_at_1" in run.data.metrics
        # the training curve too: every optimizer step's loss (it never reached MLflow before)
        curve = mlflow.MlflowClient().get_metric_history(report.registered.run_id, "train_loss")
        curve = sorted(curve, key=lambda m: m.step)
        assert [m.step for m in curve] == list(range(1, len(report.result.step_losses) + 1))
        assert [m.value for m in curve] == pytest.approx(report.result.step_losses)
        # the pyfunc flavour scores too
        pyfunc = mlflow.pyfunc.load_model("models:/lite-value@champion")
        rows = load_examples(lite_lake).frame.filter(pl.col("task_id") == pl.col("task_id").first())
        scores = pyfunc.predict(rows.select("prompt", candidate="content").to_pandas())
        assert len(scores) == rows.height and all(0 <= s <= 1 for s in scores)
        # the same joint scores the service computes for that task's candidate set
        expected = scorer.score(rows["prompt"][0], rows["content"].to_list()).scores
        assert max(abs(a - b) for a, b in zip(scores, expected, strict=True)) < 1e-6
        # no validation task was trained on
        examples = load_examples(lite_lake)
        train, val = split_by_task(examples.frame, val_fraction=config.val_fraction, seed=config.split_seed)
        assert report.n_val == len(val)

    def test_the_same_name_and_version_in_another_store_is_not_served_from_the_download_cache(
        self, harvest_home, tmp_path
    ):
        # two stores (a fresh mlflow.db, or dev and prod servers) each hold a `vm` version 1: the download
        # cache under $HARVEST_HOME/models served the first store's model for the second
        for tag in ("first", "second"):
            artefact = tmp_path / tag / "model"
            artefact.mkdir(parents=True)
            (artefact / "harvest.json").write_text(json.dumps({"tag": tag}))
            uri = f"sqlite:///{tmp_path / tag / 'mlflow.db'}"
            registered = log_and_register(model_dir=artefact, params={}, metrics={}, lineage={},
                                          register="vm", uri=uri)
            assert registered.model_uri == "models:/vm/1"
            for _ in range(2):  # downloaded, then from the cache
                directory, facts = resolve_model("models:/vm@champion", uri=uri)
                assert json.loads((directory / "harvest.json").read_text()) == {"tag": tag}
                assert facts["run_id"] == registered.run_id

    def test_an_unknown_model_reference_raises_model_not_found(self, harvest_home):
        with pytest.raises(ModelNotFoundError):
            resolve_model("models:/nothing-here@champion")
        with pytest.raises(ModelNotFoundError, match="no such directory"):
            resolve_model("/definitely/not/here")


class TestCommands:
    def test_harvest_train_and_evaluate_print_the_selection_table_against_baselines(self, lite_lake, harvest_home, tiny_encoder_dir):
        runner = CliRunner()
        result = runner.invoke(main, ["train", "--lake", lite_lake.uri, "--register", "cli-value", "--backbone",
                                      str(tiny_encoder_dir), "--max-length", "32", "--epochs", "1",
                                      "--max-examples", "16"])
        assert result.exit_code == 0, result.output
        assert "Best@1" in result.output and "majority vote" in result.output
        assert "models:/cli-value@champion" in result.output
        assert "trained on 16 examples" in result.output  # the capped count, not the slice's
        evaluated = runner.invoke(main, ["evaluate", "--lake", lite_lake.uri, "--model", "models:/cli-value@champion",
                                         "--json"])
        assert evaluated.exit_code == 0, evaluated.output
        body = json.loads(evaluated.stdout)
        assert 0 <= body["model"]["best_at_1"] <= body["model"]["oracle"] <= 1
        assert body["baselines"]["majority_vote"]["random"] == pytest.approx(body["model"]["random"])

    def test_training_an_empty_lake_fails_with_a_clear_message(self, tmp_path, harvest_home):
        from trajectory_lake import Lake

        lake = Lake(tmp_path / "empty").create()
        result = CliRunner().invoke(main, ["train", "--lake", lake.uri, "--max-length", "32"])
        assert result.exit_code != 0 and "holds no 'patch' candidates" in result.output

    def test_bad_flag_values_are_rejected_before_training(self, harvest_home):
        result = CliRunner().invoke(main, ["train", "--max-length", "4"])
        assert result.exit_code != 0 and "max_length must be >= 16" in result.output
