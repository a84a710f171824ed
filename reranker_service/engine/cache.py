"""The score cache: raw values keyed by (model revision, content hash), least recently used out first.

A key covers everything that changes a score: the model's exact weights (its revision), the task
prompt, the trajectory context, the per-request truncation options and the candidate. Two requests
that share the task and context hash it once (:func:`prefix_digest`), then each candidate on top
(:func:`candidate_key`). A reload changes the revision, so stale entries simply stop matching.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CachedScore", "ScoreCache", "candidate_key", "prefix_digest"]


@dataclass(frozen=True, slots=True)
class CachedScore:
    """What is kept per candidate."""

    value: float
    truncated: bool
    n_tokens: int
    embedding: np.ndarray | None = None


def prefix_digest(
    revision: str, prompt: str, context: Sequence[Mapping[str, Any]], options: Sequence[object]
) -> bytes:
    """A digest of everything but the candidate.

    Examples:
        >>> len(prefix_digest("r1", "fix it", [], (None, "right")))
        16
        >>> prefix_digest("r1", "fix it", [], ()) == prefix_digest("r2", "fix it", [], ())
        False
    """
    head = json.dumps(
        [revision, list(options), list(context)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    ).encode("utf-8", "surrogatepass")
    h = hashlib.blake2b(digest_size=16)
    h.update(len(head).to_bytes(8, "big"))
    h.update(head)
    h.update(prompt.encode("utf-8", "surrogatepass"))
    return h.digest()


def candidate_key(prefix: bytes, candidate: str) -> bytes:
    """The cache key of one candidate after ``prefix`` (:func:`prefix_digest`)."""
    return hashlib.blake2b(prefix + candidate.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _entry_bytes(entry: CachedScore) -> int:
    """Memory an entry holds, roughly: its key and fields, and its embedding."""
    return 200 + (entry.embedding.nbytes if entry.embedding is not None else 0)


class ScoreCache:
    """A bounded LRU map from content keys to :class:`CachedScore` (not thread-safe: the engine's loop
    owns it).

    Args:
        max_entries: capacity; 0 disables the cache.
        max_bytes: memory the entries may hold, embeddings included (with neighbours on, a 2560-wide
            embedding makes an entry ~10 KB, so 65536 entries would hold ~680 MB).
    """

    def __init__(self, max_entries: int, *, max_bytes: int = 256 << 20) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, CachedScore] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        """Memory the entries hold (as :func:`_entry_bytes` counts it)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> CachedScore | None:
        """The entry for ``key`` (now most recently used), or ``None``."""
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return found

    def put(self, key: bytes, entry: CachedScore) -> None:
        """Store ``entry``, evicting the least recently used beyond either capacity (the entry just stored
        stays, however large)."""
        if not self.max_entries:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= _entry_bytes(old)
        self._entries[key] = entry
        self._bytes += _entry_bytes(entry)
        entries = self._entries
        while len(entries) > 1 and (len(entries) > self.max_entries or self._bytes > self.max_bytes):
            _, dropped = entries.popitem(last=False)
            self._bytes -= _entry_bytes(dropped)

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()
        self._bytes = 0
