"""Every objective, candidate kind and backbone kind, trained briefly on real lake data.

Trajectory-level examples are SWE-bench Lite patches (``lite_lake``); step-level examples are the
actions of real tau-bench / tau2-bench trajectories (``agent_lake``). Each test trains a tiny random
model for a few steps and checks what training must do on any data: lower its objective on the
examples it trained on, produce finite, deterministic scores and an artefact that reloads.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch

from value_model.config import TrainConfig
from value_model.data import contexts_of, load_examples
from value_model.inference import Scorer, predict_values
from value_model.losses import group_ids, loss_terms
from value_model.model import ValueModel
from value_model.trainer import backbone_dtype, fit, td_targets_of

pytestmark = pytest.mark.slow


def _mixed_tasks(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """The first ``n`` tasks (by id) with both a positive and a negative candidate."""
    stats = frame.group_by("task_id").agg(pl.col("label").min().alias("lo"), pl.col("label").max().alias("hi"))
    tasks = stats.filter(pl.col("lo") < pl.col("hi")).sort("task_id").head(n)["task_id"]
    return frame.filter(pl.col("task_id").is_in(tasks.implode())).sort("task_id", "candidate_id")


def _objective(model, tokenizer, frame, config, steps=None) -> float:
    """The config's objective over all of ``frame`` in eval mode (one batch, no dropout)."""
    texts = frame["content"].to_list()
    contexts = contexts_of(frame, steps) if config.uses_context else None
    values, _ = predict_values(model, tokenizer, frame["prompt"].to_list(), texts, max_length=config.max_length,
                               contexts=contexts, context_steps=config.context_steps)
    targets = None
    if "td" in config.objective.active():
        targets = torch.tensor(td_targets_of(frame, values, gamma=config.gamma, lam=config.td_lambda))
    loss, _ = loss_terms(torch.tensor(values), labels=torch.tensor(frame["label"].to_numpy()),
                         groups=group_ids(frame["task_id"].to_list()), targets=targets,
                         weights=config.objective.active())
    return float(loss)


@pytest.fixture(scope="module")
def lite_subset(lite_lake) -> pl.DataFrame:
    return _mixed_tasks(load_examples(lite_lake).frame, 6)


@pytest.fixture(scope="module")
def action_subset(action_examples) -> pl.DataFrame:
    """Two successful and two failed real trajectories, every action of each."""
    frame = action_examples.frame
    per = frame.group_by("trajectory_id").agg(pl.col("label").first(), pl.len()).sort("len", "trajectory_id")
    keep = pl.concat([per.filter(pl.col("label") == 1).head(2), per.filter(pl.col("label") == 0).head(2)])
    return frame.filter(pl.col("trajectory_id").is_in(keep["trajectory_id"].implode()))


EMPTY = pl.DataFrame(schema={"task_id": pl.String, "prompt": pl.String, "content": pl.String, "label": pl.Float32})


class TestTrajectoryLevel:
    @pytest.mark.parametrize("objective", ["bce", "pairwise", "bce=1,pairwise=0.5"])
    def test_training_lowers_the_objective_on_real_lite_patches(self, objective, lite_subset, tiny_encoder_dir):
        config = TrainConfig(backbone=str(tiny_encoder_dir), objective=objective, max_length=64, epochs=4,
                             batch_size=12, learning_rate=1e-3, head_learning_rate=1e-2, warmup_ratio=0.0)
        model, tokenizer = ValueModel.from_backbone(config.backbone)
        before = _objective(model, tokenizer, lite_subset, config)
        result = fit(model, tokenizer, lite_subset, EMPTY, config)
        after = _objective(result.model, tokenizer, lite_subset, config)
        assert after < before
        assert all(np.isfinite(result.step_losses))

    def test_answers_with_their_trajectory_as_context_train_and_score_the_same_after_reloading(
        self, agent_lake, tiny_decoder_dir, tmp_path
    ):
        examples = load_examples(agent_lake, kind="answer")
        from value_model.data import load_steps

        steps = load_steps(agent_lake, examples.frame["trajectory_id"])
        config = TrainConfig(backbone=str(tiny_decoder_dir), kind="answer", include_context=True,
                             include_reasoning=True, context_steps=4, max_length=128, epochs=2, batch_size=4)
        model, tokenizer = ValueModel.from_backbone(config.backbone)
        result = fit(model, tokenizer, examples.frame, EMPTY, config, steps=steps)
        assert len(result.step_losses) == 6 and all(np.isfinite(result.step_losses))
        result.model.save(tmp_path / "m", tokenizer, max_length=config.max_length,
                          serialize={"context_steps": 4, "include_reasoning": True})
        scorer = Scorer.from_directory(tmp_path / "m")
        row = examples.frame.row(0, named=True)
        context = steps[row["trajectory_id"]]
        expected, _ = predict_values(result.model, tokenizer, [row["prompt"]], [row["content"]], max_length=128,
                                     contexts=[context], context_steps=4, include_reasoning=True)
        scored = scorer.score(row["prompt"], [row["content"]], context=context)
        assert scored.values == pytest.approx(expected, abs=1e-5) and scored.truncated == [True]
        # the scorer's raw values (what the pyfunc and evaluation combine) serialize as the model was saved
        raw, truncated = scorer.raw_values([row["prompt"]], [row["content"]], contexts=[context])
        assert raw == pytest.approx(expected, abs=1e-5) and truncated == [True]

    def test_context_without_steps_is_refused(self, lite_subset, tiny_encoder_dir):
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        with pytest.raises(ValueError, match="pass steps=load_steps"):
            fit(model, tokenizer, lite_subset, EMPTY, TrainConfig(include_context=True))


