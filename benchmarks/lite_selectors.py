"""Held-out Best@1 of the joint (consensus) scorer on a lake slice, with paired bootstrap intervals.

Two measurements, both on tasks the fitted part never saw:

* ``--folds K`` (default 5): task-grouped K-fold over *every* task of the slice. In each fold the
  combiner (consensus inputs only: the network's value exists out-of-sample only on the validation
  split) is fitted on the other folds, and the "best single run" baseline takes its run success
  rates from them too. Repeated ``--repeats`` times with reshuffled folds; the table is the first
  repeat, and the spread of Best@1 over repeats is printed under it. ``--inputs`` and ``--objective``
  choose the combiner measured (default: the training recipe's consensus inputs, pointwise).
* ``--variants``: the same K-fold for a fixed list of combiners (inputs x objective x L2, an L2
  chosen by inner CV on the training folds, a bagged fit), all on the same fold shuffles: mean Best@1
  over the shuffles and, on the first, paired differences against majority vote and the best run.
* ``--unseen-runs``: the same K-fold once per run, with that run's candidates left out of the
  combiner's training tasks (their consensus features recomputed without them): Best@1 on the tasks
  where the run has a candidate, against the combiner that saw it, on the same shuffles. It asks
  whether the scorer ranks a new agent's candidates as well as those of the agents it learnt from.
* ``--model DIR``: the slice's validation split, scored by a trained artefact's network, with the
  combiner of the artefact's recipe cross-fitted over the validation tasks (as ``harvest train``
  reports it), next to the network alone and the baselines. Repeated (``--model A --model B ...``,
  e.g. one recipe trained with several seeds), the network's value is the mean of the artefacts'
  raw values, and each artefact alone and through the same combiner is listed next to it.

Usage::

    python benchmarks/lite_selectors.py --lake ./lake --slice configs/slices/swebench-lite.toml
    python benchmarks/lite_selectors.py --lake ./lake --slice configs/slices/swebench-lite.toml --model DIR
    python benchmarks/lite_selectors.py --lake ./lake --slice configs/slices/swebench-lite.toml \
        --model A --model B --model C
    python benchmarks/lite_selectors.py --lake ./lake --slice configs/slices/swebench-lite.toml --variants
    python benchmarks/lite_selectors.py --lake ./lake --slice configs/slices/swebench-lite.toml --unseen-runs

The model never sees which run wrote a candidate; only the ``best_single_run`` baseline does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from trajectory_lake import Lake
from trajectory_lake.slices import load_spec, resolve_slice, scan_slice
from value_model.config import TrainConfig
from value_model.consensus import (
    FEATURES,
    OBJECTIVES,
    VALUE,
    Combiner,
    consensus_features_by_task,
    cross_fitted_logits,
)
from value_model.data import examples_of
from value_model.evaluation import EvaluationOptions, EvaluationReport, baseline_scores, evaluate_scores
from value_model.metrics import run_prior_scores, selection_metrics

if TYPE_CHECKING:
    from value_model.inference import Scorer

CONSENSUS = tuple(name for name in TrainConfig().combiner if name != VALUE)


def _folds(tasks: np.ndarray, k: int, seed: int) -> np.ndarray:
    unique = np.random.default_rng(seed).permutation(np.unique(tasks))
    fold_of = {t: i % k for i, t in enumerate(unique)}
    return np.array([fold_of[t] for t in tasks])


def _features(rows: pl.DataFrame) -> np.ndarray:
    return consensus_features_by_task(rows.get_column("task_id").to_list(), rows.get_column("content").to_list(),
                                      prompts=rows.get_column("prompt").fill_null("").to_list())


def kfold(rows: pl.DataFrame, *, folds: int, repeats: int, l2: float, inputs: tuple[str, ...] = CONSENSUS,
          objective: str = "pointwise") -> None:
    tasks = np.array(rows.get_column("task_id").to_list())
    y = rows.get_column("label").to_numpy()
    contents = rows.get_column("content").to_list()
    runs = np.array(rows.get_column("run_id").to_list())
    features = _features(rows)
    spread = []
    report = None
    for repeat in range(repeats):
        which = _folds(tasks, folds, repeat)
        joint, prior = np.zeros(len(y)), np.zeros(len(y))
        for k in range(folds):
            held, rest = which == k, which != k
            joint[held] = Combiner.fit(inputs, features[rest], y[rest], l2=l2, objective=objective,
                                       task_ids=list(tasks[rest])).logits(features[held])
            prior[held] = run_prior_scores(list(runs[rest]), list(y[rest]), list(runs[held]))
        spread.append({"joint": selection_metrics(list(tasks), y, joint)["best_at_1"],
                       "best_single_run": selection_metrics(list(tasks), y, prior)["best_at_1"]})
        if repeat == 0:
            baselines = {**baseline_scores(list(tasks), contents), "best_single_run": prior,
                         "soft_consensus": features[:, FEATURES.index("soft_consensus")]}
            report = evaluate_scores(list(tasks), y, joint, probabilities=1 / (1 + np.exp(-joint)),
                                     baselines=baselines, options=EvaluationOptions(n_bootstrap=2000),
                                     scorer=f"joint ({', '.join(inputs)}; {objective})")
    assert report is not None
    print(f"task-grouped {folds}-fold over {len(np.unique(tasks))} tasks, {len(y)} candidates")
    _print(report)
    joint_b = [s["joint"] for s in spread]
    run_b = [s["best_single_run"] for s in spread]
    print(f"over {repeats} fold shuffles: joint Best@1 {np.mean(joint_b):.3f} (min {min(joint_b):.3f}, max "
          f"{max(joint_b):.3f}); best single run {np.mean(run_b):.3f} (min {min(run_b):.3f}, "
          f"max {max(run_b):.3f})")


def _inner_l2(x: np.ndarray, y: np.ndarray, tasks: np.ndarray, inputs: tuple[str, ...], grid: tuple[float, ...],
              seed: int) -> float:
    """The L2 of ``grid`` with the best mean Best@1 in a task-grouped 5-fold over the training rows only."""
    which = _folds(tasks, 5, seed)
    best: dict[float, float] = {}
    for l2 in grid:
        scores = np.zeros(len(y))
        for k in range(5):
            held, rest = which == k, which != k
            scores[held] = Combiner.fit(inputs, x[rest], y[rest], l2=l2).logits(x[held])
        best[l2] = selection_metrics(list(tasks), y, scores)["best_at_1"]
    return max(grid, key=lambda l2: (best[l2], -abs(np.log10(l2))))


def _bagged(x: np.ndarray, y: np.ndarray, tasks: np.ndarray, held_x: np.ndarray, inputs: tuple[str, ...],
            *, l2: float, n: int = 10, seed: int = 0) -> np.ndarray:
    """Mean logits of ``n`` combiners, each fitted on a bootstrap resample of the training tasks."""
    rng = np.random.default_rng(seed)
    unique = np.unique(tasks)
    rows_of = {t: np.where(tasks == t)[0] for t in unique}
    out = np.zeros(len(held_x))
    for _ in range(n):
        idx = np.concatenate([rows_of[t] for t in rng.choice(unique, len(unique), replace=True)])
        out += Combiner.fit(inputs, x[idx], y[idx], l2=l2).logits(held_x) / n
    return out


PATCH = ("issue_files", "issue_identifiers", "issue_functions", "added_files", "debug_prints", "source_size",
         "comment_lines")
RELATIVE = tuple(f"{name}_z" for name in PATCH)
# (label, inputs, objective, L2); L2 "inner" = chosen by inner CV, "bagged" = 10 task-bootstrap fits at L2 1.
VARIANTS: tuple[tuple[str, tuple[str, ...], str, float | str], ...] = (
    ("consensus (default)", CONSENSUS, "pointwise", 1.0),
    ("consensus, L2 10", CONSENSUS, "pointwise", 10.0),
    ("consensus, L2 by inner CV", CONSENSUS, "pointwise", "inner"),
    ("consensus, bagged x10", CONSENSUS, "pointwise", "bagged"),
    ("consensus, listwise", CONSENSUS, "listwise", 1.0),
    ("consensus, listwise, L2 10", CONSENSUS, "listwise", 10.0),
    ("consensus, pairwise, L2 10", CONSENSUS, "pairwise", 10.0),
    ("all 9 consensus features", tuple(FEATURES[:9]), "pointwise", 1.0),
    ("+ issue features", (*CONSENSUS, "issue_files", "issue_identifiers", "issue_functions"), "pointwise", 1.0),
    ("+ shape (new files, prints, tests)", (*CONSENSUS, "added_files", "debug_prints", "touches_tests",
                                            "source_size_z"), "pointwise", 1.0),
    ("+ source size, comments (z)", (*CONSENSUS, "source_size_z", "comment_lines_z"), "pointwise", 1.0),
    ("+ all patch features", (*CONSENSUS, *PATCH), "pointwise", 10.0),
    ("+ all patch features (z)", (*CONSENSUS, *RELATIVE), "pointwise", 10.0),
    ("+ patch features, raw and z", (*CONSENSUS, *PATCH, *RELATIVE), "pointwise", 10.0),
    ("+ patch features, raw and z, listwise", (*CONSENSUS, *PATCH, *RELATIVE), "listwise", 10.0),
    ("+ patch features, raw and z, pairwise", (*CONSENSUS, *PATCH, *RELATIVE), "pairwise", 10.0),
)


def variants(rows: pl.DataFrame, *, folds: int, repeats: int) -> None:
    tasks = np.array(rows.get_column("task_id").to_list())
    y = rows.get_column("label").to_numpy()
    contents = rows.get_column("content").to_list()
    runs = np.array(rows.get_column("run_id").to_list())
    features = _features(rows)
    shuffles = [_folds(tasks, folds, repeat) for repeat in range(repeats)]
    priors = []
    for which in shuffles:
        prior = np.zeros(len(y))
        for k in range(folds):
            held, rest = which == k, which != k
            prior[held] = run_prior_scores(list(runs[rest]), list(y[rest]), list(runs[held]))
        priors.append(prior)
    run_b = [selection_metrics(list(tasks), y, p)["best_at_1"] for p in priors]
    majority = baseline_scores(list(tasks), contents)["majority_vote"]
    print(f"task-grouped {folds}-fold over {len(np.unique(tasks))} tasks, {len(y)} candidates, {repeats} shuffles; "
          f"best single run {np.mean(run_b):.3f} ({min(run_b):.3f}-{max(run_b):.3f}), majority vote "
          f"{selection_metrics(list(tasks), y, majority)['best_at_1']:.3f}")
    print(f"{'variant':<40}{'objective':>10}{'L2':>7}{'Best@1 mean (min-max)':>24}{'shuffle 0 [95% CI]':>22}"
          f"{'gap':>6}{'- majority [95% CI]':>26}{'- best run [95% CI]':>26}")
    for label, inputs, objective, l2 in VARIANTS:
        bests, first = [], None
        for repeat, which in enumerate(shuffles):
            joint = np.zeros(len(y))
            for k in range(folds):
                held, rest = which == k, which != k
                if l2 == "bagged":
                    joint[held] = _bagged(features[rest], y[rest], tasks[rest], features[held], inputs, l2=1.0,
                                          seed=repeat)
                    continue
                strength = _inner_l2(features[rest], y[rest], tasks[rest], inputs, (0.1, 1.0, 10.0, 100.0),
                                     seed=100 + repeat) if l2 == "inner" else float(l2)
                joint[held] = Combiner.fit(inputs, features[rest], y[rest], l2=strength, objective=objective,
                                           task_ids=list(tasks[rest])).logits(features[held])
            bests.append(selection_metrics(list(tasks), y, joint)["best_at_1"])
            if repeat == 0:
                first = evaluate_scores(list(tasks), y, joint, baselines={"majority_vote": majority,
                                                                          "best_single_run": priors[0]},
                                        options=EvaluationOptions(n_bootstrap=2000), scorer=label)
        assert first is not None
        ci = first.model.intervals["best"]
        diffs = [first.differences[n]["best"] for n in ("majority_vote", "best_single_run")]
        print(f"{label:<40}{objective:>10}{l2!s:>7}{np.mean(bests):>10.3f} ({min(bests):.3f}-{max(bests):.3f})"
              f"{first.model.best:>8.3f} [{ci.low:.3f}, {ci.high:.3f}]{first.model.gap_closed:>6.2f}"
              + "".join(f"{d.estimate:>+10.3f} [{d.low:+.3f}, {d.high:+.3f}]" for d in diffs), flush=True)


def unseen_runs(rows: pl.DataFrame, *, folds: int, repeats: int, l2: float,
                inputs: tuple[str, ...] = CONSENSUS, objective: str = "pointwise") -> None:
    """Whether the joint scorer ranks the candidates of an agent it never saw as well as those of one it saw.

    For each run R, the same task-grouped K-fold twice over the same shuffles: once as :func:`kfold`
    (R's candidates among the training rows), once with R removed from the training tasks, their
    consensus features recomputed without R's candidates (as if R had never run). Held-out tasks are
    scored with all their candidates either way; Best@1 is measured on the tasks where R has one.
    """
    tasks = np.array(rows.get_column("task_id").to_list())
    y = rows.get_column("label").to_numpy()
    runs = np.array(rows.get_column("run_id").to_list())
    features = _features(rows)
    shuffles = [_folds(tasks, folds, repeat) for repeat in range(repeats)]

    def fitted(which: np.ndarray, train: np.ndarray, train_x: np.ndarray) -> np.ndarray:
        out = np.zeros(len(y))
        for k in range(folds):
            held, rest = which == k, (which != k) & train
            out[held] = Combiner.fit(inputs, train_x[rest], y[rest], l2=l2, objective=objective,
                                     task_ids=list(tasks[rest])).logits(features[held])
        return out

    seen = [fitted(which, np.ones(len(y), dtype=bool), features) for which in shuffles]
    print(f"task-grouped {folds}-fold over {len(np.unique(tasks))} tasks, {len(y)} candidates, "
          f"{repeats} shuffles; combiner: {', '.join(inputs)} ({objective}, L2 {l2}); "
          "Best@1 on the tasks where the run has a candidate")
    print(f"{'run left out of training':<44}{'tasks':>6}{'its success':>12}"
          f"{'seen: Best@1':>14}{'unseen: Best@1':>16}{'unseen - seen, shuffle 0 [95% CI]':>36}")
    for run in sorted(set(runs)):
        others = runs != run
        without = np.zeros_like(features)
        without[others] = _features(rows.filter(pl.col("run_id") != run))
        on = np.isin(tasks, np.unique(tasks[~others]))
        unseen = [fitted(which, others, without) for which in shuffles]
        best = {name: [selection_metrics(list(tasks[on]), y[on], s[on])["best_at_1"] for s in scores]
                for name, scores in (("seen", seen), ("unseen", unseen))}
        first = evaluate_scores(list(tasks[on]), y[on], unseen[0][on], baselines={"seen": seen[0][on]},
                                options=EvaluationOptions(n_bootstrap=2000), scorer=f"without {run}")
        diff = first.differences["seen"]["best"]
        name = rows.filter(pl.col("run_id") == run).get_column("run_name").drop_nulls().first() or run
        print(f"{name:<44}{len(np.unique(tasks[on])):>6}{y[~others].mean():>12.3f}"
              f"{np.mean(best['seen']):>14.3f}{np.mean(best['unseen']):>16.3f}"
              f"{diff.estimate:>+13.3f} [{diff.low:+.3f}, {diff.high:+.3f}]", flush=True)


def _network_values(scorer: Scorer, val: pl.DataFrame) -> np.ndarray:
    """The network's raw values (logits) of the validation candidates, each task's candidates together."""
    tasks = val.get_column("task_id").to_list()
    contents = val.get_column("content").to_list()
    values = np.zeros(len(tasks))
    for task in dict.fromkeys(tasks):
        idx = [i for i, t in enumerate(tasks) if t == task]
        values[idx] = scorer.score(val.get_column("prompt")[idx[0]], [contents[i] for i in idx]).values
    return values


def on_validation(rows: pl.DataFrame, model_dirs: list[Path], *, l2: float, repeats: int = 20) -> None:
    """The validation split scored by one artefact's network, or by the mean of several (a seed ensemble).

    With several artefacts (same recipe, same split), the ensemble's value of a candidate is the mean
    of the networks' raw values; the table's model is the ensemble through the cross-fitted combiner,
    and each artefact's network alone and joint score are baselines next to it. The table's combiner
    folds are shuffle 0 for every selector; the joint Best@1 over ``repeats`` fold shuffles follows it.
    """
    from value_model.inference import Scorer

    train, val = rows.filter(pl.col("split") == "train"), rows.filter(pl.col("split") == "val")
    tasks = val.get_column("task_id").to_list()
    y = val.get_column("label").to_numpy()
    contents = val.get_column("content").to_list()
    names = [d.name if [e.name for e in model_dirs].count(d.name) == 1 else str(d) for d in model_dirs]
    per_model: dict[str, np.ndarray] = {}
    inputs: tuple[str, ...] | None = None
    for name, model_dir in zip(names, model_dirs, strict=True):
        scorer = Scorer.from_directory(model_dir)
        scorer.combiner = None  # the network's own values: the combiner is cross-fitted below
        val_tasks = scorer.info.get("lineage", {}).get("val_tasks")
        if val_tasks is not None and val_tasks != len(set(tasks)):
            raise SystemExit(f"{model_dir}: trained with {val_tasks} validation tasks, "
                             f"the slice has {len(set(tasks))}")
        recipe = tuple(scorer.info.get("combiner", {}).get("inputs") or TrainConfig().combiner)
        if inputs is not None and recipe != inputs:
            raise SystemExit(f"{model_dir}: combiner inputs {recipe} differ from {inputs}")
        inputs = recipe
        per_model[name] = _network_values(scorer, val)
        del scorer
    assert inputs is not None
    values = np.mean(list(per_model.values()), axis=0)
    features = _features(val)
    joint = cross_fitted_logits(inputs, features, y, tasks, values=values, l2=l2)
    consensus_only = cross_fitted_logits(CONSENSUS, features, y, tasks, l2=l2)
    prior = run_prior_scores(train.get_column("run_id").to_list(), train.get_column("label").to_list(),
                             val.get_column("run_id").to_list())
    singles: dict[str, np.ndarray] = {}
    if len(per_model) > 1:
        for name, v in per_model.items():
            singles[f"network {name}"] = v
            singles[f"joint {name}"] = cross_fitted_logits(inputs, features, y, tasks, values=v, l2=l2)
    baselines = {**baseline_scores(tasks, contents), "best_single_run": prior, "network_alone": values,
                 "consensus_only": consensus_only, **singles}
    report = evaluate_scores(tasks, y, joint, baselines=baselines,
                             options=EvaluationOptions(n_bootstrap=2000),
                             scorer=f"joint ({', '.join(inputs)})")
    ensemble = f"; network = mean of {len(per_model)} networks' raw values" if len(per_model) > 1 else ""
    print(f"validation split: {len(set(tasks))} tasks, {len(y)} candidates; "
          f"combiner cross-fitted (5 task folds){ensemble}")
    _print(report)
    if len(per_model) > 1:
        for kind in ("network", "joint"):
            bests = [report.baselines[f"{kind} {name}"].best for name in per_model]
            together = report.baselines["network_alone"] if kind == "network" else report.model
            print(f"single {kind}s: Best@1 mean {np.mean(bests):.3f} (min {min(bests):.3f}, "
                  f"max {max(bests):.3f}); ensemble {together.best:.3f}")
        print(f"joint Best@1 over {repeats} combiner fold shuffles, mean (min-max):")
        for name, v in {"ensemble": values, **per_model, "consensus only": None}.items():
            used = inputs if v is not None else CONSENSUS
            bests = [selection_metrics(tasks, y, cross_fitted_logits(
                used, features, y, tasks, values=v, l2=l2, seed=r))["best_at_1"] for r in range(repeats)]
            print(f"  {name:<16}{np.mean(bests):.3f} ({min(bests):.3f}-{max(bests):.3f})")


def _print(report: EvaluationReport) -> None:
    rows = [("model", report.model, None), *((n, m, report.differences.get(n, {}).get("best")) for n, m in
                                              report.baselines.items())]
    width = max(18, *(len(name) + 2 for name, _, _ in rows))
    print(f"{'selector':<{width}}{'Best@1':>8}{'95% CI':>16}{'gap':>7}{'AUROC':>7}{'in-task':>8}"
          f"{'model - this [95% CI]':>30}")
    for name, m, diff in rows:
        ci = m.intervals.get("best")
        ci_text = f"[{ci.low:.3f}, {ci.high:.3f}]" if ci else ""
        diff_text = f"{diff.estimate:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]" if diff else ""
        print(f"{name:<{width}}{m.best:>8.3f}{ci_text:>16}{m.gap_closed:>7.3f}{m.auroc:>7.3f}{m.auroc_within:>8.3f}"
              f"{diff_text:>30}")
    print(f"{'oracle':<{width}}{report.oracle:>8.3f}")
    print(json.dumps({"model": report.model.best, **{n: m.best for n, m in report.baselines.items()}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True)
    parser.add_argument("--slice", required=True, help="slice spec TOML (configs/slices/swebench-lite.toml)")
    parser.add_argument("--model", type=Path, action="append", default=None,
                        help="a trained artefact: evaluate on the val split; repeat it to score with the "
                             "mean of several networks' raw values (a seed ensemble)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--l2", type=float, default=TrainConfig().combiner_l2)
    parser.add_argument("--inputs", default=",".join(CONSENSUS),
                        help=f"comma-separated combiner inputs for the k-fold (known: {', '.join(FEATURES)})")
    parser.add_argument("--objective", choices=OBJECTIVES, default="pointwise")
    parser.add_argument("--variants", action="store_true", help="k-fold a fixed list of combiners")
    parser.add_argument("--unseen-runs", action="store_true",
                        help="k-fold with each run left out of the combiner's training in turn")
    args = parser.parse_args()
    lake = Lake(args.lake)
    rows = examples_of(scan_slice(lake, resolve_slice(lake, load_spec(args.slice))).collect())
    if args.variants:
        variants(rows, folds=args.folds, repeats=args.repeats)
    elif args.unseen_runs:
        unseen_runs(rows, folds=args.folds, repeats=args.repeats, l2=args.l2,
                    inputs=tuple(args.inputs.split(",")), objective=args.objective)
    elif args.model is None:
        kfold(rows, folds=args.folds, repeats=args.repeats, l2=args.l2, inputs=tuple(args.inputs.split(",")),
              objective=args.objective)
    else:
        on_validation(rows, args.model, l2=args.l2, repeats=args.repeats)


if __name__ == "__main__":
    main()
