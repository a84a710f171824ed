"""The objectives and TD(λ) targets, checked against computations by hand."""

from __future__ import annotations

import math

import pytest
import torch

from value_model.losses import (
    bce_loss,
    group_ids,
    loss_terms,
    pair_count,
    pairwise_loss,
    td_lambda_targets,
    td_loss,
)


def _forward_view(rewards: list[float], values: list[float], gamma: float, lam: float) -> list[float]:
    """The λ-return by its definition: a (1-λ)λ^(n-1)-weighted mix of n-step returns, the rest on the full return."""
    horizon = len(rewards)
    out = []
    for t in range(horizon):
        def n_step(n: int, t: int = t) -> float:
            ret = sum(gamma**k * rewards[t + k] for k in range(min(n, horizon - t)))
            return ret + (gamma**n * values[t + n] if t + n < horizon else 0.0)

        steps_left = horizon - t
        mixed = sum((1 - lam) * lam ** (n - 1) * n_step(n) for n in range(1, steps_left))
        out.append(mixed + lam ** (steps_left - 1) * n_step(steps_left))
    return out


class TestTdLambdaTargets:
    def test_targets_match_a_hand_computation_with_bootstrapping(self):
        # G2 = 1; G1 = 0.9 * (0.5 * 0.8 + 0.5 * 1) = 0.81; G0 = 0.9 * (0.5 * 0.5 + 0.5 * 0.81) = 0.5895
        targets = td_lambda_targets(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.2, 0.5, 0.8]), gamma=0.9, lam=0.5)
        assert targets.tolist() == pytest.approx([0.5895, 0.81, 1.0])

    def test_lambda_one_is_the_discounted_monte_carlo_return_and_ignores_values(self):
        targets = td_lambda_targets(torch.tensor([0.0, 0.0, 1.0]), None, gamma=0.9, lam=1.0)
        assert targets.tolist() == pytest.approx([0.81, 0.9, 1.0])

    def test_lambda_zero_is_the_one_step_target(self):
        targets = td_lambda_targets(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.2, 0.5, 0.8]), gamma=0.9, lam=0.0)
        assert targets.tolist() == pytest.approx([0.45, 0.72, 1.0])

    @pytest.mark.parametrize(("gamma", "lam"), [(1.0, 0.7), (0.95, 0.3), (0.5, 0.9)])
    def test_the_backward_recursion_equals_the_forward_view_definition(self, gamma, lam):
        generator = torch.Generator().manual_seed(0)
        rewards = torch.rand(6, generator=generator, dtype=torch.float64)
        values = torch.rand(6, generator=generator, dtype=torch.float64)
        expected = _forward_view(rewards.tolist(), values.tolist(), gamma, lam)
        assert td_lambda_targets(rewards, values, gamma=gamma, lam=lam).tolist() == pytest.approx(expected)

    def test_no_gradient_flows_into_the_values(self):
        values = torch.tensor([0.3, 0.6], requires_grad=True)
        assert not td_lambda_targets(torch.tensor([0.0, 1.0]), values, gamma=1.0, lam=0.5).requires_grad

    def test_bootstrapping_without_values_is_refused(self):
        with pytest.raises(ValueError, match="needs the model's values"):
            td_lambda_targets(torch.tensor([0.0, 1.0]), None, gamma=1.0, lam=0.5)

    def test_out_of_range_gamma_is_refused(self):
        with pytest.raises(ValueError, match="gamma and lam must be in"):
            td_lambda_targets(torch.tensor([1.0]), None, gamma=1.5, lam=1.0)


class TestLosses:
    def test_bce_is_the_mean_negative_log_likelihood(self):
        values, labels = torch.tensor([2.0, -1.0]), torch.tensor([1.0, 0.0])
        expected = (math.log(1 + math.exp(-2.0)) + math.log(1 + math.exp(-1.0))) / 2
        assert bce_loss(values, labels).item() == pytest.approx(expected)
        assert bce_loss(values, labels, reduction="sum").item() == pytest.approx(2 * expected)

    def test_pairwise_compares_only_better_and_worse_candidates_of_the_same_task(self):
        values = torch.tensor([2.0, 0.0, 5.0, 1.0])
        labels = torch.tensor([1.0, 0.0, 0.0, 1.0])
        groups = torch.tensor([0, 0, 1, 0])
        # pairs (better, worse) in task 0: (0, 1) and (3, 1); task 1 has one candidate
        expected = (math.log(1 + math.exp(-2.0)) + math.log(1 + math.exp(-1.0))) / 2
        assert pair_count(labels, groups) == 2
        assert pairwise_loss(values, labels, groups).item() == pytest.approx(expected)

    def test_pairwise_without_pairs_is_zero_and_still_backpropagates(self):
        values = torch.tensor([1.0, 2.0], requires_grad=True)
        loss = pairwise_loss(values, torch.tensor([1.0, 1.0]), torch.tensor([0, 0]))
        loss.backward()
        assert loss.item() == 0.0 and values.grad is not None

    def test_td_loss_is_the_squared_error_of_the_probability(self):
        assert td_loss(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 0.5])).item() == pytest.approx(0.125)

    def test_micro_batch_sums_over_global_counts_add_up_to_the_full_batch_mean(self):
        values = torch.tensor([0.3, -0.2, 1.5, 0.1, -1.0, 0.7])
        labels = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
        groups = torch.tensor([0, 0, 1, 1, 2, 2])
        targets = torch.tensor([0.9, 0.1, 0.8, 0.2, 0.0, 1.0])
        weights = {"bce": 1.0, "pairwise": 0.5, "td": 2.0}
        full, _ = loss_terms(values, labels=labels, groups=groups, targets=targets, weights=weights)
        halves = [slice(0, 4), slice(4, 6)]
        denominators = {"bce": 6, "td": 6, "pairwise": pair_count(labels, groups)}
        split = sum(loss_terms(values[h], labels=labels[h], groups=groups[h], targets=targets[h], weights=weights,
                               denominators=denominators)[0] for h in halves)
        assert split.item() == pytest.approx(full.item())

    def test_the_weighted_sum_reports_each_term(self):
        values, labels, groups = torch.tensor([1.0, -1.0]), torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
        total, parts = loss_terms(values, labels=labels, groups=groups, targets=None, weights={"bce": 1.0, "pairwise": 0.5})
        assert set(parts) == {"bce", "pairwise"}
        assert total.item() == pytest.approx(parts["bce"] + 0.5 * parts["pairwise"])

    def test_td_without_targets_is_refused(self):
        with pytest.raises(ValueError, match="needs per-step targets"):
            loss_terms(torch.zeros(1), labels=torch.zeros(1), groups=torch.zeros(1), targets=None, weights={"td": 1.0})

    def test_group_ids_give_equal_keys_equal_ids(self):
        assert group_ids(["b", "a", "b"]).tolist() == [0, 1, 0]