class TestActionLevel:
    @pytest.mark.parametrize(
        ("objective", "td_lambda", "gamma"),
        [("td", 1.0, 1.0), ("td", 0.5, 0.9), ("bce=1,td=1", 1.0, 0.95), ("pairwise", 1.0, 1.0)],
    )
    def test_training_lowers_the_objective_on_real_actions(self, objective, td_lambda, gamma, action_examples,
                                                           action_subset, tiny_decoder_dir):
        config = TrainConfig(backbone=str(tiny_decoder_dir), kind="action", trajectory_kind="answer",
                             objective=objective, td_lambda=td_lambda, gamma=gamma, max_length=96, epochs=3,
                             batch_size=8, learning_rate=3e-3, head_learning_rate=3e-2, warmup_ratio=0.0)
        model, tokenizer = ValueModel.from_backbone(config.backbone)
        before = _objective(model, tokenizer, action_subset, config, action_examples.steps)
        result = fit(model, tokenizer, action_subset, EMPTY, config, steps=action_examples.steps)
        after = _objective(result.model, tokenizer, action_subset, config, action_examples.steps)
        assert after < before

    def test_validation_on_held_out_tasks_reports_selection_metrics_and_the_td_error(
        self, action_examples, tiny_decoder_dir
    ):
        frame = action_examples.frame
        val_task = sorted(frame["task_id"].unique())[0]
        train, val = frame.filter(pl.col("task_id") != val_task), frame.filter(pl.col("task_id") == val_task)
        config = TrainConfig(backbone=str(tiny_decoder_dir), kind="action", trajectory_kind="answer", objective="td",
                             max_length=64, epochs=1, batch_size=32, max_examples=40)
        model, tokenizer = ValueModel.from_backbone(config.backbone)
        result = fit(model, tokenizer, train, val, config, steps=action_examples.steps)
        assert 0 <= result.metrics["td_mse"] <= 1 and "best_at_1" in result.metrics
        assert result.metrics["truncated_fraction"] > 0

    def test_scores_are_deterministic_for_a_seed(self, action_examples, action_subset, tiny_decoder_dir):
        config = TrainConfig(backbone=str(tiny_decoder_dir), kind="action", trajectory_kind="answer", objective="td",
                             max_length=64, epochs=1, batch_size=8)
        runs = []
        for global_seed in (1, 2):
            torch.manual_seed(global_seed)  # the global RNG's state must not matter
            model, tokenizer = ValueModel.from_backbone(config.backbone, seed=config.seed)
            result = fit(model, tokenizer, action_subset, EMPTY, config, steps=action_examples.steps)
            values, _ = predict_values(result.model, tokenizer, action_subset["prompt"].to_list(),
                                       action_subset["content"].to_list(), max_length=64,
                                       contexts=contexts_of(action_subset, action_examples.steps))
            runs.append((result.step_losses, values.tolist()))
        assert runs[0] == runs[1] and np.all(np.isfinite(runs[0][1]))


