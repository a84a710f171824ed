"""Training checkpoints: everything a run needs to continue, bit for bit, after a crash.

:func:`~value_model.trainer.fit` writes one with ``checkpoint_dir`` set, every ``checkpoint_every_steps``
optimizer steps and at the end of each epoch, and continues from one with ``resume``. Layout::

    <checkpoint_dir>/step-00000120/    one complete checkpoint, named by the optimizer steps it has done
        trainer.json     {"format", "step", "epoch", "epoch_step", "step_losses", "world_size",
                          "fingerprint": {"config", "data", "data_id", "micro_batches_per_step"}}
        model.pt         the trainable weights: LoRA adapters + head, or every weight (one process, DDP)
        optimizer.pt     the AdamW state (one process, DDP)
        state/           instead of model.pt and optimizer.pt under FSDP: a torch.distributed.checkpoint
                         directory of both, each rank writing its own shards
        scheduler.pt     the learning-rate schedule's state
        rng-<rank>.pt    each rank's python, numpy, torch CPU and CUDA RNG states
        targets.pt       the running epoch's TD(λ) targets, when they bootstrap (td_lambda < 1) from the
                         model as it was when the epoch began
    <checkpoint_dir>/.tmp-step-00000130/   being written: renamed to step-00000130 once complete,
                                           ignored (and removed by the next save) otherwise
    <checkpoint_dir>/step-00000130.new/    complete, replacing a step-00000130 (renamed to it once the
                                           old one is removed); read as the newer of the two
    <checkpoint_dir>/abandoned-from-step-00000080-<UTC time>-*/
                                           the checkpoints newer than step 80 when a run continued
                                           from step 80: never ``latest``; the most recent
                                           ``checkpoint_keep_abandoned`` of these folders are kept
    <checkpoint_dir>/.tmp-removed-*/       a checkpoint or folder being removed: renamed first, so a
                                           crash mid-removal never leaves a half-deleted one under its
                                           name; cleared by the next save

A checkpoint is written into a ``.tmp-`` directory, its files flushed to disk, then renamed (and the
directory flushed, POSIX), so a crash mid-write leaves the previous checkpoints intact and a
half-written one is never read. The newest ``checkpoint_keep`` are kept. A run that resumes from an
older checkpoint than its directory's newest moves the newer ones (the continuation it abandons) aside,
so ``resume="latest"`` picks up its own checkpoints later, not theirs; of these abandoned continuations
the ``checkpoint_keep_abandoned`` most recently set aside are kept (older ones are removed on resuming;
never the folder holding the checkpoint resumed from), so a job that keeps resuming from older
checkpoints holds at most ``checkpoint_keep`` live checkpoints and ``checkpoint_keep_abandoned`` (+1
while it resumes from one of them) folders of abandoned ones.
Removing a checkpoint or a folder renames it to a ``.tmp-removed-`` name first. Under ``torchrun`` every
rank must see the same ``checkpoint_dir`` (a shared filesystem when the ranks span machines): rank 0
writes the shared files, and moves and removes checkpoints; each rank writes its RNG states and, under
FSDP, its shards.

The ``fingerprint`` is what the run trains on: the config (less the options that do not change the
weights: where checkpoints go, the device, threads, eval batch size; with the precision ``auto`` resolves
to on the run's device, bf16 on CUDA and float32 on a CPU), a digest of the serialized
training examples, the slice's content hash when the run comes from a lake slice, and the micro-batches
per step (``world_size x grad_accum_steps``: a job may resume on another number of ranks with the
accumulation that keeps their product, e.g. 8 GPUs x 1 as 4 x 2; not an FSDP job on one process,
which trains unsharded). Resuming a checkpoint whose fingerprint differs is refused, naming what differs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from trajectory_lake._hashing import canonical_json
from value_model._runtime import Runtime, broadcast, resolve_precision
from value_model.config import TrainConfig

__all__ = [
    "CheckpointError",
    "TrainerState",
    "data_digest",
    "find_checkpoint",
    "fingerprint",
    "list_checkpoints",
    "load_checkpoint",
    "resolve_resume",
    "save_checkpoint",
    "set_aside_newer",
]

logger = logging.getLogger(__name__)

FORMAT = 1
# options that change where and how fast a run goes, not the weights it trains
# (nor grad_accum_steps alone: the fingerprint holds world_size x grad_accum_steps, the step's shape)
_NOT_FINGERPRINTED = frozenset({"checkpoint_dir", "checkpoint_every_steps", "checkpoint_keep",
                                "checkpoint_keep_abandoned", "device", "threads", "eval_batch_size",
                                "grad_accum_steps"})
# step-00000120, or step-00000120.new: a checkpoint replacing one of the same step, complete, not yet renamed
_STEP_DIR = re.compile(r"step-(\d+)(\.new)?")
_TMP_PREFIX = ".tmp-"
_ABANDONED_PREFIX = "abandoned-from-"
# abandoned-from-step-00000080-20261130T232347123456Z-k3j2x8: when it was set aside, for "most recent"
_ABANDONED_AT = re.compile(r"abandoned-from-step-\d+-(\d{8}T\d{12}Z)-.*")


class CheckpointError(ValueError):
    """Raised when a run cannot resume: no checkpoint where one was named, or one written by a run with
    another config, other data or another number of micro-batches per step."""


@dataclass
class TrainerState:
    """Where a run is: optimizer steps done, the epoch, the steps of its plan done, every step's loss."""

    step: int = 0
    epoch: int = 0
    epoch_step: int = 0
    step_losses: list[float] = field(default_factory=list)


