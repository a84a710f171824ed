"""Held-out Best@1 of the joint (consensus) scorer on a lake slice, with paired bootstrap intervals.

Two measurements, both on tasks the fitted part never saw:

* ``--folds K`` (default 5): task-grouped K-fold over *every* task of the slice. In each fold the
  combiner (consensus inputs only: the network's value exists out-of-sample only on the validation
  split) is fitted on the other folds, and the "best single run" baseline takes its run success
  rates from them too. Repeated ``--repeats`` times with reshuffled folds; the table is the first
  repeat, and the spread of Best@1 over repeats is printed under it.
* ``--model DIR``: the slice's validation split, scored by a trained artefact's network, with the
  combiner of the artefact's recipe cross-fitted over the validation tasks (as ``harvest train``
  reports it), next to the network alone and the baselines.

Usage::

    python benchmarks/lite_selectors.py --lake ./lake --slice configs/slices/swebench-lite.toml
    python benchmarks/lite_selectors.py --lake ./lake --slice configs/slices/swebench-lite.toml --model DIR

The model never sees which run wrote a candidate; only the ``best_single_run`` baseline does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import polars as pl

from trajectory_lake import Lake
from trajectory_lake.slices import load_spec, resolve_slice, scan_slice
from value_model.config import TrainConfig
from value_model.consensus import FEATURES, VALUE, Combiner, consensus_features_by_task, cross_fitted_logits
from value_model.data import examples_of
from value_model.evaluation import EvaluationOptions, EvaluationReport, baseline_scores, evaluate_scores
from value_model.metrics import run_prior_scores, selection_metrics

CONSENSUS = tuple(name for name in TrainConfig().combiner if name != VALUE)


def _folds(tasks: np.ndarray, k: int, seed: int) -> np.ndarray:
    unique = np.random.default_rng(seed).permutation(np.unique(tasks))
    fold_of = {t: i % k for i, t in enumerate(unique)}
    return np.array([fold_of[t] for t in tasks])


def kfold(rows: pl.DataFrame, *, folds: int, repeats: int, l2: float) -> None:
    tasks = np.array(rows.get_column("task_id").to_list())
    y = rows.get_column("label").to_numpy()
    contents = rows.get_column("content").to_list()
    runs = np.array(rows.get_column("run_id").to_list())
    features = consensus_features_by_task(list(tasks), contents)
    spread = []
    report = None
    for repeat in range(repeats):
        which = _folds(tasks, folds, repeat)
        joint, prior = np.zeros(len(y)), np.zeros(len(y))
        for k in range(folds):
            held, rest = which == k, which != k
            joint[held] = Combiner.fit(CONSENSUS, features[rest], y[rest], l2=l2).logits(features[held])
            prior[held] = run_prior_scores(list(runs[rest]), list(y[rest]), list(runs[held]))
        spread.append({"joint": selection_metrics(list(tasks), y, joint)["best_at_1"],
                       "best_single_run": selection_metrics(list(tasks), y, prior)["best_at_1"]})
        if repeat == 0:
            baselines = {**baseline_scores(list(tasks), contents), "best_single_run": prior,
                         "soft_consensus": features[:, FEATURES.index("soft_consensus")]}
            report = evaluate_scores(list(tasks), y, joint, probabilities=1 / (1 + np.exp(-joint)),
                                     baselines=baselines, options=EvaluationOptions(n_bootstrap=2000),
                                     scorer=f"joint consensus ({', '.join(CONSENSUS)})")
    assert report is not None
    print(f"task-grouped {folds}-fold over {len(np.unique(tasks))} tasks, {len(y)} candidates")
    _print(report)
    joint_b = [s["joint"] for s in spread]
    run_b = [s["best_single_run"] for s in spread]
    print(f"over {repeats} fold shuffles: joint Best@1 {np.mean(joint_b):.3f} (min {min(joint_b):.3f}, max "
          f"{max(joint_b):.3f}); best single run {np.mean(run_b):.3f} (min {min(run_b):.3f}, "
          f"max {max(run_b):.3f})")


def on_validation(rows: pl.DataFrame, model_dir: Path, *, l2: float) -> None:
    from value_model.inference import Scorer

    scorer = Scorer.from_directory(model_dir)
    scorer.combiner = None  # the network's own values: the combiner is cross-fitted below
    train, val = rows.filter(pl.col("split") == "train"), rows.filter(pl.col("split") == "val")
    tasks = val.get_column("task_id").to_list()
    y = val.get_column("label").to_numpy()
    contents = val.get_column("content").to_list()
    values = np.zeros(len(y))
    for task in dict.fromkeys(tasks):
        idx = [i for i, t in enumerate(tasks) if t == task]
        values[idx] = scorer.score(val.get_column("prompt")[idx[0]], [contents[i] for i in idx]).values
    features = consensus_features_by_task(tasks, contents)
    inputs = tuple(scorer.info.get("combiner", {}).get("inputs") or TrainConfig().combiner)
    joint = cross_fitted_logits(inputs, features, y, tasks, values=values, l2=l2)
    consensus_only = cross_fitted_logits(CONSENSUS, features, y, tasks, l2=l2)
    prior = run_prior_scores(train.get_column("run_id").to_list(), train.get_column("label").to_list(),
                             val.get_column("run_id").to_list())
    baselines = {**baseline_scores(tasks, contents), "best_single_run": prior, "network_alone": values,
                 "consensus_only": consensus_only}
    report = evaluate_scores(tasks, y, joint, baselines=baselines,
                             options=EvaluationOptions(n_bootstrap=2000),
                             scorer=f"joint ({', '.join(inputs)})")
    print(f"validation split: {len(set(tasks))} tasks, {len(y)} candidates; "
          "combiner cross-fitted (5 task folds)")
    _print(report)


def _print(report: EvaluationReport) -> None:
    rows = [("model", report.model, None), *((n, m, report.differences.get(n, {}).get("best")) for n, m in
                                              report.baselines.items())]
    print(f"{'selector':<18}{'Best@1':>8}{'95% CI':>16}{'gap':>7}{'model - this [95% CI]':>30}")
    for name, m, diff in rows:
        ci = m.intervals.get("best")
        ci_text = f"[{ci.low:.3f}, {ci.high:.3f}]" if ci else ""
        diff_text = f"{diff.estimate:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]" if diff else ""
        print(f"{name:<18}{m.best:>8.3f}{ci_text:>16}{m.gap_closed:>7.3f}{diff_text:>30}")
    print(f"{'oracle':<18}{report.oracle:>8.3f}")
    print(json.dumps({"model": report.model.best, **{n: m.best for n, m in report.baselines.items()}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True)
    parser.add_argument("--slice", required=True, help="slice spec TOML (configs/slices/swebench-lite.toml)")
    parser.add_argument("--model", type=Path, default=None,
                        help="a trained artefact: evaluate on the val split")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--l2", type=float, default=TrainConfig().combiner_l2)
    args = parser.parse_args()
    lake = Lake(args.lake)
    rows = examples_of(scan_slice(lake, resolve_slice(lake, load_spec(args.slice))).collect())
    if args.model is None:
        kfold(rows, folds=args.folds, repeats=args.repeats, l2=args.l2)
    else:
        on_validation(rows, args.model, l2=args.l2)


if __name__ == "__main__":
    main()
