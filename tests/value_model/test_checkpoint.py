"""Checkpoint and resume: a run that stops and resumes from its last checkpoint trains exactly what a run
that never stopped does; a checkpoint of another run, or a half-written one, is never resumed."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.value_model._ddp_worker import RECIPES
from trajectory_lake import Lake
from trajectory_lake._hashing import canonical_json
from value_model._runtime import Runtime
from value_model.checkpoint import (
    CheckpointError,
    TrainerState,
    data_digest,
    find_checkpoint,
    list_checkpoints,
    save_checkpoint,
    set_aside_newer,
)
from value_model.config import TrainConfig
from value_model.data import split_by_task
from value_model.model import ValueModel
from value_model.trainer import TrainResult, fit

pytestmark = pytest.mark.slow


class _Crash(Exception):
    """Stands for the process dying right after a checkpoint was written."""


def _synthetic(n_tasks: int) -> pl.DataFrame:
    rows = [
        {"task_id": f"t{t}", "prompt": f"issue number {t}", "content": f"diff {t}: {text}", "label": label}
        for t in range(n_tasks)
        for label, text in ((1.0, "correct fix keeps tests passing"), (0.0, "broken hack disables tests"))
    ]
    return pl.DataFrame(rows)


def _crash_after_step(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make training die right after it checkpoints optimizer step ``step``."""
    from value_model import trainer

    real = trainer.save_checkpoint

    def save_then_crash(directory, *, state, **kwargs):
        path = real(directory, state=state, **kwargs)
        if state.step == step:
            raise _Crash(path)
        return path

    monkeypatch.setattr(trainer, "save_checkpoint", save_then_crash)


def _fit(backbone: Path, train, val, config: TrainConfig, **kwargs) -> TrainResult:
    model, tokenizer = ValueModel.from_backbone(str(backbone), seed=config.seed)
    return fit(model, tokenizer, train, val, config, **kwargs)


def _weights(result: TrainResult) -> dict[str, list[float]]:
    return {name: p.detach().double().flatten().tolist() for name, p in result.model.named_parameters()}


def _assert_same_training(resumed: TrainResult, straight: TrainResult) -> None:
    assert resumed.step_losses == pytest.approx(straight.step_losses, rel=1e-6, abs=1e-6)
    straight_weights, resumed_weights = _weights(straight), _weights(resumed)
    assert resumed_weights.keys() == straight_weights.keys()
    for name, values in straight_weights.items():
        assert resumed_weights[name] == pytest.approx(values, rel=1e-6, abs=1e-6), name
    assert resumed.val_values == pytest.approx(straight.val_values, rel=1e-6, abs=1e-6)


@pytest.fixture
def patches():
    return split_by_task(_synthetic(12), val_fraction=0.25, seed=0)


def _patch_config(backbone: Path, checkpoint_dir: Path, **changes) -> TrainConfig:
    options = {
        "max_length": 32,
        "epochs": 2,
        "batch_size": 4,
        "learning_rate": 1e-3,
        "head_learning_rate": 1e-2,
        "warmup_ratio": 0.25,
        "combiner": (),
        "checkpoint_every_steps": 2,
    }
    return TrainConfig(backbone=str(backbone), checkpoint_dir=str(checkpoint_dir), **{**options, **changes})


class TestDataDigest:
    def test_the_digest_hashes_the_lakes_canonical_json_of_each_row(self):
        rows = [["issue", "patch", 1.0, "t0"], {"b": [1, 2], "a": None}]
        lines = "".join(canonical_json(row) + "\n" for row in rows).encode()
        assert data_digest(rows) == "b2:" + hashlib.blake2b(lines, digest_size=16).hexdigest()

    def test_a_lone_surrogate_is_hashed_not_refused(self):
        # valid in a Python str and in JSON (as the escape \ud800), not encodable as UTF-8
        lone = data_digest([["issue \ud800", "patch", 1.0]])
        assert lone.startswith("b2:")
        assert lone != data_digest([["issue \ufffd", "patch", 1.0]])
        assert lone != data_digest([["issue \udc00", "patch", 1.0]])


