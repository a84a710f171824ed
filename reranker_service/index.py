"""The neighbour index: faiss over the model's embeddings of the lake's candidates at pinned versions.

``return_neighbors`` answers, for each ranked candidate, the ``k`` most similar historical candidates
and their outcomes: evidence for a score, and a view for analysts. Historical and served candidates
are embedded the same way, by the served model itself: the pooled backbone state of the serialized
(task, candidate) pair, the vector its value head reads, L2-normalised, so similarity is cosine in
the space the model ranks in. An index therefore belongs to one model revision; a reload builds a
new one.

Storage (``save`` / ``load``): ``<dir>/index.faiss`` (an exact inner-product index), ``rows.parquet``
(one row per vector: candidate_id, task_id, kind, content_sha256, outcomes as JSON) and
``manifest.json`` (lake URI, the table versions read, model revision, kind, size). The same lake
versions and model give the same index, so a built index is reused from ``index_dir`` across
restarts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from reranker_service.backends import Backend, Forwarded, Item, ScoreInput
from reranker_service.engine.batching import plan_batches
from trajectory_lake.dependencies import lazy_import

if TYPE_CHECKING:
    import faiss
    import polars as pl

    from trajectory_lake import Lake
else:  # the service imports this module whether or not neighbours are on
    faiss = lazy_import("faiss", feature="the neighbour index (neighbors)")
    pl = lazy_import("polars", feature="the neighbour index (neighbors)")

__all__ = [
    "BuildCancelled",
    "Neighbor",
    "NeighborIndex",
    "build_index",
    "index_key",
    "index_versions",
    "load_or_build_index",
]

logger = logging.getLogger(__name__)

_TABLES = ("candidates", "tasks", "outcomes")


class BuildCancelled(Exception):
    """An index build was stopped (its ``cancelled`` event was set) between two batches."""


@dataclass(frozen=True)
class Neighbor:
    """A historical candidate close to a served one."""

    candidate_id: str
    task_id: str
    kind: str
    similarity: float
    outcomes: dict[str, float]


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class NeighborIndex:
    """Exact cosine search over historical candidates.

    Args:
        vectors: one embedding per row of ``rows`` (normalised here).
        rows: candidate_id, task_id, kind, content_sha256, outcomes (JSON text).
        manifest: what the index was built from.
    """

    def __init__(self, vectors: np.ndarray, rows: pl.DataFrame, manifest: dict[str, Any]) -> None:
        if len(vectors) != rows.height:
            raise ValueError(f"{len(vectors)} vectors for {rows.height} rows")
        self.manifest = manifest
        self.rows = rows
        self.dim = int(vectors.shape[1]) if len(vectors) else int(manifest.get("dim", 0))
        self._index = faiss.IndexFlatIP(self.dim)
        if len(vectors):
            self._index.add(_normalised(vectors))
        self._ids = rows.get_column("candidate_id").to_list()
        self._tasks = rows.get_column("task_id").to_list()
        self._kinds = rows.get_column("kind").to_list()
        self._outcomes = [json.loads(o) if o else {} for o in rows.get_column("outcomes").to_list()]

    def __len__(self) -> int:
        return self._index.ntotal

    @property
    def revision(self) -> str:
        """The model revision whose embeddings the index holds."""
        return str(self.manifest["model_revision"])

    def search(self, embeddings: np.ndarray, k: int) -> list[list[Neighbor]]:
        """The ``k`` nearest historical candidates of each embedding, most similar first."""
        if not len(self) or not len(embeddings):
            return [[] for _ in range(len(embeddings))]
        k = min(k, len(self))
        similarity, found = self._index.search(_normalised(embeddings), k)
        return [
            [
                Neighbor(
                    candidate_id=self._ids[j],
                    task_id=self._tasks[j],
                    kind=self._kinds[j],
                    similarity=round(float(s), 6),
                    outcomes=self._outcomes[j],
                )
                for s, j in zip(sims, idx, strict=True)
                if j >= 0
            ]
            for sims, idx in zip(similarity, found, strict=True)
        ]

    def describe(self) -> dict[str, Any]:
        """What ``/v1/models`` reports about the index."""
        return {
            "size": len(self),
            **{k: self.manifest[k] for k in ("lake", "versions", "kind", "model_revision")},
        }

    def save(self, directory: str | Path) -> Path:
        """Write the index (layout in the module docstring)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self._index, str(directory / "index.faiss"))
        self.rows.write_parquet(directory / "rows.parquet")
        (directory / "manifest.json").write_text(json.dumps(self.manifest, indent=2, sort_keys=True))
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> NeighborIndex:
        """Read an index written by :meth:`save`.

        Raises:
            FileNotFoundError: ``directory`` holds no index.
        """
        directory = Path(directory)
        if not (directory / "manifest.json").is_file():
            raise FileNotFoundError(f"no neighbour index in {directory}")
        index = faiss.read_index(str(directory / "index.faiss"))
        vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, index.d), np.float32)
        return cls(
            vectors,
            pl.read_parquet(directory / "rows.parquet"),
            json.loads((directory / "manifest.json").read_text()),
        )


