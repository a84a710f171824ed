"""Content features of one patch relative to its issue, and their set-relative (within-task) versions.

The consensus features of :mod:`value_model.consensus` say how much a task's candidates agree; these
say what a single candidate looks like next to the issue it answers. All read only the issue text
and the diff, never which system wrote the patch, and none keys on one tool's formatting quirks.

Per candidate (:data:`PATCH_FEATURES`; "source" means files that exist before the patch and are not
tests, as :data:`TEST_PATH` decides):

* ``issue_files`` — mean over the touched source files of how plainly the issue names the file: 1
  for its path, dotted module path or a traceback ``File "…"`` ending in it, 0.5 for its stem as a
  word (stems such as ``__init__`` or ``utils`` excepted), else 0;
* ``issue_identifiers`` — the share of the issue's code-like identifiers (containing ``_``, mixed
  case, or written in backticks) that appear in the touched hunks (changed lines, context, headers);
* ``issue_functions`` — 1 when a function or class named in a hunk header (``@@ … @@ def f``) is
  named in the issue;
* ``added_files`` — the number of new files outside the tests (reproduction scripts left behind);
* ``debug_prints`` — 1 when the source gains more ``print(``/``pdb``/``breakpoint()`` lines than it loses;
* ``source_size`` — ``log(1 + changed non-blank lines)`` in source files;
* ``comment_lines`` — ``log(1 + added comment lines)`` in source files.

:func:`relative_features` z-scores each feature within the task's candidates (the ``*_z`` names of
:data:`RELATIVE_FEATURES`; 0 for a task with one candidate or a constant feature), since a rerank
request is judged as a set: being the largest patch of the set says more than being large.

On the SWE-bench Lite candidates none of these helps a combiner beyond the consensus features; the
README's results give the numbers. They are kept as combiner inputs so that the measurement can be
repeated on other candidate sets (``benchmarks/lite_selectors.py --inputs``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "ISSUE_FEATURES",
    "PATCH_FEATURES",
    "RELATIVE_FEATURES",
    "TEST_PATH",
    "FileDiff",
    "Hunk",
    "parse_patch",
    "patch_features",
    "relative_features",
    "task_patch_features",
]

PATCH_FEATURES = (
    "issue_files",
    "issue_identifiers",
    "issue_functions",
    "added_files",
    "debug_prints",
    "source_size",
    "comment_lines",
)
RELATIVE_FEATURES = tuple(f"{name}_z" for name in PATCH_FEATURES)
# The features that read the issue text: a combiner using any of them needs the prompt.
ISSUE_FEATURES = ("issue_files", "issue_identifiers", "issue_functions",
                  "issue_files_z", "issue_identifiers_z", "issue_functions_z")

TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_tests?\.py$|(^|/)conftest\.py$")
_FILE = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_DEF = re.compile(r"(?:def|class)\s+([A-Za-z_]\w*)")
_DEBUG = re.compile(r"^\s*(print\(|pprint\(|breakpoint\(\)|import pdb|pdb\.set_trace\(\))")
_TRACEBACK_FILE = re.compile(r'File "([^"]+\.py)"')
# Stems too generic to count as the issue naming a file.
_GENERIC_STEMS = frozenset({"__init__", "base", "utils", "core", "models", "main", "util", "common"})


@dataclass
class Hunk:
    """One ``@@`` hunk: the header's trailing context (often ``def f(...)``) and its lines, unprefixed."""

    header: str = ""
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)


@dataclass
class FileDiff:
    """One file of a diff: its path (the new path, or the old one for a deletion) and its hunks."""

    path: str
    new: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def is_test(self) -> bool:
        """Whether the file is a test file (:data:`TEST_PATH`)."""
        return bool(TEST_PATH.search(self.path))


def parse_patch(patch: str) -> list[FileDiff]:
    """The files and hunks of a unified diff (``git diff`` or plain ``---``/``+++`` headers).

    Examples:
        >>> files = parse_patch("--- a/x.py\\n+++ b/x.py\\n@@ -1,2 +1,2 @@ def f():\\n-a\\n+b\\n c\\n")
        >>> files[0].path, files[0].new, files[0].hunks[0]
        ('x.py', False, Hunk(header='def f():', added=['b'], removed=['a'], context=['c']))
    """
    files: list[FileDiff] = []
    current: FileDiff | None = None
    hunk: Hunk | None = None
    old: str | None = None
    left_old = left_new = 0  # lines still due in the current hunk, from its header's counts
    for line in patch.splitlines():
        if hunk is not None and (left_old > 0 or left_new > 0):
            if line.startswith("+"):
                hunk.added.append(line[1:])
                left_new -= 1
            elif line.startswith("-"):
                hunk.removed.append(line[1:])
                left_old -= 1
            elif line.startswith("\\"):  # "\ No newline at end of file"
                pass
            else:
                hunk.context.append(line[1:])
                left_old, left_new = left_old - 1, left_new - 1
            continue
        hunk = None
        if line.startswith("--- "):
            match = _FILE.match(line)
            old = match.group(1) if match else None
        elif line.startswith("+++ "):
            match = _FILE.match(line)
            new = match.group(1) if match else None
            path = new if new and new != "/dev/null" else old
            current = FileDiff(path=path or "", new=old == "/dev/null")
            files.append(current)
        elif (match := _HUNK.match(line)) and current is not None:
            hunk = Hunk(header=match.group(5).strip())
            current.hunks.append(hunk)
            left_old = int(match.group(2)) if match.group(2) is not None else 1
            left_new = int(match.group(4)) if match.group(4) is not None else 1
    return files


