"""Deterministic, content-addressed identifiers.

Every id in the lake is ``"b2:" + blake2b-128(canonical JSON of its identity)``, so the same source
record always maps to the same row and re-ingesting a file adds nothing. Content hashes of patches and
raw files are plain SHA-256 hex, the digest other tools (git, SWE-bench tooling) already use.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "content_sha256", "stable_id"]


def canonical_json(value: Any) -> str:  # noqa: ANN401 - any JSON value
    """Serialise ``value`` to a canonical JSON text (sorted keys, no spaces, UTF-8).

    Examples:
        >>> canonical_json({"b": 1, "a": [1, "x"]})
        '{"a":[1,"x"],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def stable_id(kind: str, *parts: Any) -> str:  # noqa: ANN401 - any JSON value
    """A deterministic id for an entity of ``kind`` identified by ``parts``.

    Examples:
        >>> stable_id("task", "swe-bench", "django__django-11099")
        'b2:53caa0f49b9b63fd1df1a937aa56b740'
    """
    digest = hashlib.blake2b(canonical_json([kind, *parts]).encode(), digest_size=16).hexdigest()
    return f"b2:{digest}"


def content_sha256(data: str | bytes) -> str:
    """SHA-256 hex digest of text (UTF-8) or bytes.

    Examples:
        >>> content_sha256("")[:12]
        'e3b0c44298fc'
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()
