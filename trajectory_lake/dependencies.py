"""Packages that only some features need, imported when a feature first uses them.

polars and deltalake (the lake), MLflow (the model registry) and faiss (the neighbour index) are large,
and a machine that only trains or serves a local model directory does without them: the GPU machine
has torch, transformers and the web stack only. So ``import value_model`` and ``import
reranker_service`` never import them; a module that uses one binds a stand-in instead::

    if TYPE_CHECKING:
        import polars as pl
    else:
        pl = lazy_import("polars", feature="reading training examples from the lake")

The stand-in imports the package on its first attribute access (``pl.col``) and from then on is a
view of it. Where the package is not installed, that access raises an :class:`ImportError` naming
the package and the feature, so a server started with a lake but no polars says so, instead of
failing on ``import`` far from the cause. Type checkers see the real package. The pattern is
polars' own (``polars.dependencies._lazy_import``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["OPTIONAL", "import_optional", "lazy_import", "missing_dependency"]

#: The packages that only some features need (all of them harvest-lake dependencies).
OPTIONAL = ("polars", "deltalake", "mlflow", "faiss")
# The distribution to install, where its name differs from the package's.
_DISTRIBUTIONS = {"faiss": "faiss-cpu"}


def missing_dependency(package: str, *, feature: str) -> ImportError:
    """The error for ``feature`` when ``package`` is not installed.

    Examples:
        >>> str(missing_dependency("faiss", feature="the neighbour index"))
        "the neighbour index needs the 'faiss' package, which is not installed (pip install faiss-cpu)"
    """
    install = _DISTRIBUTIONS.get(package, package)
    return ImportError(
        f"{feature} needs the {package!r} package, which is not installed (pip install {install})",
        name=package,
    )


def import_optional(name: str, *, feature: str) -> ModuleType:
    """Import module ``name`` now; when it or a package it imports from :data:`OPTIONAL` is missing,
    raise :func:`missing_dependency`'s error for ``feature``.

    Raises:
        ImportError: a package ``feature`` needs is not installed (other import errors pass through).
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        package = (exc.name or "").split(".")[0]
        if package not in OPTIONAL:
            raise  # a missing module of this project, or of a required package: a bug, not a missing extra
        raise missing_dependency(package, feature=feature) from exc


class _LazyModule(ModuleType):
    """Module ``name``, imported on the first access to one of its attributes."""

    def __init__(self, name: str, *, feature: str) -> None:
        super().__init__(name)
        self._harvest_feature = feature

    def __getattr__(self, attribute: str) -> Any:  # noqa: ANN401 - any attribute of the module
        if attribute.startswith("__") and attribute.endswith("__"):
            # introspection (doctest, inspect.unwrap, copy) must not import the package
            raise AttributeError(attribute)
        module = import_optional(self.__name__, feature=self._harvest_feature)
        self.__dict__.update(module.__dict__)  # later lookups skip __getattr__
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<module {self.__name__!r}, imported on first use>"


def lazy_import(name: str, *, feature: str) -> ModuleType:
    """A stand-in for module ``name`` that imports it on first attribute access.

    Args:
        name: the module (``polars``, ``mlflow``).
        feature: what needs it, for the error when it is missing (``"the neighbour index"``).

    Examples:
        >>> json = lazy_import("json", feature="the example")
        >>> json.dumps([1])
        '[1]'
        >>> lazy_import("no_such_package", feature="the example").anything  # not an optional one: as is
        Traceback (most recent call last):
        ...
        ModuleNotFoundError: No module named 'no_such_package'
    """
    return _LazyModule(name, feature=feature)
