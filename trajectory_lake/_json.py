"""Fast JSON with the standard library's semantics.

Ingest spends much of its time parsing and re-encoding JSON. ``msgspec`` does both several times faster
than :mod:`json`; where it refuses an input that :mod:`json` accepts (``NaN``, lone surrogates, numbers
beyond float range) or rejects it with its own error, we fall back to :mod:`json`, so every input parses
to the same value, or fails with the same exception types (``ValueError`` / ``UnicodeDecodeError`` /
``RecursionError``), as it would with :mod:`json` alone. Arbitrary-precision integers stay ``int``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["dumps_sorted", "json_objects", "loads"]

_DECODER = msgspec.json.Decoder()


def _plain(value: Any) -> Any:  # noqa: ANN401 - any value
    """What ``msgspec`` cannot encode itself: a float subclass (``records.Label``, a number with details) as
    its number, anything else as ``str(value)``."""
    return float(value) if isinstance(value, float) else str(value)


_ENCODER = msgspec.json.Encoder(order="sorted", enc_hook=_plain)


def loads(data: bytes | bytearray | memoryview | str) -> Any:  # noqa: ANN401 - any JSON value
    """Parse JSON text (bytes must be UTF-8) like :func:`json.loads`.

    Raises:
        UnicodeDecodeError: bytes that are not UTF-8.
        ValueError: invalid JSON (:class:`json.JSONDecodeError`).
        RecursionError: nesting too deep for :mod:`json`.

    Examples:
        >>> loads(b'{"n": 123456789012345678901234567890, "x": NaN}')["n"]
        123456789012345678901234567890
    """
    try:
        return _DECODER.decode(data)
    except (msgspec.MsgspecError, RecursionError):
        if not isinstance(data, str):
            data = bytes(data).decode("utf-8")
        return json.loads(data)


def dumps_sorted(value: Any) -> str:  # noqa: ANN401 - any JSON value
    """Compact JSON text with sorted keys, non-ASCII kept, unknown objects as ``str(obj)``.

    Falls back to :func:`json.dumps` for what ``msgspec`` cannot encode (non-string keys, text that is
    not valid Unicode); ``NaN`` and infinities become ``null``.

    Examples:
        >>> dumps_sorted({"b": 1, "a": "é"})
        '{"a":"é","b":1}'
        >>> from trajectory_lake.records import Label
        >>> dumps_sorted({"resolved": Label(1.0, {"patch_exists": True})})
        '{"resolved":1.0}'
    """
    try:
        return _ENCODER.encode(value).decode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True, separators=(",", ":"))


def json_objects(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per line, read lazily; blank lines, lines that do not parse and
    values that are not objects are passed over (for a look at a file beside the one being read, whose
    own damage its own ingest reports).

    Raises:
        OSError: the file cannot be read.
    """
    with path.open("rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                value = loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                yield value
