"""Recommendation metrics (paper Sec. 6.2): micro/macro ROC-AUC, HR@k, MRR@k, accuracy.

All take class labels ``y`` [N] (0..L-1) and scores ``probs`` [N, L] (probabilities or any scores
monotone per row). MRR@k is reported both in the standard form (1/N) Σ 1{rank ≤ k}/rank and in the
official code's form, averaged over hits only (which is how the paper's Table 1 can show MRR@3 > HR@3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "accuracy",
    "class_aucs",
    "hit_rate_at_k",
    "macro_auc",
    "micro_auc",
    "mrr_at_k",
    "recommendation_metrics",
    "roc_auc",
]


def _check(y: Any, probs: Any) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y)
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or y.shape != (p.shape[0],):
        raise ValueError(f"expected y [N] and probs [N, L], got {y.shape} and {p.shape}")
    if len(y) and (y.min() < 0 or y.max() >= p.shape[1]):
        raise ValueError(f"labels must be in 0..{p.shape[1] - 1}")
    if not np.isfinite(p).all():
        raise ValueError("probs holds NaN or inf")
    return y.astype(np.int64), p


def _rankdata(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) with ties sharing the mean rank."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x))
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], len(x)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = 0.5 * (s + e + 1)
    return ranks


def roc_auc(labels: Any, scores: Any) -> float:
    """Binary ROC-AUC by the Mann–Whitney statistic (ties count 1/2); NaN without both classes."""
    lab = np.asarray(labels).astype(bool)
    sc = np.asarray(scores, dtype=float)
    n_pos = int(lab.sum())
    n_neg = len(lab) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = _rankdata(sc)
    return float((ranks[lab].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def micro_auc(y: Any, probs: Any) -> float:
    """ROC-AUC of the flattened one-hot labels [N·L] against the flattened scores."""
    y, p = _check(y, probs)
    onehot = np.zeros_like(p, dtype=bool)
    onehot[np.arange(len(y)), y] = True
    return roc_auc(onehot.ravel(), p.ravel())


def class_aucs(y: Any, probs: Any) -> list[float | None]:
    """One-vs-rest ROC-AUC of each class (column of ``probs``); ``None`` for a class without both
    positives and negatives in ``y``."""
    y, p = _check(y, probs)
    out: list[float | None] = []
    for cls in range(p.shape[1]):
        pos = y == cls
        out.append(roc_auc(pos, p[:, cls]) if pos.any() and (~pos).any() else None)
    return out


def macro_auc(y: Any, probs: Any) -> tuple[float, int]:
    """Mean one-vs-rest ROC-AUC over classes with both positives and negatives in ``y``; returns
    ``(auc, n_classes_skipped)``."""
    per_class = class_aucs(y, probs)
    aucs = [a for a in per_class if a is not None]
    skipped = len(per_class) - len(aucs)
    return (float(np.mean(aucs)) if aucs else float("nan")), skipped


def _ranks_of_truth(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """1-based rank of the true class in each row; tied scores rank the truth last (pessimistic), so
    a constant or one-hot score cannot earn hits by ties."""
    truth = p[np.arange(len(y)), y]
    return np.asarray((p >= truth[:, None]).sum(1))


def hit_rate_at_k(y: Any, probs: Any, k: int = 3) -> float:
    """HR@k = (1/N) Σ 1{y_i ∈ top-k(p_i)}."""
    y, p = _check(y, probs)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return float((_ranks_of_truth(y, p) <= k).mean())


def mrr_at_k(y: Any, probs: Any, k: int = 3, hits_only: bool = False) -> float:
    """MRR@k = (1/N) Σ 1{rank_i ≤ k} / rank_i; ``hits_only=True`` averages over hits only (official)."""
    y, p = _check(y, probs)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    r = _ranks_of_truth(y, p)
    rr = np.where(r <= k, 1.0 / r, 0.0)
    if hits_only:
        hits = r <= k
        return float(rr[hits].mean()) if hits.any() else 0.0
    return float(rr.mean())


def accuracy(y: Any, probs: Any) -> float:
    y, p = _check(y, probs)
    return float((p.argmax(1) == y).mean())


def recommendation_metrics(y: Any, probs: Any, k: int = 3) -> dict[str, float]:
    """Micro/macro AUC, HR@k, MRR@k (standard and hits-only), accuracy and N."""
    y, p = _check(y, probs)
    if len(y) == 0:
        nan = float("nan")
        return {"n": 0, "micro_auc": nan, "macro_auc": nan, "macro_auc_classes_skipped": 0,
                f"hr@{k}": nan, f"mrr@{k}": nan, f"mrr@{k}_hits_only": nan, "accuracy": nan}  # fmt: skip
    mac, skipped = macro_auc(y, p)
    return {
        "n": len(y),
        "micro_auc": micro_auc(y, p),
        "macro_auc": mac,
        "macro_auc_classes_skipped": skipped,
        f"hr@{k}": hit_rate_at_k(y, p, k),
        f"mrr@{k}": mrr_at_k(y, p, k),
        f"mrr@{k}_hits_only": mrr_at_k(y, p, k, hits_only=True),
        "accuracy": accuracy(y, p),
    }
