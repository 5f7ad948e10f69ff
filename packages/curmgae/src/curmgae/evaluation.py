"""Evaluation protocols of the paper's experiments (Sec. 3): link prediction (AUC, AP, Hits@K) and node
classification (S2GAE's RBF-SVM with 5-fold CV, which the paper follows, and MaskGAE's linear probe)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor


def link_metrics(pos_scores: Tensor, neg_scores: Tensor) -> dict[str, float]:
    """``roc_auc_score`` and ``average_precision_score`` over positive and negative test pairs."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    y = np.concatenate([np.ones(pos_scores.numel()), np.zeros(neg_scores.numel())])
    s = torch.cat([pos_scores, neg_scores]).detach().cpu().double().numpy()
    return {"auc": float(roc_auc_score(y, s)), "ap": float(average_precision_score(y, s))}


def hits_at_k(pos_scores: Tensor, neg_scores: Tensor, k: int) -> float:
    """OGB semantics: share of positives scoring strictly above the k-th highest negative score."""
    if neg_scores.numel() < k:
        return 1.0
    kth = torch.topk(neg_scores, k).values[-1]
    return float((pos_scores > kth).float().mean())


def svm_cv(emb: Tensor, y: Tensor, folds: int = 5, seed: int = 42) -> dict[str, float]:
    """S2GAE protocol: ``SVC(kernel="rbf", decision_function_shape="ovo")``, ``KFold(5, shuffle)`` over
    all labelled nodes; mean accuracy, micro- and macro-F1."""
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.model_selection import KFold
    from sklearn.svm import SVC

    X, t = emb.detach().cpu().numpy(), y.cpu().numpy()
    acc, mic, mac = [], [], []
    for tr, te in KFold(n_splits=folds, shuffle=True, random_state=seed).split(X):
        pred = SVC(kernel="rbf", decision_function_shape="ovo").fit(X[tr], t[tr]).predict(X[te])
        acc.append(accuracy_score(t[te], pred))
        mic.append(f1_score(t[te], pred, average="micro"))
        mac.append(f1_score(t[te], pred, average="macro"))
    return {
        "acc": float(np.mean(acc)),
        "acc_std": float(np.std(acc)),
        "micro_f1": float(np.mean(mic)),
        "macro_f1": float(np.mean(mac)),
    }


def linear_probe(
    emb: Tensor,
    y: Tensor,
    train_mask: Tensor,
    val_mask: Tensor,
    test_mask: Tensor,
    seed: int = 0,
    epochs: int = 100,
    lr: float = 0.01,
    weight_decay: float = 1e-3,
    normalize: bool = True,
) -> dict[str, float]:
    """MaskGAE-style probe: one ``nn.Linear`` on frozen (L2-normalised) embeddings, Adam; the test
    accuracy at the best validation epoch."""
    g = torch.Generator().manual_seed(seed)
    X = emb.detach().float()
    if normalize:
        X = F.normalize(X, dim=1)
    n_cls = int(y.max()) + 1
    lin = torch.nn.Linear(X.size(1), n_cls)
    with torch.no_grad():
        bound = 1.0 / X.size(1) ** 0.5
        lin.weight.copy_(torch.rand(lin.weight.shape, generator=g) * 2 * bound - bound)
        lin.bias.zero_()
    opt = torch.optim.Adam(lin.parameters(), lr=lr, weight_decay=weight_decay)
    best_val, best_test = -1.0, 0.0
    for _ in range(epochs):
        lin.train()
        opt.zero_grad()
        F.cross_entropy(lin(X[train_mask]), y[train_mask]).backward()
        opt.step()
        with torch.no_grad():
            pred = lin(X).argmax(1)
            val = float((pred[val_mask] == y[val_mask]).float().mean())
            if val > best_val:
                best_val, best_test = val, float((pred[test_mask] == y[test_mask]).float().mean())
    return {"acc": best_test, "val_acc": best_val}


def random_node_split(
    n: int, seed: int, train: float = 0.1, val: float = 0.1
) -> tuple[Tensor, ...]:
    """Seeded train/val/test node masks (used when a dataset has no public split)."""
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(n))
    n_tr, n_va = int(train * n), int(val * n)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    masks[0][perm[:n_tr]] = True
    masks[1][perm[n_tr : n_tr + n_va]] = True
    masks[2][perm[n_tr + n_va :]] = True
    return tuple(masks)


# ------------------------------------------------------------------ trivial baselines (no training)
def adamic_adar(edge_index: Tensor, num_nodes: int, pairs: Tensor) -> Tensor:
    """Adamic-Adar score of ``pairs`` [2, B] on the graph ``edge_index`` (both directions listed):
    ``sum over common neighbours w of 1 / log(deg w)`` (degree-1 neighbours count 0)."""
    import scipy.sparse as sp

    row, col = edge_index.cpu().numpy()
    A = sp.csr_matrix((np.ones(row.size), (row, col)), shape=(num_nodes, num_nodes))
    A.data[:] = 1.0  # duplicates count once
    deg = np.asarray(A.sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        w = np.where(deg > 1, 1.0 / np.log(np.maximum(deg, 2.0)), 0.0)
    Aw = A.multiply(w[None, :]).tocsr()
    u, v = pairs.cpu().numpy()
    scores = np.asarray(Aw[u].multiply(A[v]).sum(axis=1)).ravel()
    return torch.from_numpy(scores)


def feature_cosine(x: Tensor, pairs: Tensor) -> Tensor:
    """Cosine similarity of the raw features of ``pairs`` [2, B] (link prediction without a graph)."""
    z = F.normalize(x.float(), dim=1)
    return (z[pairs[0]] * z[pairs[1]]).sum(1)


def majority_accuracy(y: Tensor, train_mask: Tensor, test_mask: Tensor) -> float:
    """Accuracy of predicting the most frequent training label for every test node."""
    top = int(torch.bincount(y[train_mask]).argmax())
    return float((y[test_mask] == top).float().mean())


def majority_cv(y: Tensor, folds: int = 5, seed: int = 42) -> float:
    """The majority class under the SVM protocol's ``KFold(5, shuffle, 42)``: mean test accuracy."""
    from sklearn.model_selection import KFold

    t = y.cpu()
    accs = []
    for tr, te in KFold(n_splits=folds, shuffle=True, random_state=seed).split(t.numpy()):
        mask_tr = torch.zeros(t.numel(), dtype=torch.bool)
        mask_te = torch.zeros(t.numel(), dtype=torch.bool)
        mask_tr[tr], mask_te[te] = True, True
        accs.append(majority_accuracy(t, mask_tr, mask_te))
    return float(np.mean(accs))