def _history(lake: Lake, versions: dict[str, int], kind: str | None) -> pl.DataFrame:
    """Non-empty candidates at ``versions`` with their task prompt and mean outcome per name."""
    candidates = lake.scan("candidates", version=versions["candidates"])
    if kind is not None:
        candidates = candidates.filter(pl.col("kind") == kind)
    candidates = candidates.filter(pl.col("content").fill_null("").str.strip_chars() != "").select(
        "candidate_id", "task_id", "kind", "content", "content_sha256"
    )
    tasks = (
        lake.scan("tasks", version=versions["tasks"])
        .select("task_id", "prompt")
        .unique("task_id", keep="first")
    )
    outcomes = (
        lake.scan("outcomes", version=versions["outcomes"])
        .filter(pl.col("candidate_id").is_not_null())
        .group_by("candidate_id", "name")
        .agg(pl.col("value").mean())
        .group_by("candidate_id")
        .agg(pl.struct("name", "value").alias("outcomes"))
    )
    rows = (
        candidates.join(tasks, on="task_id", how="inner")
        .join(outcomes, on="candidate_id", how="left")
        .sort("task_id", "candidate_id")
        .collect()
    )
    as_json = [
        json.dumps({o["name"]: o["value"] for o in (entry or [])}, sort_keys=True)
        for entry in rows.get_column("outcomes").to_list()
    ]
    return rows.with_columns(outcomes=pl.Series(as_json, dtype=pl.String))


def index_versions(lake: Lake, version: int | None = None) -> dict[str, int]:
    """The table versions an index reads: the latest of each, with ``candidates`` at ``version`` if given."""
    versions = {t: lake.version(t) for t in _TABLES}
    if version is not None:
        versions["candidates"] = version
    return versions


def build_index(
    lake: Lake,
    backend: Backend,
    *,
    version: int | None = None,
    versions: dict[str, int] | None = None,
    kind: str | None = "patch",
    max_batch_tokens: int = 16384,
    max_batch_size: int = 64,
    forward: Callable[[Sequence[Item]], Forwarded] | None = None,
    cancelled: threading.Event | None = None,
) -> NeighborIndex:
    """Embed the lake's candidates with ``backend`` and index them.

    Args:
        lake: the lake.
        backend: the served model (must support embeddings).
        version: the ``candidates`` table version (default: the latest); ``tasks`` and ``outcomes``
            are read at their latest version, and all three are recorded in the manifest.
        versions: read exactly these table versions instead (see :func:`index_versions`).
        kind: candidate kind to index (``None``: all).
        max_batch_tokens: token budget per forward pass.
        max_batch_size: candidates per forward pass.
        forward: runs a batch through ``backend`` and returns its embeddings (the service passes one that
            runs in its engine's model thread, so that the index and the requests never run the model at
            once); default: ``backend.forward(items, embed=True)`` in the calling thread.
        cancelled: when set, the build stops before its next batch.

    Raises:
        ValueError: the backend cannot embed.
        BuildCancelled: ``cancelled`` was set.
    """
    if not backend.embeds:
        raise ValueError(f"backend {backend.info.label} does not return embeddings")
    versions = dict(versions) if versions is not None else index_versions(lake, version)
    rows = _history(lake, versions, kind).with_row_index("row")
    matrix = np.zeros((rows.height, 0), dtype=np.float32)
    for (prompt,), group in rows.group_by("prompt", maintain_order=True):
        positions = group.get_column("row").to_list()
        prepared = backend.prepare(
            ScoreInput(prompt=str(prompt), candidates=tuple(group.get_column("content")))
        )
        for batch in plan_batches(
            [it.n_tokens for it in prepared.items],
            max_tokens=max_batch_tokens,
            max_items=max_batch_size,
            prefixes=[it.prefix_len for it in prepared.items],
            groups=[it.group for it in prepared.items],
            padded=backend.padded,
        ):
            if cancelled is not None and cancelled.is_set():
                raise BuildCancelled(f"the neighbour index build for {backend.info.label} was stopped")
            chosen = [prepared.items[i] for i in batch]
            out = forward(chosen) if forward is not None else backend.forward(chosen, embed=True)
            embeddings = out.embeddings
            assert embeddings is not None
            if matrix.shape[1] == 0:
                matrix = np.zeros((rows.height, embeddings.shape[1]), dtype=np.float32)
            matrix[[positions[i] for i in batch]] = embeddings
    manifest = {
        "lake": lake.uri,
        "versions": versions,
        "kind": kind,
        "model_revision": backend.info.cache_revision,
        "model": backend.info.label,
        "dim": int(matrix.shape[1]),
        "size": int(matrix.shape[0]),
        "built_at": datetime.now(UTC).isoformat(),
    }
    kept = rows.select("candidate_id", "task_id", "kind", "content_sha256", "outcomes")
    logger.info(
        "neighbour index: %d candidates of %s at %s, model %s",
        len(kept),
        lake.uri,
        versions,
        backend.info.label,
    )
    return NeighborIndex(matrix, kept, manifest)


def index_key(lake: Lake, versions: dict[str, int], revision: str, kind: str | None) -> str:
    """The directory name of an index built from these inputs."""
    text = json.dumps([lake.uri, versions, revision, kind], sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def load_or_build_index(
    lake: Lake,
    backend: Backend,
    *,
    version: int | None = None,
    versions: dict[str, int] | None = None,
    kind: str | None = "patch",
    directory: str | Path | None = None,
    **options: Any,  # noqa: ANN401 - build_index's keyword arguments
) -> NeighborIndex:
    """:func:`build_index`, reusing the copy saved under ``directory`` when the inputs are the same."""
    versions = dict(versions) if versions is not None else index_versions(lake, version)
    if directory is None:
        return build_index(lake, backend, versions=versions, kind=kind, **options)
    path = Path(directory) / index_key(lake, versions, backend.info.cache_revision, kind)
    try:
        return NeighborIndex.load(path)
    except FileNotFoundError:
        pass
    index = build_index(lake, backend, versions=versions, kind=kind, **options)
    index.save(path)
    return index