def data_digest(rows: Iterable[Any]) -> str:
    """A ``b2:`` hash of the training rows (anything JSON can write), in order: of each row's canonical
    JSON (:func:`trajectory_lake._hashing.canonical_json`, the lake's own ids') and a newline.

    A lone surrogate (a Python ``str`` can hold one, UTF-8 cannot) is hashed as its surrogate-escaped
    bytes, so it is told apart from any other character rather than refused.

    Examples:
        >>> data_digest([["prompt", "patch", 1.0]]) == data_digest([["prompt", "patch", 1.0]])
        True
    """
    digest = hashlib.blake2b(digest_size=16)
    for row in rows:
        digest.update(canonical_json(row).encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return "b2:" + digest.hexdigest()


def fingerprint(
    config: TrainConfig, *, data: str, data_id: str | None, micro_batches_per_step: int, device: torch.device
) -> dict[str, Any]:
    """What a checkpoint must match to be resumed (see the module docstring).

    ``device`` is not in it, but the precision ``config.precision`` resolves to there is (``auto`` is bf16
    on CUDA, float32 on a CPU), so a GPU run's checkpoint does not silently go on in another precision.
    """
    values = {k: v for k, v in config.to_dict().items() if k not in _NOT_FINGERPRINTED}
    values["precision"] = resolve_precision(config.precision, device)
    return {"config": json.loads(json.dumps(values)), "data": data, "data_id": data_id,
            "micro_batches_per_step": micro_batches_per_step}


def _differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(saved["config"]) | set(current["config"])):
        old, new = saved["config"].get(key), current["config"].get(key)
        if old != new:
            out.append(f"{key} = {old!r} in the checkpoint, {new!r} now")
    if saved["data_id"] != current["data_id"]:
        out.append(f"the slice's content hash is {saved['data_id']} in the checkpoint, "
                   f"{current['data_id']} now")
    if saved["data"] != current["data"]:
        out.append(f"the serialized training examples differ (digest {saved['data']} in the checkpoint, "
                   f"{current['data']} now)")
    if saved["micro_batches_per_step"] != current["micro_batches_per_step"]:
        out.append(f"world_size x grad_accum_steps = {saved['micro_batches_per_step']} in the checkpoint, "
                   f"{current['micro_batches_per_step']} now")
    return out


def list_checkpoints(directory: str | Path) -> list[Path]:
    """The complete checkpoints under ``directory``, oldest first (``.tmp-`` directories are not)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), bool(m.group(2)), p) for p in directory.iterdir()
             if (m := _STEP_DIR.fullmatch(p.name)) and (p / "trainer.json").is_file()]
    return [p for *_, p in sorted(found)]


def _step_of(checkpoint: Path) -> int:
    return int(json.loads((checkpoint / "trainer.json").read_text())["step"])


def _sync_directory(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename or removal in it) to disk; a no-op where the platform
    cannot open a directory (Windows) or the filesystem cannot flush one."""
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:
        return
    try:
        fd = os.open(directory, os.O_RDONLY | flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # EINVAL: a filesystem that does not sync directories
        pass
    finally:
        os.close(fd)


def _discard(path: Path) -> Path:
    """Rename ``path`` (a checkpoint, or a folder of them) to a ``.tmp-removed-`` name beside it, out of
    every listing, so that removing it can never leave a half-deleted one under its own name; returns the
    new name, for :func:`shutil.rmtree` after the directory is flushed (a crash in between leaves it for
    the next save to clear)."""
    doomed = path.with_name(f"{_TMP_PREFIX}removed-{path.name}")
    shutil.rmtree(doomed, ignore_errors=True)  # of a crash while removing one of the same name
    path.rename(doomed)
    return doomed


def _remove(directory: Path, paths: Iterable[Path]) -> None:
    """Remove ``paths`` (checkpoints or folders of them, in ``directory``): each renamed out of every listing
    (:func:`_discard`), the directory flushed, and only then deleted."""
    doomed = [_discard(path) for path in paths]
    if doomed:
        _sync_directory(directory)
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)


