"""Format adapters: one module per harness format, each turning a source file into normalised records.

:func:`detect` picks the adapter by content; the order of :data:`ADAPTERS` decides between formats
whose sniffers could both match (the most specific first).
"""

from __future__ import annotations

from trajectory_lake.adapters._base import Adapter, Labels, RunGroup, SourceFile, run_dir_of
from trajectory_lake.adapters.mini_swe_agent import MiniSweAgentTrajectory
from trajectory_lake.adapters.swebench import SweBenchPredictions, SweBenchReport, SweBenchTasks

__all__ = [
    "ADAPTERS",
    "Adapter",
    "Labels",
    "RunGroup",
    "SourceFile",
    "detect",
    "run_dir_of",
]

ADAPTERS: tuple[type[Adapter], ...] = (
    MiniSweAgentTrajectory,
    SweBenchTasks,
    SweBenchPredictions,
    SweBenchReport,
)


def detect(source: SourceFile) -> Adapter | None:
    """The adapter that reads ``source``, or ``None`` if no known format matches its content."""
    for adapter in ADAPTERS:
        if adapter.sniff(source):
            return adapter()
    return None