def _save(directory: Path, step: int, *, keep: int = 2, loss: float = 0.0) -> Path:
    """A checkpoint of a one-weight model at ``step``, written as training writes one."""
    import torch

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    return save_checkpoint(directory, state=TrainerState(step=step, step_losses=[loss]), fingerprint={},
                           model=model, optimizer=optimizer, scheduler=scheduler, targets=None,
                           runtime=Runtime(), sharded=False, keep=keep)


class TestWriting:
    def test_the_directory_is_flushed_after_the_rename_and_after_pruning(self, tmp_path, monkeypatch):
        # a rename or removal is only durable once the directory holding it is flushed (POSIX)
        import os

        from value_model import checkpoint

        _save(tmp_path, 1, keep=1)
        synced: list[tuple[str, list[str]]] = []

        def fsync(fd: int) -> None:
            synced.append((os.readlink(f"/proc/self/fd/{fd}"), sorted(p.name for p in tmp_path.iterdir())))

        monkeypatch.setattr(checkpoint.os, "fsync", fsync)
        _save(tmp_path, 2, keep=1)
        directory = [names for path, names in synced if path == str(tmp_path)]
        assert ["step-00000001", "step-00000002"] in directory  # renamed in, the older not yet pruned
        assert synced[-1] == (str(tmp_path), ["step-00000002"])  # last, once pruned

    def test_a_crash_anywhere_in_replacing_a_step_leaves_a_complete_checkpoint_of_it(
        self, tmp_path, monkeypatch
    ):
        # The old one was renamed away and removed before the new one was renamed in: a crash between left
        # neither. Crash at each rename or removal in turn, until one replacement runs through.
        for crash_at in itertools.count():
            directory = tmp_path / str(crash_at)
            _save(directory, 3, loss=1.0)
            calls = 0

            def counted(real):
                def call(*args, **kwargs):
                    nonlocal calls
                    if calls == crash_at:
                        raise _Crash
                    calls += 1
                    return real(*args, **kwargs)

                return call

            with monkeypatch.context() as patch:
                patch.setattr(Path, "rename", counted(Path.rename))
                patch.setattr(shutil, "rmtree", counted(shutil.rmtree))
                try:
                    _save(directory, 3, loss=2.0)
                except _Crash:
                    finished = False
                else:
                    finished = True
            latest = find_checkpoint("latest", directory)
            assert latest is not None, f"no checkpoint after a crash at call {crash_at}"
            meta = json.loads((latest / "trainer.json").read_text())
            assert meta["step"] == 3 and meta["step_losses"] in ([1.0], [2.0]), crash_at
            _save(directory, 4)  # the next save clears what the crash left
            assert [p.name for p in list_checkpoints(directory)][-1] == "step-00000004"
            assert not list(directory.glob(".tmp-*"))
            if finished:
                assert meta["step_losses"] == [2.0]
                break
        assert crash_at >= 3


