"""What every adapter shares: the source file, the run group, the adapter ABC."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from trajectory_lake._hashing import content_sha256
from trajectory_lake._json import loads
from trajectory_lake.records import Bundle, Quarantined

__all__ = ["Adapter", "Labels", "RunGroup", "SourceFile"]

# instance id -> outcome name -> value (e.g. {"django__django-11099": {"resolved": 1.0}})
Labels = dict[str, dict[str, float]]


class SourceFile:
    """One input file. Its bytes are read on first use and can be released once it has been read, so
    an ingest holds one file at a time however large the input.

    Args:
        path: where it is read from.
        data: its bytes, if already in memory (else read from ``path`` on first use).
    """

    def __init__(self, path: Path, data: bytes | None = None) -> None:
        self.path = path
        self._data = data

    def __repr__(self) -> str:
        return f"SourceFile({str(self.path)!r})"

    @property
    def data(self) -> bytes:
        """The file's bytes."""
        if self._data is None:
            self._data = self.path.read_bytes()
        return self._data

    @property
    def size(self) -> int:
        """The file's size in bytes (without reading it)."""
        return len(self._data) if self._data is not None else self.path.stat().st_size

    def release(self) -> None:
        """Forget the bytes and everything parsed from them (the hash is kept)."""
        self.__dict__["sha256"] = self.sha256
        self._data = None
        self.__dict__.pop("document", None)
        self.__dict__.pop("text", None)

    @property
    def uri(self) -> str:
        """The file's absolute URI, recorded as ``source_uri``."""
        return self.path.resolve().as_uri()

    @cached_property
    def sha256(self) -> str:
        """SHA-256 of the bytes: identifies the source for exactly-once ingestion."""
        return content_sha256(self.data)

    @cached_property
    def text(self) -> str:
        """The file as UTF-8 text.

        Raises:
            UnicodeDecodeError: the file is not UTF-8.
        """
        return self.data.decode("utf-8")

    @cached_property
    def document(self) -> Any:  # noqa: ANN401 - any JSON document
        """The file parsed as one JSON document.

        Raises:
            ValueError: it is not valid UTF-8 JSON (the message says where it breaks).
        """
        try:
            return loads(self.text)
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text: {exc}") from exc
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, over-long integers, deep nesting
            raise ValueError(f"invalid JSON: {_brief(exc)}") from exc

    def head(self, n: int = 65536) -> bytes:
        """The first ``n`` bytes, for cheap sniffing."""
        return self.data[:n]

    def first_json_lines(self, limit: int = 5, *, max_lines: int = 50) -> list[Any]:
        """Up to ``limit`` JSON values from the first ``max_lines`` lines that parse (for sniffing JSONL).

        Lines are read whole, however long: a record with a 50 MB field is still recognised.
        """
        out: list[Any] = []
        data, start = self.data, 0
        for _ in range(max_lines):
            if start >= len(data):
                break
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            raw, start = data[start:end], end + 1
            if not raw.strip():
                continue
            try:
                out.append(loads(raw))
            except (ValueError, RecursionError):  # includes JSON and UTF-8 decode errors
                continue
            if len(out) >= limit:
                break
        return out

    def is_json_document(self) -> bool:
        """Whether the file starts like a single JSON document (object or array), not JSONL."""
        if self.path.name.endswith((".jsonl", ".ndjson")):
            return False
        stripped = self.head(4096).lstrip()
        if not stripped.startswith((b"{", b"[")):
            return False
        lines = [line for line in self.head().splitlines() if line.strip()]
        if len(lines) >= 2:
            try:
                loads(lines[0])
            except (ValueError, RecursionError):  # includes JSON and UTF-8 decode errors
                return True
            return False  # the first line is a whole JSON value: JSONL
        return True


