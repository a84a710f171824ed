"""Where training runs: device, precision and the data-parallel process group.

``torchrun`` (``torch.distributed.run``) starts one process per device and tells each its place
through ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; :func:`distributed_session` turns those into an
initialised process group (NCCL for CUDA tensors, gloo for CPU ones) for the duration of a command, and
:class:`Runtime` describes the current process to the trainer. Without ``torchrun`` everything is a
world of one.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

__all__ = [
    "Runtime",
    "autocast",
    "broadcast",
    "check_device_name",
    "distributed_session",
    "gather",
    "resolve_device",
    "resolve_precision",
    "usable_device",
]

T = TypeVar("T")


def _torchrun_env() -> tuple[int, int, int]:
    # torchrun's contract, read in one place: RANK, WORLD_SIZE, LOCAL_RANK (and LOCAL_WORLD_SIZE below).
    return (int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")),
            int(os.environ.get("LOCAL_RANK", "0")))


def _local_world_size() -> int:
    # the ranks torchrun starts on this machine (1 when not told: a launcher that does not say)
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def resolve_device(device: str, *, local_rank: int = 0) -> torch.device:
    """``auto`` → ``cuda:LOCAL_RANK`` when CUDA is present, else ``cpu``; anything else as given.

    Examples:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    if device == "cuda":
        return torch.device(f"cuda:{local_rank}")
    return torch.device(device)


# auto, cpu, cuda, or cuda:N written as torch reads it (no sign, no leading zero, ASCII digits:
# str.isdigit also takes '٣' and '²', which torch refuses)
_DEVICE_NAME = re.compile(r"auto|cpu|cuda(?::(0|[1-9][0-9]*))?")
# torch holds a device index in 8 bits: "cuda:128" silently becomes cuda:-128
_MAX_DEVICE_INDEX = 127


def check_device_name(device: object) -> str:
    """``device`` when it is spelt as a device setting may be: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    The one rule for both :class:`~value_model.config.TrainConfig` ``device`` and ``harvest evaluate
    --device``; it reads the spelling only, not this machine (:func:`usable_device` checks that).

    Raises:
        ValueError: anything else, e.g. ``"cuda:abc"``, ``"cuda:"``, ``"cuda:-1"``, ``"cuda:01"``,
            ``"cuda:128"``, ``"tpu"`` or a number.

    Examples:
        >>> check_device_name("cuda:1")
        'cuda:1'
    """
    match = _DEVICE_NAME.fullmatch(device) if isinstance(device, str) else None
    if match is None:
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, got {device!r}")
    if match.group(1) is not None and int(match.group(1)) > _MAX_DEVICE_INDEX:
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, got {device!r} "
                         f"(torch numbers devices 0 to {_MAX_DEVICE_INDEX})")
    return device


def usable_device(device: str, *, local_rank: int = 0) -> torch.device:
    """:func:`resolve_device` of ``device``, checked to exist on this machine, for a model to be put on.

    Raises:
        ValueError: ``device`` is not ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (:func:`check_device_name`);
            or it is a CUDA device and this machine has no CUDA (or not that many devices).

    Examples:
        >>> usable_device("cuda:abc")
        Traceback (most recent call last):
        ...
        ValueError: device must be auto, cpu, cuda or cuda:N, got 'cuda:abc'
    """
    resolved = resolve_device(check_device_name(device), local_rank=local_rank)
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: this machine has no CUDA device (torch.cuda.is_available() "
                             "is False); use cpu, or auto to take a GPU where there is one")
        if (resolved.index or 0) >= (count := torch.cuda.device_count()):
            named = "" if str(resolved) == device else f" ({resolved}, for LOCAL_RANK {local_rank})"
            raise ValueError(f"device {device!r}{named}: this machine has {count} CUDA device(s), "
                             f"cuda:0 to cuda:{count - 1}")
    return resolved


@dataclass(frozen=True)
class Runtime:
    """This process's place in a (possibly one-process) data-parallel job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        """Whether there is more than one process."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0 (the one that logs, saves and registers)."""
        return self.rank == 0

    @classmethod
    def current(cls) -> Runtime:
        """The initialised process group's view, else a world of one."""
        if dist.is_available() and dist.is_initialized():
            return cls(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=_torchrun_env()[2])
        return cls()


@contextlib.contextmanager
def distributed_session(*, device: str = "auto") -> Iterator[Runtime]:
    """Initialise the process group when started by ``torchrun`` (``WORLD_SIZE`` > 1), and tear it down.

    The backend is NCCL for CUDA tensors plus gloo for CPU ones when the process trains on CUDA, gloo
    alone otherwise. A world of one starts no process group. Library code never calls this; entry
    points do.

    Raises:
        ValueError: under ``torchrun``, ``device`` (for this rank: ``auto`` and ``cuda`` are
            ``cuda:LOCAL_RANK``) is not on this machine (:func:`usable_device`), or it is ``cuda:N``
            and torchrun starts several ranks on this machine (they would share that one GPU).
    """
    rank, world_size, local_rank = _torchrun_env()
    if world_size <= 1 or dist.is_initialized():
        yield Runtime.current()
        return
    target = usable_device(device, local_rank=local_rank)  # a one-line error, not torch's, before any data
    if device.startswith("cuda:") and (ranks_here := _local_world_size()) > 1:
        # NCCL refuses two ranks on one GPU only at the first collective
        raise ValueError(f"device {device!r} puts the {ranks_here} ranks of this machine on one GPU: under "
                         "torchrun use cuda or auto, which give each rank cuda:LOCAL_RANK")
    if target.type == "cuda":
        torch.cuda.set_device(target)
    # NCCL takes CUDA tensors only: a GPU job carries gloo beside it for any collective on CPU tensors
    # (the trainer's own step-loss all_reduce runs on the training device)
    backend = "cpu:gloo,cuda:nccl" if target.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, rank=rank, world_size=world_size)
    try:
        yield Runtime(rank=rank, world_size=world_size, local_rank=local_rank)
    finally:
        dist.destroy_process_group()


def gather(runtime: Runtime, value: T) -> list[T]:
    """Every rank's ``value``, in rank order (``[value]`` in a world of one)."""
    if not runtime.distributed:
        return [value]
    out: list[Any] = [None] * runtime.world_size
    dist.all_gather_object(out, value)
    return out


def resolve_precision(precision: str, device: torch.device) -> str:
    """What ``precision`` trains in on ``device``: ``auto`` → ``bf16`` on CUDA, ``fp32`` elsewhere.

    Examples:
        >>> resolve_precision("auto", torch.device("cpu")), resolve_precision("bf16", torch.device("cpu"))
        ('fp32', 'bf16')
    """
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast for ``precision`` ``bf16``, or ``auto`` on CUDA; a no-op otherwise."""
    if resolve_precision(precision, device) == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def broadcast(runtime: Runtime, value: T) -> T:
    """Rank 0's ``value`` on every rank (``value`` itself in a world of one)."""
    if not runtime.distributed:
        return value
    box: list[Any] = [value if runtime.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]