class TestResume:
    @pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
    def test_a_run_resumed_mid_epoch_trains_what_a_run_that_never_stopped_does(
        self, lora, patches, tiny_encoder_dir, tmp_path, monkeypatch
    ):
        train, val = patches
        options = {"lora_rank": 4, "lora_dropout": 0.1, "learning_rate": 1e-2} if lora else {}
        epoch_losses: dict[str, list[tuple[int, float]]] = {"straight": [], "resumed": []}

        def logger_of(run: str):
            def log(metrics, step):
                if "train_loss" in metrics:
                    epoch_losses[run].append((step, metrics["train_loss"]))

            return log

        straight = _fit(
            tiny_encoder_dir, train, val, _patch_config(tiny_encoder_dir, tmp_path / "a", **options),
            log=logger_of("straight"),
        )
        steps = len(straight.step_losses)
        assert steps == 10 and straight.resumed_from is None  # 5 steps an epoch: step 2 is inside epoch 0

        config = _patch_config(tiny_encoder_dir, tmp_path / "b", **options)
        with monkeypatch.context() as patch:
            _crash_after_step(patch, 2)
            with pytest.raises(_Crash):
                _fit(tiny_encoder_dir, train, val, config)
        resumed = _fit(tiny_encoder_dir, train, val, config, resume="latest", log=logger_of("resumed"))
        assert resumed.resumed_from == str(tmp_path / "b" / "step-00000002")
        _assert_same_training(resumed, straight)
        # the resumed epoch's logged loss is the mean of all its steps, those before the stop included
        assert [step for step, _ in epoch_losses["resumed"]] == [step for step, _ in epoch_losses["straight"]]
        assert [step for step, _ in epoch_losses["straight"]] == [5, 10]
        assert [loss for _, loss in epoch_losses["resumed"]] == pytest.approx(
            [loss for _, loss in epoch_losses["straight"]], rel=1e-6, abs=1e-6)

    def test_resuming_bootstrapped_td_targets_mid_epoch_uses_the_epochs_own_targets(
        self, agent_lake, tiny_decoder_dir, tmp_path, monkeypatch
    ):
        # TD(0.5) targets bootstrap from the model as it was when the epoch began: they are state
        load, options = RECIPES["action"]
        train, val, steps = load(Lake(agent_lake.uri))
        config = TrainConfig(
            backbone=str(tiny_decoder_dir),
            learning_rate=1e-3,
            warmup_ratio=0.0,
            device="cpu",
            checkpoint_every_steps=1,
            **{**options, "epochs": 2.0},
        )
        straight = _fit(
            tiny_decoder_dir, train, val, config.updated(checkpoint_dir=str(tmp_path / "a")), steps=steps
        )
        per_epoch = len(straight.step_losses) // 2
        assert per_epoch >= 2
        crashed = config.updated(checkpoint_dir=str(tmp_path / "b"))
        with monkeypatch.context() as patch:
            _crash_after_step(patch, per_epoch + 1)  # one step into the second epoch
            with pytest.raises(_Crash):
                _fit(tiny_decoder_dir, train, val, crashed, steps=steps)
        assert (tmp_path / "b" / f"step-{per_epoch + 1:08d}" / "targets.pt").is_file()
        resumed = _fit(tiny_decoder_dir, train, val, crashed, steps=steps, resume="latest")
        _assert_same_training(resumed, straight)

    def test_a_checkpoint_holds_the_state_and_only_the_newest_are_kept(
        self, patches, tiny_encoder_dir, tmp_path
    ):
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path, lora_rank=4, checkpoint_keep=2)
        _fit(tiny_encoder_dir, train, val, config)
        kept = list_checkpoints(tmp_path)
        assert [p.name for p in kept] == [
            "step-00000008",
            "step-00000010",
        ]  # of 2, 4, 5 (epoch end), 6, 8, 10
        last = kept[-1]
        assert {p.name for p in last.iterdir()} == {
            "trainer.json",
            "model.pt",
            "optimizer.pt",
            "scheduler.pt",
            "rng-0.pt",
        }
        meta = json.loads((last / "trainer.json").read_text())
        assert (meta["step"], meta["epoch"], meta["epoch_step"], len(meta["step_losses"])) == (10, 2, 0, 10)
        assert meta["fingerprint"]["config"]["learning_rate"] == config.learning_rate
        import torch

        saved = torch.load(last / "model.pt", weights_only=True)
        assert saved and all(
            "lora_" in name or name.startswith("head.") for name in saved
        )  # not the frozen base

    def test_every_file_is_flushed_to_disk_before_the_checkpoint_is_published(
        self, patches, tiny_encoder_dir, tmp_path, monkeypatch
    ):
        # a machine that dies after the rename must not leave a named checkpoint whose data never hit disk
        import os

        from value_model import checkpoint

        flushed = []
        monkeypatch.setattr(
            checkpoint.os, "fsync", lambda fd: flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        )
        train, val = patches
        _fit(tiny_encoder_dir, train, val, _patch_config(tiny_encoder_dir, tmp_path, epochs=0.2))  # 1 step
        (published,) = list_checkpoints(tmp_path)
        tmp = tmp_path / f".tmp-{published.name}"
        files = [path for path in flushed if path != str(tmp_path)]  # not the directory's own syncs
        assert sorted(files) == sorted(str(tmp / p.name) for p in published.iterdir())

    def test_a_finished_run_resumed_only_validates(self, patches, tiny_encoder_dir, tmp_path):
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path)
        straight = _fit(tiny_encoder_dir, train, val, config)
        again = _fit(tiny_encoder_dir, train, val, config, resume="latest")
        assert again.resumed_from == str(tmp_path / "step-00000010")
        _assert_same_training(again, straight)

    def test_continuing_from_an_older_checkpoint_sets_the_newer_ones_aside_so_latest_is_its_own(
        self, patches, tiny_encoder_dir, tmp_path, monkeypatch, caplog
    ):
        # The newer checkpoints were of the continuation abandoned: left in place, the new one's step 8
        # replaced theirs and resume="latest" then went back to their step 10.
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path, checkpoint_keep=3)
        straight = _fit(tiny_encoder_dir, train, val, config)  # keeps steps 6, 8, 10
        with monkeypatch.context() as patch:
            _crash_after_step(patch, 8)
            with caplog.at_level(logging.WARNING, logger="value_model.checkpoint"), pytest.raises(_Crash):
                _fit(tiny_encoder_dir, train, val, config, resume=str(tmp_path / "step-00000006"))
        assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000006", "step-00000008"]
        (aside,) = tmp_path.glob("abandoned-from-step-00000006-*")
        assert sorted(p.name for p in aside.iterdir()) == ["step-00000008", "step-00000010"]
        assert f"moved them to {aside}" in caplog.text
        resumed = _fit(tiny_encoder_dir, train, val, config, resume="latest")
        assert resumed.resumed_from == str(tmp_path / "step-00000008")
        _assert_same_training(resumed, straight)
        assert find_checkpoint(aside, None) == aside / "step-00000010"  # still there to go back to

    def test_a_run_that_would_checkpoint_without_a_directory_says_it_writes_none(
        self, patches, tiny_encoder_dir, tmp_path, caplog
    ):
        # A recipe may set checkpoint_every_steps and leave the directory to the command line; resuming
        # from a checkpoint's path without --checkpoint-dir continued with no checkpoints, saying nothing.
        train, val = patches
        _fit(tiny_encoder_dir, train, val, _patch_config(tiny_encoder_dir, tmp_path, epochs=0.4))  # steps 2
        no_dir = dataclasses.replace(_patch_config(tiny_encoder_dir, tmp_path, epochs=0.4), checkpoint_dir="")
        with caplog.at_level(logging.WARNING, logger="value_model.trainer"):
            resumed = _fit(tiny_encoder_dir, train, val, no_dir, resume=str(tmp_path / "step-00000002"))
        assert resumed.resumed_from == str(tmp_path / "step-00000002")
        assert "no checkpoint_dir: this run writes no checkpoints (it resumed from" in caplog.text
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="value_model.trainer"):
            _fit(tiny_encoder_dir, train, val, dataclasses.replace(no_dir, epochs=0.2))
        assert "writes no checkpoints (checkpoint_every_steps is 2)" in caplog.text

    def test_resume_latest_with_no_checkpoint_yet_starts_afresh(self, patches, tiny_encoder_dir, tmp_path):
        train, val = patches
        result = _fit(
            tiny_encoder_dir, train, val, _patch_config(tiny_encoder_dir, tmp_path / "new"), resume="latest"
        )
        assert result.resumed_from is None and len(result.step_losses) == 10


