"""The MLflow ``pyfunc`` wrapper, so a registered Harvest model also loads with ``mlflow.pyfunc.load_model``.

``predict`` takes a frame with ``prompt`` and ``candidate`` columns and returns calibrated scores.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mlflow.pyfunc

__all__ = ["HarvestValueModel", "pip_requirements"]


def pip_requirements() -> list[str]:
    """What a serving environment needs (pinned to what trained the model where known)."""
    out = []
    for name in ("harvest-lake", "torch", "transformers"):
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            out.append(name)
    return out


class HarvestValueModel(mlflow.pyfunc.PythonModel):
    """Scores (prompt, candidate) rows with the value model stored as the ``value_model`` artefact."""

    def load_context(self, context: Any) -> None:  # noqa: ANN401 - mlflow's PythonModelContext
        from value_model.inference import Scorer

        self.scorer = Scorer.from_directory(context.artifacts["value_model"])

    # No type hints on predict: MLflow would try to derive a schema from them.
    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        from value_model.inference import predict_values

        prompts = [str(p) for p in model_input["prompt"]]
        candidates = [str(c) for c in model_input["candidate"]]
        values, _ = predict_values(self.scorer.model, self.scorer.tokenizer, prompts, candidates,
                                   max_length=self.scorer.max_length)
        return self.scorer.calibration.apply(values).tolist()
