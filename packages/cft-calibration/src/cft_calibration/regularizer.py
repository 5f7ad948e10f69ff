"""The EM-style ECE regulariser of RCFT (the paper's Alg. 1; official ``utils/*`` restated).

E-step (no gradient): bin the training items by confidence c_i = max_k p_ik into M equal-width bins
and record each bin's accuracy acc_m and count n_m. M-step (with gradient), per batch: with b_i the
bin of the current c_i, pull the confidence towards acc_{b_i} and the sorted non-max probabilities
p_(2) >= ... >= p_(K) towards targets t_(j) that share the remaining mass 1 - acc_{b_i}:

    gamma_i = g0 / (p_(2),i (1 - acc_b)),  g0 = ln 3
    T_i     = sum_{j>=2} tanh(gamma_i p_(j),i)
    a_i     = (1 - acc_b) / (T_i + K - 1)
    t_(j),i = a_i (tanh(gamma_i p_(j),i) + 1)          (all zero when acc_b = 1)
    e_i     = (c_i - acc_b)^2 + sum_{j>=2} (p_(j),i - t_(j),i)^2

so sum_j t_(j),i = 1 - acc_b, [acc_b, t_(2), ..., t_(K)] is a probability vector, the order of the
non-max options is kept and a_i <= t_(j),i <= 2 a_i.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from .metrics import bin_indices

__all__ = ["EMECERegularizer", "nonmax_targets"]

G0 = math.log(3.0)
WEIGHTINGS = ("mass", "official")
EMPTY_BIN = ("global", "skip")


def nonmax_targets(
    p_sorted: Tensor, acc: Tensor, valid: Tensor | None = None, g0: float = G0
) -> Tensor:
    """Targets t_(j) for the sorted non-max probabilities ``p_sorted`` [B, K-1] (descending).

    ``acc`` [B] is the accuracy of each sample's bin; ``valid`` [B, K-1] marks options that exist
    (padding for items with fewer options; their target is 0 and K counts only valid options).
    The second-largest probability is clamped at 1e-12 (in float32 a very confident softmax
    underflows it to 0, which would make gamma infinite and the targets NaN).
    """
    if p_sorted.ndim != 2 or acc.shape != p_sorted.shape[:1]:
        raise ValueError(
            f"p_sorted must be [B, K-1] and acc [B]; got {tuple(p_sorted.shape)} and {tuple(acc.shape)}"
        )
    if valid is None:
        valid = torch.ones_like(p_sorted, dtype=torch.bool)
    acc = acc.to(p_sorted.dtype)
    rest = (1.0 - acc).clamp_min(0.0)
    p2 = p_sorted[:, 0].clamp_min(1e-12)
    safe_rest = torch.where(rest > 0, rest, torch.ones_like(rest))
    gamma = g0 / (p2 * safe_rest)
    th = torch.tanh(gamma[:, None] * p_sorted) * valid
    k_minus_1 = valid.sum(1).to(p_sorted.dtype)
    a = rest / (th.sum(1) + k_minus_1)
    t = a[:, None] * (th + 1.0) * valid
    return torch.where(rest[:, None] > 0, t, torch.zeros_like(t))


class EMECERegularizer:
    """R(theta; {acc_m, n_m}) of RCFT with explicit E- and M-steps.

    Parameters
    ----------
    n_bins : M equal-width confidence bins (default 10).
    lam : weight lambda of R in L_SFT + lambda R (default 1.0).
    weighting : ``"mass"`` (default: ``R = (1/|B|) sum_i e_i``, i.e. bins weighted by their mass in the
        batch, as ECE weights them) or ``"official"`` (R = sum_m (1/n_m) sum_{i in B, b_i = m} e_i with
        n_m the E-step count over the whole training set; the official code also multiplies by 1e-3,
        which the training loop applies in official mode).
    detach_targets : targets are E-step quantities, so no gradient flows through t (default True;
        the official code does not detach).
    empty_bin : a bin empty at the E-step but hit in a batch gets the overall training accuracy
        (``"global"``, default) or its samples are left out (``"skip"``); the official code divides
        by zero there.
    skip_top_bin : the official loop runs over the first M - 1 bin slots only, so the top bin is never
        regularised; ``True`` reproduces that (default False).
    g0 : gamma numerator (default ln 3, the official constant).
    """

    def __init__(
        self,
        n_bins: int = 10,
        lam: float = 1.0,
        weighting: str = "mass",
        detach_targets: bool = True,
        empty_bin: str = "global",
        skip_top_bin: bool = False,
        g0: float = G0,
    ) -> None:
        if n_bins < 1:
            raise ValueError(f"n_bins must be >= 1, got {n_bins}")
        if not (lam >= 0 and math.isfinite(lam)):
            raise ValueError(f"lam must be a finite number >= 0, got {lam}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        if empty_bin not in EMPTY_BIN:
            raise ValueError(f"empty_bin must be one of {EMPTY_BIN}, got {empty_bin!r}")
        self.n_bins = n_bins
        self.lam = lam
        self.weighting = weighting
        self.detach_targets = detach_targets
        self.empty_bin = empty_bin
        self.skip_top_bin = skip_top_bin
        self.g0 = g0
        self.bin_acc: Tensor | None = None
        self.bin_count: Tensor | None = None
        self.global_acc: float | None = None
        self.n_e_steps = 0

    # ------------------------------------------------------------------------------------ E-step
    @torch.no_grad()
    def e_step(self, probs: Any, labels: Any, mask: Any = None) -> EMECERegularizer:
        """Per-bin accuracy and count of the model's current predictions on the training items."""
        p = torch.as_tensor(probs).detach().double().cpu()
        y = torch.as_tensor(labels).detach().long().cpu()
        if p.ndim != 2 or y.shape != (p.shape[0],) or p.shape[0] == 0:
            raise ValueError(
                f"e_step needs probs [N, K] and labels [N]; got {tuple(p.shape)}, {tuple(y.shape)}"
            )
        if mask is not None:
            p = p.masked_fill(~torch.as_tensor(mask).cpu().bool(), 0.0)
        conf, pred = p.max(1)
        correct = (pred == y).double()
        idx = bin_indices(conf, self.n_bins)
        count = torch.zeros(self.n_bins, dtype=torch.float64).index_add_(
            0, idx, torch.ones_like(conf)
        )
        hits = torch.zeros(self.n_bins, dtype=torch.float64).index_add_(0, idx, correct)
        self.global_acc = float(correct.mean())
        acc = torch.where(count > 0, hits / count.clamp_min(1), torch.full_like(count, math.nan))
        self.bin_acc = acc
        self.bin_count = count
        self.n_e_steps += 1
        return self

    def bin_table(self) -> list[dict[str, float]]:
        """The last E-step's per-bin accuracy and count."""
        if self.bin_acc is None or self.bin_count is None:
            return []
        return [
            {"bin": m, "accuracy": float(self.bin_acc[m]), "count": int(self.bin_count[m])}
            for m in range(self.n_bins)
        ]

    # ------------------------------------------------------------------------------------ M-step
    def per_sample(
        self, probs: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(e_i, bin b_i, used_i) for a batch of probabilities [B, K] (differentiable in ``probs``)."""
        if self.bin_acc is None or self.bin_count is None:
            raise RuntimeError("EMECERegularizer: run e_step(probs, labels) before the M-step")
        if probs.ndim != 2:
            raise ValueError(f"probs must be [B, K], got {tuple(probs.shape)}")
        if mask is None:
            mask = torch.ones_like(probs, dtype=torch.bool)
        p = probs.masked_fill(~mask, 0.0)
        sorted_p, order = torch.sort(p, dim=1, descending=True)
        valid_sorted = mask.gather(1, order)
        conf = sorted_p[:, 0]
        b = bin_indices(conf.detach(), self.n_bins).cpu()
        acc_table = self.bin_acc.clone()
        empty = torch.isnan(acc_table)
        used = torch.ones(p.shape[0], dtype=torch.bool)
        if self.empty_bin == "global":
            acc_table[empty] = float(self.global_acc if self.global_acc is not None else 0.0)
        else:
            used &= ~empty[b]
            acc_table[empty] = 0.0
        if self.skip_top_bin:
            used &= b != self.n_bins - 1
        acc = acc_table[b].to(device=p.device, dtype=p.dtype)
        nonmax = sorted_p[:, 1:]
        targets = nonmax_targets(nonmax, acc, valid_sorted[:, 1:], self.g0)
        if self.detach_targets:
            targets = targets.detach()
        err = (conf - acc) ** 2 + ((nonmax - targets) ** 2 * valid_sorted[:, 1:]).sum(1)
        return err, b.to(p.device), used.to(p.device)

    def __call__(self, probs: Tensor, mask: Tensor | None = None) -> Tensor:
        """R for one batch (not multiplied by ``lam``)."""
        err, b, used = self.per_sample(probs, mask)
        err = err * used
        if self.weighting == "mass":
            return err.sum() / probs.shape[0]
        assert self.bin_count is not None
        counts = self.bin_count.to(device=probs.device, dtype=probs.dtype).clamp_min(1.0)
        return (err / counts[b]).sum()

    def __repr__(self) -> str:
        return (
            f"EMECERegularizer(n_bins={self.n_bins}, lam={self.lam}, weighting={self.weighting!r}, "
            f"detach_targets={self.detach_targets}, empty_bin={self.empty_bin!r}, "
            f"skip_top_bin={self.skip_top_bin})"
        )
