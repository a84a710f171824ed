"""Placeholders for heavy packages that the serving path imports but never calls (benchmarks only).

The GPU machine has torch and transformers but not the lake's stack (polars, deltalake) or MLflow,
and their wheels are far larger than what can be carried there. ``reranker_service`` and
``value_model`` import them at module level for feedback, neighbours, the lake and the registry; a
benchmark that serves a local model directory with no lake never calls into them. :func:`install`
makes ``import polars`` (and its submodules) succeed with a placeholder module whose every attribute,
call, item and operator is another placeholder, **only for packages that are not installed**, so on
a full environment nothing changes. ``HARVEST_BENCH_ABSENT=polars,deltalake,mlflow`` forces it, to
rehearse the GPU machine's environment on a full one (the CPU smoke run does).

A placeholder that *is* reached at run time fails loudly (it cannot be converted to a number, string
length or boolean-checked into a real value), so a benchmark that silently depended on one cannot
report numbers.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["HEAVY", "install"]

HEAVY = ("polars", "deltalake", "mlflow", "faiss")


class _Placeholder:
    """Anything of an absent package: attributes, calls, items and operators give placeholders."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __repr__(self) -> str:
        return f"<absent {self._name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Placeholder(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and (callable(args[0]) or isinstance(args[0], type)):
            return args[0]  # used as a decorator: keep what it decorates
        return _Placeholder(f"{self._name}()")

    def __getitem__(self, key: Any) -> Any:
        return _Placeholder(f"{self._name}[...]")

    def __iter__(self) -> Any:
        return iter(())

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)  # ``class X(absent.Base)`` defines a plain class

    def __or__(self, other: Any) -> Any:
        return self

    __ror__ = __and__ = __rand__ = __add__ = __radd__ = __sub__ = __mul__ = __truediv__ = __or__

    def __bool__(self) -> bool:
        raise RuntimeError(f"{self._name} is a placeholder of an absent package (benchmarks/_absent.py)")

    __index__ = __int__ = __float__ = __len__ = __bool__  # type: ignore[assignment]


class _AbsentModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Placeholder(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = frozenset(roots)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] not in self.roots:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install(candidates: Sequence[str] = HEAVY) -> list[str]:
    """Stand placeholders in for the ``candidates`` that are not installed (or forced absent).

    Returns:
        The packages that are placeholders from now on.
    """
    forced = {n.strip() for n in os.environ.get("HARVEST_BENCH_ABSENT", "").split(",") if n.strip()}
    absent = [n for n in candidates if n in forced or importlib.util.find_spec(n) is None]
    if absent:
        for name in list(sys.modules):
            if name.split(".")[0] in absent:
                del sys.modules[name]
        sys.meta_path.insert(0, _Finder(absent))
    return absent