def _half_rmtree(real):
    """shutil.rmtree that dies after deleting the first model.pt under a checkpoint it removes."""

    def rmtree(path, *args, **kwargs):
        files = sorted(Path(path).rglob("model.pt")) if Path(path).exists() else []
        if not files:
            return real(path, *args, **kwargs)
        files[0].unlink()
        raise _Crash(path)

    return rmtree


def _names(paths) -> list[str]:
    return sorted(p.name for p in paths)


class TestAbandonedContinuations:
    """Resuming from an older checkpoint moves the newer ones aside into abandoned-from-step-N-* folders;
    these were never removed, so a job that resumed again and again filled the disk (issue 4)."""

    def test_a_job_resuming_again_and_again_keeps_only_the_latest_abandoned_folder_4(self, tmp_path):
        for step in (2, 4, 6):
            _save(tmp_path, step, keep=3)
        for _ in range(3):
            aside = set_aside_newer(tmp_path, tmp_path / "step-00000002")
            for step in (4, 6):  # the run goes on past step 2 again
                _save(tmp_path, step, keep=3)
        assert _names(tmp_path.glob("abandoned-from-*")) == [aside.name]
        assert _names(aside.iterdir()) == ["step-00000004", "step-00000006"]
        assert _names(list_checkpoints(tmp_path)) == ["step-00000002", "step-00000004", "step-00000006"]
        assert not list(tmp_path.glob(".tmp-*"))

    def test_the_folders_kept_are_the_most_recently_set_aside_not_the_last_by_name_4(self, tmp_path):
        for step in (2, 4, 6):
            _save(tmp_path, step, keep=3)
        first = set_aside_newer(tmp_path, tmp_path / "step-00000004", keep_abandoned=2)  # step 6
        second = set_aside_newer(tmp_path, tmp_path / "step-00000002", keep_abandoned=2)  # step 4
        _save(tmp_path, 4, keep=3)
        third = set_aside_newer(tmp_path, tmp_path / "step-00000002", keep_abandoned=2)  # step 4 again
        assert first.name > second.name  # from-step-00000004 sorts after from-step-00000002 ...
        assert _names(tmp_path.glob("abandoned-from-*")) == _names([second, third])  # ... but is older

    def test_a_bound_above_the_folders_there_removes_none_4(self, tmp_path):
        # folders[:len(folders) - keep] with keep above the count sliced from the end: 3 folders under
        # keep_abandoned=5 lost the oldest one
        for step in (2, 4, 6, 8):
            _save(tmp_path, step, keep=4)
        asides = []
        for step in (6, 4, 2):  # each resume sets aside the checkpoints after ``step``
            asides.append(set_aside_newer(tmp_path, tmp_path / f"step-{step:08d}", keep_abandoned=5))
        assert _names(tmp_path.glob("abandoned-from-*")) == _names(asides)
        asides.append(set_aside_newer(tmp_path, tmp_path / "step-00000002", keep_abandoned=5))
        assert asides[-1] is None  # nothing newer than step 2 is live now
        assert _names(tmp_path.glob("abandoned-from-*")) == _names(asides[:3])

    def test_keep_abandoned_0_removes_the_newer_checkpoints_and_nothing_older_4(self, tmp_path):
        for step in (2, 4, 6, 8):
            _save(tmp_path, step, keep=4)
        assert set_aside_newer(tmp_path, tmp_path / "step-00000004", keep_abandoned=0) is None
        assert _names(list_checkpoints(tmp_path)) == ["step-00000002", "step-00000004"]
        assert not list(tmp_path.glob("abandoned-from-*")) and not list(tmp_path.glob(".tmp-*"))

    def test_the_folder_holding_the_checkpoint_resumed_from_is_never_removed_4(self, tmp_path):
        for step in (2, 4, 6):
            _save(tmp_path, step, keep=3)
        aside = set_aside_newer(tmp_path, tmp_path / "step-00000002")
        _save(tmp_path, 4, keep=3)  # a new continuation from step 2 ...
        resumed = aside / "step-00000006"  # ... given up to go back to the abandoned one
        assert set_aside_newer(tmp_path, resumed, keep_abandoned=0) is None  # nothing live is newer than 6
        assert _names(resumed.iterdir()) == ["model.pt", "optimizer.pt", "rng-0.pt", "scheduler.pt",
                                             "trainer.json"]
        assert _names(list_checkpoints(tmp_path)) == ["step-00000002", "step-00000004"]

    def test_a_crash_while_removing_an_abandoned_folder_leaves_no_half_removed_checkpoint_4(
        self, tmp_path, monkeypatch
    ):
        for step in (2, 4, 6):
            _save(tmp_path, step, keep=3)
        old = set_aside_newer(tmp_path, tmp_path / "step-00000002")
        _save(tmp_path, 4, keep=3)
        with monkeypatch.context() as patch:
            patch.setattr(shutil, "rmtree", _half_rmtree(shutil.rmtree))
            with pytest.raises(_Crash):
                set_aside_newer(tmp_path, tmp_path / "step-00000002")
        assert not old.exists()
        for folder in tmp_path.glob("abandoned-from-*"):  # what is still named a checkpoint is whole
            assert all((checkpoint / "model.pt").is_file() for checkpoint in list_checkpoints(folder))
        _save(tmp_path, 6, keep=3)  # the next save clears what the crash left
        assert not list(tmp_path.glob(".tmp-*"))

    def test_a_crash_while_pruning_a_stale_checkpoint_leaves_no_half_removed_checkpoint(
        self, tmp_path, monkeypatch
    ):
        # the oldest checkpoint was removed in place: a crash mid-removal left it named, listed and
        # resumable by path, without its weights
        _save(tmp_path, 1, keep=1)
        with monkeypatch.context() as patch:
            patch.setattr(shutil, "rmtree", _half_rmtree(shutil.rmtree))
            with pytest.raises(_Crash):
                _save(tmp_path, 2, keep=1)
        assert _names(list_checkpoints(tmp_path)) == ["step-00000002"]
        _save(tmp_path, 3, keep=1)
        assert _names(list_checkpoints(tmp_path)) == ["step-00000003"]
        assert not list(tmp_path.glob(".tmp-*"))

    def test_a_crash_while_removing_a_replaced_checkpoint_leaves_no_half_removed_checkpoint(
        self, tmp_path, monkeypatch
    ):
        # the same step written again removed the old one in place: a crash mid-removal left it listed
        # without its weights beside the new step-N.new
        _save(tmp_path, 3, loss=1.0)
        with monkeypatch.context() as patch:
            patch.setattr(shutil, "rmtree", _half_rmtree(shutil.rmtree))
            with pytest.raises(_Crash):
                _save(tmp_path, 3, loss=2.0)
        assert all((p / "model.pt").is_file() for p in list_checkpoints(tmp_path))
        latest = find_checkpoint("latest", tmp_path)
        assert json.loads((latest / "trainer.json").read_text())["step_losses"] == [2.0]

    def test_training_applies_checkpoint_keep_abandoned_which_a_resume_may_change_4(
        self, patches, tiny_encoder_dir, tmp_path, monkeypatch
    ):
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path, checkpoint_keep=3)
        _fit(tiny_encoder_dir, train, val, config)  # keeps steps 6, 8, 10
        resumed = _fit(tiny_encoder_dir, train, val, dataclasses.replace(config, checkpoint_keep_abandoned=0),
                       resume=str(tmp_path / "step-00000006"))
        assert resumed.resumed_from == str(tmp_path / "step-00000006")
        assert not list(tmp_path.glob("abandoned-from-*"))  # 8 and 10 of the first run removed
        assert _names(list_checkpoints(tmp_path)) == ["step-00000006", "step-00000008", "step-00000010"]

    def test_the_bound_is_a_validated_option_of_harvest_train(self):
        from click.testing import CliRunner

        from trajectory_lake.cli import main

        with pytest.raises(ValueError, match="checkpoint_keep_abandoned must be >= 0"):
            TrainConfig(checkpoint_keep_abandoned=-1)
        assert "--checkpoint-keep-abandoned" in CliRunner().invoke(main, ["train", "--help"]).output