class TestScale:
    def test_gradient_accumulation_gives_the_same_training_as_one_big_batch(self, lite_subset, tiny_decoder_dir):
        heads, losses = [], []
        for accumulate in (1, 2, 4):
            config = TrainConfig(backbone=str(tiny_decoder_dir), max_length=48, epochs=1, batch_size=8,
                                 grad_accum_steps=accumulate, learning_rate=1e-3, warmup_ratio=0.0)
            model, tokenizer = ValueModel.from_backbone(config.backbone)
            result = fit(model, tokenizer, lite_subset.head(32), EMPTY, config)  # 4 full steps whatever the split
            heads.append(result.model.head.weight.detach().clone())
            losses.append(result.step_losses)
        for head, loss in zip(heads[1:], losses[1:], strict=True):
            assert loss == pytest.approx(losses[0], rel=1e-4)
            assert torch.allclose(head, heads[0], atol=1e-5)

    def test_gradient_checkpointing_does_not_change_the_losses(self, lite_subset, tiny_decoder_dir):
        losses = []
        for checkpointing in (False, True):
            config = TrainConfig(backbone=str(tiny_decoder_dir), max_length=48, epochs=1, batch_size=16,
                                 gradient_checkpointing=checkpointing, objective="bce=1,pairwise=1")
            model, tokenizer = ValueModel.from_backbone(config.backbone)
            losses.append(fit(model, tokenizer, lite_subset, EMPTY, config).step_losses)
        assert losses[1] == pytest.approx(losses[0], rel=1e-5)

    def test_lora_under_bf16_trains_and_saves_a_plain_artefact(self, action_examples, action_subset,
                                                               tiny_decoder_dir, tmp_path):
        config = TrainConfig(backbone=str(tiny_decoder_dir), kind="action", trajectory_kind="answer",
                             objective="bce=1,td=1", lora_rank=4, lora_dropout=0.0, precision="bf16",
                             gradient_checkpointing=True, max_length=64, epochs=1, batch_size=8,
                             learning_rate=1e-2)
        assert backbone_dtype(config) == torch.bfloat16
        model, tokenizer = ValueModel.from_backbone(config.backbone, dtype=backbone_dtype(config))
        frozen = {n: p.detach().clone() for n, p in model.backbone.named_parameters()}
        result = fit(model, tokenizer, action_subset, EMPTY, config, steps=action_examples.steps)
        base = dict(result.model.backbone.get_base_model().named_parameters())
        assert all(torch.equal(base[n.replace("base_layer.", "")] if n in base else p, frozen[n])
                   for n, p in frozen.items() if n in base)  # the backbone's own weights never moved
        assert all(np.isfinite(result.step_losses))
        contexts = contexts_of(action_subset, action_examples.steps)
        before, _ = predict_values(result.model, tokenizer, action_subset["prompt"].to_list(),
                                   action_subset["content"].to_list(), max_length=64, contexts=contexts)
        result.model.save(tmp_path / "m", tokenizer, max_length=64)
        loaded, loaded_tokenizer, _ = ValueModel.load(tmp_path / "m")
        after, _ = predict_values(loaded, loaded_tokenizer, action_subset["prompt"].to_list(),
                                  action_subset["content"].to_list(), max_length=64, contexts=contexts)
        assert np.all(np.isfinite(after)) and next(loaded.parameters()).dtype == torch.float32
        assert after == pytest.approx(before, abs=0.05)  # bf16 weights read back in float32


@pytest.mark.gpu
def test_on_cuda_auto_precision_trains_lora_under_bf16_autocast(action_examples, action_subset, tiny_decoder_dir):
    config = TrainConfig(backbone=str(tiny_decoder_dir), kind="action", trajectory_kind="answer", objective="td",
                         lora_rank=4, gradient_checkpointing=True, max_length=64, epochs=1, batch_size=8)
    assert backbone_dtype(config) == torch.bfloat16  # auto precision on CUDA is bf16
    model, tokenizer = ValueModel.from_backbone(config.backbone, dtype=backbone_dtype(config))
    result = fit(model, tokenizer, action_subset, EMPTY, config, steps=action_examples.steps)
    assert next(result.model.head.parameters()).device.type == "cuda"
    assert all(np.isfinite(result.step_losses))
