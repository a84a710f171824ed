"""value_model: train, evaluate and load value models that score agent candidates.

Public surface: :class:`TrainConfig`, :class:`ValueModel`, :class:`Scorer` (with the joint scorer,
:class:`Combiner`, over :func:`consensus_features` of a task's candidate set), the data helpers
(:func:`load_examples`, :func:`split_by_task`), :func:`fit` (checkpointing and resuming through
:mod:`value_model.checkpoint`), the metrics, the evaluation suite
(:func:`evaluate_scores`, :class:`EvaluationReport`), and the MLflow helpers.
"""

from value_model.checkpoint import CheckpointError
from value_model.config import Objectives, TrainConfig, load_config
from value_model.consensus import Combiner, consensus_features
from value_model.data import Examples, load_action_examples, load_examples, load_steps, split_by_task
from value_model.evaluation import EvaluationOptions, EvaluationReport, evaluate_candidates, evaluate_scores
from value_model.inference import Calibration, ScoredBatch, Scorer, predict_values
from value_model.losses import td_lambda_targets
from value_model.metrics import (
    auroc,
    is_diff,
    majority_vote_scores,
    normalise_candidate,
    normalise_patch,
    selection_metrics,
)
from value_model.model import ValueModel
from value_model.serialize import encode_pairs
from value_model.tracking import ModelNotFoundError, RegisteredModel, resolve_model, tracking_uri
from value_model.trainer import TrainResult, fit

__all__ = [
    "Calibration",
    "CheckpointError",
    "Combiner",
    "EvaluationOptions",
    "EvaluationReport",
    "Examples",
    "ModelNotFoundError",
    "Objectives",
    "RegisteredModel",
    "ScoredBatch",
    "Scorer",
    "TrainConfig",
    "TrainResult",
    "ValueModel",
    "auroc",
    "consensus_features",
    "encode_pairs",
    "evaluate_candidates",
    "evaluate_scores",
    "fit",
    "load_action_examples",
    "load_config",
    "load_examples",
    "load_steps",
    "is_diff",
    "majority_vote_scores",
    "normalise_candidate",
    "normalise_patch",
    "predict_values",
    "resolve_model",
    "selection_metrics",
    "split_by_task",
    "td_lambda_targets",
    "tracking_uri",
]