def _abandoned_order(folder: Path) -> tuple[int, str, int, str]:
    # when it was set aside, by its name; a folder from before names held that time sorts first, by mtime
    found = _ABANDONED_AT.fullmatch(folder.name)
    if found:
        return 1, found.group(1), 0, folder.name
    return 0, "", folder.stat().st_mtime_ns, folder.name


def _prune_abandoned(directory: Path, keep: int, resumed: Path) -> list[Path]:
    """Remove the ``abandoned-from-`` folders in ``directory`` but the ``keep`` most recently set aside,
    never one that holds ``resumed``; returns those removed."""
    if not directory.is_dir():  # a run resuming into a new checkpoint_dir
        return []
    folders = sorted((p for p in directory.iterdir() if p.name.startswith(_ABANDONED_PREFIX) and p.is_dir()),
                     key=_abandoned_order)
    source = resumed.resolve()
    removed = [p for p in folders[:max(len(folders) - keep, 0)] if p.resolve() not in source.parents]
    _remove(directory, removed)
    return removed


def set_aside_newer(directory: str | Path, resumed: str | Path, *, keep_abandoned: int = 1) -> Path | None:
    """Move the checkpoints in ``directory`` newer than ``resumed`` into an ``abandoned-from-step-N-*``
    directory beside them, where ``latest`` never looks, and keep the ``keep_abandoned`` most recent such
    directories; call it on rank 0 when a run continues from a checkpoint, before its first save.

    The newer checkpoints are of the continuation the run abandoned: left in place, ``resume="latest"``
    would later pick them over the run's own. They are moved, not removed (resume one by its path to go
    back to it), unless ``keep_abandoned`` is 0. Older abandoned directories are removed (renamed out of
    the way first, so a crash never leaves a half-removed one), except one holding ``resumed``: a job
    that resumes again and again keeps a bounded number of them. Neither ``resumed`` nor any checkpoint
    at or before its step is touched.

    Returns:
        The directory they were moved into, or ``None`` when no checkpoint is newer or ``keep_abandoned``
        is 0 (they were then removed).
    """
    directory, resumed = Path(directory), Path(resumed)
    step = _step_of(resumed)
    newer = [p for p in list_checkpoints(directory) if _step_of(p) > step]
    aside = None
    if newer:
        at = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = Path(tempfile.mkdtemp(prefix=f"{_ABANDONED_PREFIX}step-{step:08d}-{at}-", dir=directory))
        for path in newer:
            path.rename(aside / path.name)
        _sync_directory(directory)
    removed = _prune_abandoned(directory, keep_abandoned, resumed)
    names = ", ".join(p.name for p in newer)
    if aside is not None and aside in removed:
        logger.warning("continuing from %s, older than %d checkpoint(s) of the run there (%s): removed them "
                       "(checkpoint_keep_abandoned = 0)", resumed, len(newer), names)
    elif aside is not None:
        logger.warning("continuing from %s, older than %d checkpoint(s) of the run there (%s): moved them to "
                       "%s, where resume='latest' does not look (resume one by its path to go back to it)",
                       resumed, len(newer), names, aside)
    for folder in (p for p in removed if p != aside):
        logger.info("removed %s: checkpoint_keep_abandoned = %d keeps the most recently abandoned only",
                    folder, keep_abandoned)
    return None if aside in removed else aside