def _names_file(issue: str, path: str) -> float:
    low, p = issue.lower(), path.lower()
    if p in low or p.rsplit(".", 1)[0].replace("/", ".") in low:
        return 1.0
    for named in _TRACEBACK_FILE.findall(issue):
        if named.lower().endswith("/" + p):
            return 1.0
    stem = p.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    word = rf"(?<![a-z0-9_]){re.escape(stem)}(?![a-z0-9_])"
    if stem not in _GENERIC_STEMS and len(stem) > 3 and re.search(word, low):
        return 0.5
    return 0.0


def _code_identifiers(issue: str) -> set[str]:
    return {t for t in _IDENT.findall(issue)
            if "_" in t.strip("_") or re.search(r"[a-z][A-Z]", t) or f"`{t}" in issue}


def _is_comment(line: str) -> bool:
    return line.strip().startswith("#")


def patch_features(patch: str, issue: str = "") -> np.ndarray:
    """The :data:`PATCH_FEATURES` of one candidate, as a ``[len(PATCH_FEATURES)]`` array.

    Args:
        patch: the candidate's unified diff.
        issue: the task's issue text (the prompt); without it the issue features are 0.

    Examples:
        >>> issue = "`parse_qdp` fails in astropy/io/ascii/qdp.py on lower-case commands"
        >>> patch = ("--- a/astropy/io/ascii/qdp.py\\n+++ b/astropy/io/ascii/qdp.py\\n"
        ...          "@@ -1,2 +1,3 @@ def parse_qdp(x):\\n-    a = 1\\n+    # accept lower case\\n"
        ...          "+    a = 2\\n     return a\\n")
        >>> dict(zip(PATCH_FEATURES, patch_features(patch, issue).round(3).tolist())) == {
        ...     "issue_files": 1.0, "issue_identifiers": 1.0, "issue_functions": 1.0, "added_files": 0.0,
        ...     "debug_prints": 0.0, "source_size": 1.386, "comment_lines": 0.693}
        True
    """
    out = np.zeros(len(PATCH_FEATURES), dtype=np.float64)
    files = parse_patch(patch)
    source = [f for f in files if not f.is_test and not f.new]
    if issue and (touched := [f for f in files if not f.is_test]):
        out[0] = float(np.mean([_names_file(issue, f.path) for f in touched]))
        wanted = _code_identifiers(issue)
        if wanted:
            seen = {t for f in touched for h in f.hunks
                    for line in (*h.added, *h.removed, *h.context, h.header) for t in _IDENT.findall(line)}
            out[1] = len(wanted & seen) / len(wanted)
        headers = [name for f in touched for h in f.hunks for name in _DEF.findall(h.header)]
        out[2] = float(any(name in issue for name in headers))
    out[3] = float(sum(f.new and not f.is_test for f in files))
    added = [line for f in source for h in f.hunks for line in h.added if line.strip()]
    removed = [line for f in source for h in f.hunks for line in h.removed if line.strip()]
    out[4] = float(sum(bool(_DEBUG.match(x)) for x in added) > sum(bool(_DEBUG.match(x)) for x in removed))
    out[5] = math.log1p(len(added) + len(removed))
    out[6] = math.log1p(sum(_is_comment(x) for x in added))
    return out


def relative_features(features: np.ndarray) -> np.ndarray:
    """Within-task z-scores of a task's ``[n, k]`` features (0 where a column is constant or n = 1).

    Examples:
        >>> relative_features(np.array([[1.0, 5.0], [3.0, 5.0]])).tolist()
        [[-1.0, 0.0], [1.0, 0.0]]
    """
    features = np.asarray(features, dtype=np.float64)
    if len(features) < 2:
        return np.zeros_like(features)
    std = features.std(axis=0)
    safe = np.where(std > 1e-12, std, 1.0)
    return np.where(std > 1e-12, (features - features.mean(axis=0)) / safe, 0.0)


def task_patch_features(candidates: Sequence[str], issue: str = "") -> np.ndarray:
    """``[n, len(PATCH_FEATURES) + len(RELATIVE_FEATURES)]``: each candidate's features, then their z-scores.

    Examples:
        >>> task_patch_features([], "issue").shape
        (0, 14)
    """
    raw = np.zeros((len(candidates), len(PATCH_FEATURES)))
    for i, candidate in enumerate(candidates):
        raw[i] = patch_features(candidate, issue)
    return np.concatenate([raw, relative_features(raw)], axis=1)