class TestRefusals:
    @pytest.fixture
    def crashed(self, patches, tiny_encoder_dir, tmp_path, monkeypatch) -> TrainConfig:
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path)
        with monkeypatch.context() as patch:
            _crash_after_step(patch, 2)
            with pytest.raises(_Crash):
                _fit(tiny_encoder_dir, train, val, config)
        return config

    def test_a_fresh_run_in_a_directory_holding_checkpoints_is_refused(
        self, crashed, patches, tiny_encoder_dir
    ):
        # Started there without resume, a run's first checkpoint (step 2) sat below the earlier run's and was
        # pruned or replaced, and resume="latest" then continued the earlier run instead.
        train, val = patches

        def saved() -> list[tuple[str, str]]:
            found = list_checkpoints(crashed.checkpoint_dir)
            return [(p.name, (p / "trainer.json").read_text()) for p in found]

        before = saved()
        other = dataclasses.replace(crashed, learning_rate=2e-3)
        with pytest.raises(CheckpointError, match=r"already holds checkpoints .*step-00000002.*resume"):
            _fit(tiny_encoder_dir, train, val, other)
        assert saved() == before

    def test_resuming_with_another_config_is_refused_naming_the_difference(
        self, crashed, patches, tiny_encoder_dir
    ):
        train, val = patches
        other = dataclasses.replace(crashed, learning_rate=2e-3)
        with pytest.raises(CheckpointError, match=r"learning_rate = 0\.001 in the checkpoint, 0\.002 now"):
            _fit(tiny_encoder_dir, train, val, other, resume="latest")

    def test_resuming_on_other_data_is_refused(self, crashed, patches, tiny_encoder_dir):
        train, val = patches
        changed = train.with_columns(pl.col("content").str.replace("fix", "patch"))
        with pytest.raises(CheckpointError, match="serialized training examples differ"):
            _fit(tiny_encoder_dir, changed, val, crashed, resume="latest")
        with pytest.raises(
            CheckpointError, match=r"slice's content hash is None in the checkpoint, b2:x now"
        ):
            _fit(tiny_encoder_dir, train, val, crashed, resume="latest", data_id="b2:x")

    def test_resuming_with_a_different_step_shape_is_refused(self, crashed, patches, tiny_encoder_dir):
        train, val = patches
        with pytest.raises(
            CheckpointError, match=r"world_size x grad_accum_steps = 1 in the checkpoint, 2 now"
        ):
            _fit(
                tiny_encoder_dir,
                train,
                val,
                dataclasses.replace(crashed, grad_accum_steps=2),
                resume="latest",
            )

    def test_the_fingerprint_holds_the_precision_auto_resolves_to(self):
        # "auto" is bf16 autocast on CUDA and float32 on a CPU: the same config trains two ways
        import torch

        from value_model.checkpoint import fingerprint

        config = TrainConfig(backbone="b", precision="auto")
        on = {kind: fingerprint(config, data="d", data_id=None, micro_batches_per_step=1,
                                device=torch.device(kind))["config"]["precision"] for kind in ("cuda", "cpu")}
        assert on == {"cuda": "bf16", "cpu": "fp32"}

    def test_resuming_in_another_precision_than_auto_resolved_to_is_refused(
        self, patches, tiny_encoder_dir, tmp_path, monkeypatch
    ):
        # a checkpoint of a GPU run with precision "auto" (bf16) resumed by the same command on a CPU
        # (float32); written here by a CPU run in bf16, which records the same precision
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path, device="cpu", precision="bf16")
        with monkeypatch.context() as patch:
            _crash_after_step(patch, 2)
            with pytest.raises(_Crash):
                _fit(tiny_encoder_dir, train, val, config)
        meta = json.loads((tmp_path / "step-00000002" / "trainer.json").read_text())
        assert meta["fingerprint"]["config"]["precision"] == "bf16"
        with pytest.raises(CheckpointError, match=r"precision = 'bf16' in the checkpoint, 'fp32' now"):
            _fit(tiny_encoder_dir, train, val, dataclasses.replace(config, precision="auto"), resume="latest")

    def test_a_checkpoint_resumes_under_another_precision_setting_that_trains_the_same(
        self, patches, tiny_encoder_dir, tmp_path, monkeypatch
    ):
        # "auto" on a CPU is float32: a float32 run's checkpoint is its own
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path, device="cpu", precision="auto")
        with monkeypatch.context() as patch:
            _crash_after_step(patch, 2)
            with pytest.raises(_Crash):
                _fit(tiny_encoder_dir, train, val, config)
        as_fp32 = dataclasses.replace(config, precision="fp32")
        result = _fit(tiny_encoder_dir, train, val, as_fp32, resume="latest")
        assert result.resumed_from == str(tmp_path / "step-00000002")

    def test_where_checkpoints_go_may_change(self, crashed, patches, tiny_encoder_dir, tmp_path):
        train, val = patches
        moved = dataclasses.replace(
            crashed, checkpoint_dir=str(tmp_path / "elsewhere"), checkpoint_keep=5, eval_batch_size=3
        )
        result = _fit(tiny_encoder_dir, train, val, moved, resume=crashed.checkpoint_dir)
        assert result.resumed_from == str(Path(crashed.checkpoint_dir) / "step-00000002")
        assert list_checkpoints(tmp_path / "elsewhere")  # it goes on checkpointing in the new place

    def test_a_half_written_checkpoint_is_ignored_and_cleared(self, crashed, patches, tiny_encoder_dir):
        train, val = patches
        directory = Path(crashed.checkpoint_dir)
        half = directory / ".tmp-step-00000003"
        half.mkdir()
        (half / "model.pt").write_bytes(b"cut short")
        no_meta = directory / "step-00000005"  # renamed by hand, never completed: no trainer.json
        no_meta.mkdir()
        assert find_checkpoint("latest", directory) == directory / "step-00000002"
        result = _fit(tiny_encoder_dir, train, val, crashed, resume="latest")
        assert result.resumed_from == str(directory / "step-00000002")
        assert not half.exists()  # the next save clears it

    def test_resuming_a_path_without_a_checkpoint_is_refused(self, patches, tiny_encoder_dir, tmp_path):
        train, val = patches
        config = _patch_config(tiny_encoder_dir, tmp_path / "ckpt")
        with pytest.raises(CheckpointError, match="no complete checkpoint at"):
            _fit(tiny_encoder_dir, train, val, config, resume=str(tmp_path / "nothing"))
        with pytest.raises(CheckpointError, match="set --checkpoint-dir"):
            _fit(
                tiny_encoder_dir, train, val, dataclasses.replace(config, checkpoint_dir=""), resume="latest"
            )