def find_checkpoint(resume: str | Path, checkpoint_dir: str | Path | None) -> Path | None:
    """The checkpoint that ``resume`` names.

    Args:
        resume: ``latest`` (the newest complete checkpoint in ``checkpoint_dir``), a checkpoint
            (``.../step-00000120``), or a directory of them (its newest).
        checkpoint_dir: the run's checkpoint directory (needed for ``latest``).

    Returns:
        The checkpoint's directory; ``None`` for ``latest`` when there is none yet (a fresh start), so
        the same command both starts a run and resumes it.

    Raises:
        CheckpointError: ``latest`` without a checkpoint directory, or a path holding no checkpoint.
    """
    if str(resume) == "latest":
        if not checkpoint_dir:
            raise CheckpointError("resume = 'latest' looks in checkpoint_dir: set --checkpoint-dir, "
                                  "or resume DIR")
        found = list_checkpoints(checkpoint_dir)
        return found[-1] if found else None
    path = Path(resume)
    if (path / "trainer.json").is_file():
        return path
    found = list_checkpoints(path)
    if not found:
        raise CheckpointError(f"no complete checkpoint at {path} (a step-NNNNNNNN directory holding "
                              "trainer.json, or a directory of them)")
    return found[-1]


def _barrier(runtime: Runtime) -> None:
    if runtime.distributed:
        dist.barrier()


def _trainable_names(model: torch.nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if p.requires_grad}


def _flush(tree: Path) -> None:
    """Flush every file under ``tree`` to disk, so the rename that publishes it never outruns its data."""
    for path in tree.rglob("*"):
        if path.is_file():
            with path.open("rb+") as handle:
                os.fsync(handle.fileno())


def _rng_state() -> dict[str, Any]:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()  # the current device's: one per rank
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _sharded_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    weights, optim = get_state_dict(model, optimizer, options=StateDictOptions(ignore_frozen_params=True))
    return {"model": weights, "optimizer": optim}


def _publish(tmp: Path, final: Path) -> None:
    """Rename the complete checkpoint ``tmp`` to ``final``, durably. Where ``final`` exists (the same step
    again), the new one is renamed in as ``final.new`` first and the old one removed after, so a crash at
    any point leaves a complete checkpoint of that step that ``latest`` finds (``.new`` sorts after)."""
    directory = final.parent
    if final.exists():
        staged = final.with_name(f"{final.name}.new")
        if staged.exists():  # of an interrupted replacement: older than ``tmp``
            _remove(directory, [staged])
        tmp.rename(staged)
        _sync_directory(directory)
        _remove(directory, [final])  # out of every listing before any file of it goes
        tmp = staged
    tmp.rename(final)
    _sync_directory(directory)