@dataclass
class RunGroup:
    """Files that describe one run (a harness output directory): trajectories, predictions, reports.

    Adapters read their records in the context of the group, so a trajectory file and a prediction
    file of the same run agree on the run id, and reports label the candidates of this run only.

    Attributes:
        key: the run directory.
        labels: outcomes by instance id, gathered from the group's report files.
        run_hints: harness / model / version seen in the group's files, used to name the run.
    """

    key: Path
    labels: Labels = field(default_factory=dict)
    run_hints: dict[str, str] = field(default_factory=dict)
    matched: set[str] = field(default_factory=set)

    @property
    def run_name(self) -> str:
        """The run's name: the directory's name (leaderboard submissions name runs this way)."""
        return self.key.name or str(self.key)

    def label(self, instance_id: str) -> dict[str, float]:
        """The outcomes the group's reports give ``instance_id`` (and note that they were used)."""
        found = self.labels.get(instance_id, {})
        if found:
            self.matched.add(instance_id)
        return found


_INSTANCE_LIKE = re.compile(r"^[A-Za-z0-9_.-]+__[A-Za-z0-9_.-]+-\d+$")
_NESTED_DIRS = {"trajs", "trajectories", "logs", "results", "reports", "preds"}
_SWE_AGENT_RUN = re.compile(r"__t-[\d.]+__p-[\d.]+__c-[\d.]+__install-\d+$")


def run_dir_of(path: Path) -> Path:
    """The run directory a harness output file belongs to.

    ``<run>/<instance_id>/<instance_id>.traj.json`` and ``<run>/trajs/x.traj`` belong to ``<run>``;
    anything else belongs to its own directory.
    """
    parent = path.parent
    if _SWE_AGENT_RUN.search(parent.name):  # SWE-agent 0.x run names end like an instance id
        return parent
    if _INSTANCE_LIKE.match(parent.name) or parent.name in _NESTED_DIRS:
        return parent.parent
    return parent


class Adapter(ABC):
    """Turns one source file into normalised records.

    Subclasses set ``name`` (recorded as the trajectories' ``source_format`` and in commit metadata),
    ``table`` (the table a malformed record is attributed to), and implement :meth:`sniff` and
    :meth:`read`. Label-only adapters (harness reports) override :meth:`labels` instead of
    :meth:`read`.
    """

    name: ClassVar[str]
    table: ClassVar[str] = "trajectories"
    # Within one run group, adapters with a higher rank are read first, so the richer source of a
    # rollout (a full trajectory) wins over a bare prediction of the same rollout.
    rank: ClassVar[int] = 0

    @classmethod
    @abstractmethod
    def sniff(cls, source: SourceFile) -> bool:
        """Whether this adapter reads ``source`` (by content, not by file name)."""

    def hints(self, source: SourceFile) -> dict[str, str]:
        """Run-level facts (harness, model, version) this source knows, to name its group's run."""
        return {}

    def labels(self, source: SourceFile) -> Iterator[tuple[str, dict[str, float]] | Quarantined]:
        """Outcomes this source gives, by instance id (label sources only)."""
        return iter(())

    def read(self, source: SourceFile, group: RunGroup) -> Iterator[Bundle | Quarantined]:
        """The records of ``source``."""
        return iter(())

    def quarantine(self, locator: str, error: str, raw: bytes | str) -> Quarantined:
        """A quarantine marker attributed to this adapter's table."""
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        return Quarantined(table=self.table, locator=locator, error=f"{self.name}: {error}", raw=raw)

    def iter_json_lines(self, source: SourceFile) -> Iterator[tuple[int, bytes, Any] | Quarantined]:
        """``(line_number, raw, value)`` for each non-blank line; malformed lines come back quarantined."""
        for number, raw in enumerate(source.data.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                value = loads(raw)
            except UnicodeDecodeError as exc:
                yield self.quarantine(f"line {number}", f"not UTF-8 text: {exc}", raw)
                continue
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, over-long integers, deep nesting
                yield self.quarantine(f"line {number}", f"invalid JSON: {_brief(exc)}", raw)
                continue
            yield number, raw, value


def _brief(exc: BaseException) -> str:
    """A one-line reason for a JSON failure (RecursionError's own text says nothing useful)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)