class TestCommand:
    def test_harvest_train_resume_continues_the_run_and_tags_where_it_resumed(
        self, lite_lake, tiny_encoder_dir, tmp_path, monkeypatch
    ):
        import mlflow
        from click.testing import CliRunner

        from trajectory_lake.cli import main

        monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "home"))
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        checkpoints = tmp_path / "ckpt"
        args = [
            "train",
            "--lake",
            lite_lake.uri,
            "--backbone",
            str(tiny_encoder_dir),
            "--max-length",
            "32",
            "--epochs",
            "1",
            "--max-examples",
            "16",
            "--batch-size",
            "8",
            "--checkpoint-dir",
            str(checkpoints),
            "--json",
        ]
        first = CliRunner().invoke(main, args)
        assert first.exit_code == 0, first.output
        assert [p.name for p in list_checkpoints(checkpoints)] == ["step-00000002"]
        run = mlflow.get_run(json.loads(first.stdout)["run_id"])
        assert run.data.params["checkpoint_dir"] == str(checkpoints)
        assert run.data.tags["harvest.checkpoint_dir"] == str(checkpoints)
        assert "harvest.resumed_from" not in run.data.tags

        again = CliRunner().invoke(main, [*args, "--resume"])  # alone: the latest checkpoint
        assert again.exit_code == 0, again.output
        tags = mlflow.get_run(json.loads(again.stdout)["run_id"]).data.tags
        assert tags["harvest.resumed_from"] == str(checkpoints / "step-00000002")
        metrics = [
            {k: v for k, v in json.loads(out.stdout)["validation"].items() if k != "train_seconds"}
            for out in (first, again)
        ]
        assert metrics[1] == pytest.approx(metrics[0], rel=1e-6)

        other = CliRunner().invoke(main, [*args, "--resume", str(checkpoints), "--learning-rate", "0.01"])
        assert other.exit_code != 0
        assert "learning_rate = 3e-05 in the checkpoint, 0.01 now" in other.output