def save_checkpoint(
    directory: str | Path,
    *,
    state: TrainerState,
    fingerprint: Mapping[str, Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    targets: torch.Tensor | None,
    runtime: Runtime,
    sharded: bool,
    keep: int,
) -> Path:
    """Write a checkpoint of ``state`` atomically into ``directory``; every rank calls it.

    Args:
        directory: the run's checkpoint directory (created when missing).
        state: where the run is (the checkpoint is named by ``state.step``).
        fingerprint: :func:`fingerprint` of the run.
        model: the model being trained (not a DDP wrapper; the FSDP-sharded one under FSDP).
        optimizer: its optimizer; scheduler: its learning-rate schedule.
        targets: the running epoch's TD targets when they are state (bootstrapped), else ``None``.
        runtime: this process's place in the job.
        sharded: whether the model is sharded (FSDP): each rank then writes its shards through
            ``torch.distributed.checkpoint``.
        keep: how many checkpoints to keep (the newest).

    Returns:
        The checkpoint's directory.
    """
    directory = Path(directory)
    final = directory / f"step-{state.step:08d}"
    tmp = directory / f"{_TMP_PREFIX}{final.name}"
    if runtime.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier(runtime)
    if sharded:
        import torch.distributed.checkpoint as dcp

        dcp.save(_sharded_state(model, optimizer), checkpoint_id=tmp / "state")
    elif runtime.is_main:
        trainable = _trainable_names(model)
        torch.save({k: v for k, v in model.state_dict().items() if k in trainable}, tmp / "model.pt")
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(_rng_state(), tmp / f"rng-{runtime.rank}.pt")
    if runtime.is_main:
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        if targets is not None:
            torch.save(targets, tmp / "targets.pt")
        meta = {"format": FORMAT, "step": state.step, "epoch": state.epoch, "epoch_step": state.epoch_step,
                "step_losses": state.step_losses, "world_size": runtime.world_size, "sharded": sharded,
                "fingerprint": dict(fingerprint)}
        # last: a checkpoint holding it is whole
        (tmp / "trainer.json").write_text(json.dumps(meta, indent=1))
    _barrier(runtime)
    if runtime.is_main:
        _flush(tmp)
        _publish(tmp, final)
        _remove(directory, list_checkpoints(directory)[:-keep])
        for half in directory.glob(f"{_TMP_PREFIX}*"):  # left by a crash while writing or removing
            shutil.rmtree(half, ignore_errors=True)
        _sync_directory(directory)
        logger.info("checkpoint %s (step %d, epoch %d)", final, state.step, state.epoch)
    _barrier(runtime)
    return final


def load_checkpoint(
    path: str | Path,
    *,
    fingerprint: Mapping[str, Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    runtime: Runtime,
    sharded: bool,
) -> tuple[TrainerState, torch.Tensor | None]:
    """Restore a checkpoint into ``model``, ``optimizer``, ``scheduler`` and the RNGs; every rank calls it.

    Returns:
        Where the run was, and the TD targets of its running epoch when it saved them.

    Raises:
        CheckpointError: the checkpoint's fingerprint differs from ``fingerprint`` (the message names
            each difference), or it was written sharded (FSDP) and this run is not, or the reverse.
    """
    path = Path(path)
    meta = json.loads((path / "trainer.json").read_text())
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} has checkpoint format {meta.get('format')!r}; "
                              f"this trainer reads {FORMAT}")
    problems = _differences(meta["fingerprint"], fingerprint)
    if meta["sharded"] != sharded:
        written = "sharded (FSDP)" if meta["sharded"] else "whole (one process or DDP)"
        problems.append(f"it was written {written}, and this run trains {'sharded' if sharded else 'whole'}")
    if problems:
        raise CheckpointError(f"cannot resume from {path}, it was written by another run: "
                              + "; ".join(problems)
                              + ". Resume with the checkpoint's settings, or start afresh in another "
                              "checkpoint_dir")
    if sharded:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        saved = _sharded_state(model, optimizer)
        dcp.load(saved, checkpoint_id=path / "state")
        frozen = any(not p.requires_grad for p in model.parameters())
        set_state_dict(model, optimizer, model_state_dict=saved["model"], optim_state_dict=saved["optimizer"],
                       options=StateDictOptions(ignore_frozen_params=True, strict=not frozen))
    else:
        weights = torch.load(path / "model.pt", map_location="cpu", weights_only=True)
        trainable = _trainable_names(model)
        if set(weights) != trainable:
            raise CheckpointError(f"{path} holds weights of other parameters than this model trains "
                                  f"(e.g. {sorted(set(weights) ^ trainable)[:3]})")
        model.load_state_dict(weights, strict=False)
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    mine = path / f"rng-{runtime.rank}.pt"
    # another number of ranks: each micro-batch reseeds from its place in the step, so rank 0's states do
    _set_rng_state(torch.load(mine if mine.is_file() else path / "rng-0.pt", weights_only=True))
    targets_file = path / "targets.pt"
    targets = torch.load(targets_file, weights_only=True) if targets_file.is_file() else None
    state = TrainerState(step=meta["step"], epoch=meta["epoch"], epoch_step=meta["epoch_step"],
                         step_losses=[float(x) for x in meta["step_losses"]])
    if runtime.is_main:
        logger.info("resumed from %s: step %d, epoch %d (+%d steps)", path, state.step, state.epoch,
                    state.epoch_step)
    return state, targets


def resolve_resume(resume: str | Path | None, checkpoint_dir: str | None, runtime: Runtime) -> Path | None:
    """:func:`find_checkpoint` on rank 0, the same answer on every rank (``None`` without ``resume``).

    Raises:
        CheckpointError: as :func:`find_checkpoint`; or, without ``resume``, ``checkpoint_dir`` already
            holds checkpoints (a fresh run there would see its own pruned as older than theirs, and a
            later ``resume="latest"`` would pick up theirs).
    """
    if not resume and not checkpoint_dir:
        return None
    found, problem = None, None
    if runtime.is_main:
        try:
            if resume:
                found = find_checkpoint(resume, checkpoint_dir)
            elif existing := list_checkpoints(str(checkpoint_dir)):
                raise CheckpointError(
                    f"{checkpoint_dir} already holds checkpoints of a run (newest: {existing[-1].name}): "
                    "continue it with resume (harvest train --resume), or start afresh in another "
                    "checkpoint_dir"
                )
        except CheckpointError as exc:  # raised on every rank, so none waits for the others
            problem = str(exc)
    found, problem = broadcast(runtime, (str(found) if found else None, problem))
    if problem:
        raise CheckpointError(problem)
    if found is None:
        if resume and runtime.is_main:
            logger.info("no checkpoint in %s yet: training from the start", checkpoint_dir)
        return None
    return Path(found)
