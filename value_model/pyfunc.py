"""The MLflow ``pyfunc`` wrapper, so a registered Harvest model also loads with ``mlflow.pyfunc.load_model``.

``predict`` takes ``prompt``/``candidate`` pairs (or a frame with those columns) and returns calibrated scores;
rows with the same prompt are scored together, as one task's candidates.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mlflow.pyfunc
import pydantic

__all__ = ["HarvestValueModel", "ScoringPair", "pip_requirements"]


class ScoringPair(pydantic.BaseModel):
    """One input row: the task prompt and one candidate (the type hint MLflow derives the signature from)."""

    prompt: str
    candidate: str


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

    def predict(self, model_input: list[ScoringPair], params: dict[str, Any] | None = None) -> list[float]:
        """Calibrated scores of (prompt, candidate) pairs; a pandas frame with those columns works too.

        Rows that share a prompt are one task's candidate set and are scored together, as the reranker
        scores a request (a model with a joint scorer weighs each candidate against the others), so the
        scores equal ``Scorer.score(prompt, candidates)``.
        """
        import numpy as np

        from value_model.inference import predict_values

        values, _ = predict_values(
            self.scorer.model, self.scorer.tokenizer, [p.prompt for p in model_input],
            [p.candidate for p in model_input], max_length=self.scorer.max_length,
        )
        tasks: dict[str, list[int]] = {}
        for index, pair in enumerate(model_input):
            tasks.setdefault(pair.prompt, []).append(index)
        scores = np.zeros(len(model_input))
        for prompt, rows in tasks.items():
            _, scores[rows] = self.scorer.combine([model_input[i].candidate for i in rows], values[rows],
                                                  prompt=prompt)
        return scores.tolist()
