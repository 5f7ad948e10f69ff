"""GOOD-protocol shift splits for any single-graph node dataset, built offline.

The recipes follow the GOOD benchmark's node-level builders (Gui et al., NeurIPS 2022 Datasets track),
re-implemented from their description (no GOOD code is copied; GOOD's code is GPL-3.0):

* :func:`good_covariate_split`: order nodes by a domain variable, cut 60/20/20 into train / OOD-val /
  OOD-test at domain boundaries, cut the training block into ``num_envs`` environments, and carve
  ID-val and ID-test (floor(0.1 N) each) out of the shuffled training block.
* :func:`good_concept_split`: per domain, pick nodes with a label-domain correlation that holds in
  training (bias 0.95, 0.9, 0.85) and is reversed in OOD-test, OOD-val getting the rest; ID-val and ID-test
  are floor(0.15 |train|) each, out of training.
* :func:`long_tail_split`: a class-imbalanced training split with balanced validation and test sets.

Mask names: ``train_mask``, ``id_val_mask``, ``id_test_mask``, ``ood_val_mask`` (GOOD's ``val_mask``)
and ``ood_test_mask`` (GOOD's ``test_mask``), plus ``env_id`` (-1 outside training) and ``domain_id``.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

DOMAINS = ("degree", "word", "norm", "time", "attr:<name>", "a tensor [N]")
MASKS = ("train_mask", "id_val_mask", "id_test_mask", "ood_val_mask", "ood_test_mask")

__all__ = [
    "DOMAINS",
    "MASKS",
    "ShiftSplit",
    "domain_ids",
    "domain_values",
    "good_concept_split",
    "good_covariate_split",
    "long_tail_split",
    "make_split",
]


@dataclass
class ShiftSplit:
    """Masks [N] (bool), environment ids [N] (-1 outside training), domain ids [N], and a summary."""

    masks: dict[str, Tensor]
    env_id: Tensor
    domain_id: Tensor
    info: dict[str, Any] = field(default_factory=dict)

    def apply(self, data: Any) -> Any:
        """A shallow copy of ``data`` with the masks, ``env_id`` and ``domain_id`` set."""
        out = copy.copy(data)
        for name, mask in self.masks.items():
            setattr(out, name, mask)
        out.env_id = self.env_id
        out.domain_id = self.domain_id
        return out

    def sizes(self) -> dict[str, int]:
        return {name: int(mask.sum()) for name, mask in self.masks.items()}


def _undirected_degree(edge_index: Tensor, n: int) -> Tensor:
    src, dst = edge_index[0].long(), edge_index[1].long()
    keep = src != dst
    lo, hi = torch.minimum(src[keep], dst[keep]), torch.maximum(src[keep], dst[keep])
    pairs = torch.unique(torch.stack([lo, hi]), dim=1) if lo.numel() else torch.zeros(2, 0).long()
    deg = torch.zeros(n, dtype=torch.float64)
    ones = torch.ones(pairs.size(1), dtype=torch.float64)
    deg.index_add_(0, pairs[0], ones)
    deg.index_add_(0, pairs[1], ones)
    return deg


def domain_values(data: Any, domain: str | Tensor) -> Tensor:
    """The domain variable per node [N] (float64).

    ``degree``: undirected degree; ``word``: row sum of ``x`` (the raw bag-of-words length; use it on
    unnormalised features); ``norm``: L2 norm of ``x``'s rows; ``time``: ``data.node_year``;
    ``attr:<name>``: ``data.<name>``; or a tensor with one value per node.
    """
    n = int(data.num_nodes)
    if isinstance(domain, Tensor):
        values = domain.detach().flatten().to(torch.float64)
        source = "the given tensor"
    elif domain == "degree":
        return _undirected_degree(data.edge_index, n)
    elif domain in ("word", "norm"):
        x = getattr(data, "x", None)
        if x is None:
            raise ValueError(f"domain {domain!r} needs node features data.x")
        x = x.detach().to(torch.float64)
        values = x.sum(dim=1) if domain == "word" else x.norm(dim=1)
        source = f"domain {domain!r}"
    elif domain == "time":
        year = getattr(data, "node_year", None)
        if year is None:
            raise ValueError("domain 'time' needs data.node_year")
        values = year.detach().flatten().to(torch.float64)
        source = "data.node_year"
    elif isinstance(domain, str) and domain.startswith("attr:"):
        name = domain[5:]
        value = getattr(data, name, None) if name else None
        if not isinstance(value, Tensor):
            raise ValueError(f"domain {domain!r}: data has no tensor attribute {name!r}")
        values = value.detach().flatten().to(torch.float64)
        source = f"data.{name}"
    else:
        raise ValueError(f"unknown domain {domain!r}; accepted: {', '.join(DOMAINS)}")
    if values.numel() != n:
        raise ValueError(f"{source} has {values.numel()} values, expected one per node ({n})")
    if not torch.isfinite(values).all():
        raise ValueError(f"{source} holds NaN or inf")
    return values


def domain_ids(values: Tensor) -> Tensor:
    """Ranks of the distinct values in ascending order (0 = smallest)."""
    _, inverse = torch.unique(values, sorted=True, return_inverse=True)
    return inverse.long()


def _check_fractions(name: str, values: Sequence[float], total: float | None = None) -> None:
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"{name} must be finite and >= 0, got {tuple(values)}")
    if total is not None and abs(sum(values) - total) > 1e-6:
        raise ValueError(f"{name} must sum to {total:g}, got {tuple(values)} (sum {sum(values):g})")


def _need_two_values(dom: Tensor, domain: Any) -> None:
    distinct = int(torch.unique(dom).numel())
    if distinct < 2:
        raise ValueError(
            f"domain {_name(domain)!r} has a single distinct value; a shift split needs at least 2"
        )


def _name(domain: Any) -> str:
    return "tensor" if isinstance(domain, Tensor) else str(domain)


def _mask(n: int, idx: Sequence[int] | np.ndarray) -> Tensor:
    m = torch.zeros(n, dtype=torch.bool)
    if len(idx):
        m[torch.as_tensor(np.asarray(idx), dtype=torch.long)] = True
    return m


def _covariate_cuts(
    od: np.ndarray, targets: tuple[int, int], max_shift: float = 0.2, min_train: int = 0
) -> tuple[tuple[int, int], str]:
    """Cut positions in the domain order ``od`` and the rule that gave them.

    ``good``: each cut moves forward to the next change of domain value (GOOD's rule), when that
    leaves all three blocks non-empty. ``nearest``: the changes nearest to the targets with
    0 < c1 < c2 < n, when they move the cuts by at most ``max_shift * n`` positions in total and keep
    at least ``min_train`` training nodes. ``within``: otherwise (cut inside the tied runs).
    """
    n = od.size
    changes = np.flatnonzero(od[1:] != od[:-1]) + 1  # positions p with od[p] != od[p - 1]

    def forward(t: int) -> int:
        i = int(np.searchsorted(changes, t, side="left"))
        return int(changes[i]) if i < changes.size else n

    c1 = forward(max(targets[0], 1))
    c2 = forward(max(targets[1], c1))
    if 0 < c1 < c2 < n:
        return (c1, c2), "good"
    if changes.size < 2:
        return (targets[0], targets[1]), "within"
    # the pair of changes 0 < c1 < c2 < n nearest to the targets (L1 in positions)
    first = changes[:-1]
    j = np.clip(np.searchsorted(changes, targets[1]), 0, changes.size - 1)
    best: tuple[int, int, int] | None = None
    for a in first.tolist():
        cands = [int(changes[k]) for k in (j - 1, j) if 0 <= k < changes.size and changes[k] > a]
        if not cands:
            later = changes[changes > a]
            cands = [int(later[0])]
        b = min(cands, key=lambda c: abs(c - targets[1]))
        cost = abs(a - targets[0]) + abs(b - targets[1])
        if best is None or cost < best[0]:
            best = (cost, a, b)
    assert best is not None
    cost, a, b = best
    if cost > max_shift * n or a < min_train:
        return (targets[0], targets[1]), "within"
    return (a, b), "nearest"


def good_covariate_split(
    data: Any,
    domain: str | Tensor = "degree",
    *,
    order: str = "descending",
    ratios: Sequence[float] = (0.6, 0.2, 0.2),
    id_ratio: float = 0.1,
    num_envs: int = 10,
    env_after_shuffle: bool = False,
    fallback: str = "nearest",
    seed: int = 0,
) -> ShiftSplit:
    """GOOD's covariate shift: train / OOD-val / OOD-test are consecutive blocks of the domain order.

    Cuts at floor(r1 N) and floor((r1 + r2) N) move forward to the next change of domain value, so a
    domain value never spans two splits. ``order="descending"`` (GOOD's Cora and Arxiv/degree) trains on
    the largest values. ID-val and ID-test are floor(id_ratio N) each, taken from the shuffled training
    block. ``env_after_shuffle=True`` reproduces old GOOD-Cora (environments cut after shuffling).

    **Fallback** when GOOD's rule leaves a split empty (a run of tied domain values swallows the cut,
    e.g. degree on a graph where most low-degree nodes have degree 1, as on CiteSeer):

    * ``fallback="nearest"`` (default): cut at the domain-value changes nearest to the target
      positions that leave all three splits non-empty (domains still never span two splits, sizes
      differ from the ratios), if that moves the two cuts by at most 0.2 N positions in total and
      leaves room for the ID splits; otherwise the ``within`` rule;
    * ``fallback="within"``: cut at the exact target positions inside the tied runs, the tied nodes in
      a seeded random order (sizes match the ratios; one domain value spans two splits);
    * ``fallback="error"``: raise ``ValueError`` as GOOD's own builder would fail.

    A fallback warns (``UserWarning``) and is recorded in ``info["cut_rule"]`` (``good``, ``nearest`` or
    ``within``).
    """
    if fallback not in ("nearest", "within", "error"):
        raise ValueError(f"fallback must be 'nearest', 'within' or 'error', got {fallback!r}")
    if order not in ("ascending", "descending"):
        raise ValueError(f"order must be 'ascending' or 'descending', got {order!r}")
    ratios = tuple(float(r) for r in ratios)
    if len(ratios) != 3:
        raise ValueError(f"ratios must have 3 entries (train, OOD-val, OOD-test), got {ratios}")
    _check_fractions("ratios", ratios, 1.0)
    if not 0 <= id_ratio < 0.5:
        raise ValueError(f"id_ratio must be in [0, 0.5), got {id_ratio}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    values = domain_values(data, domain)
    n = values.numel()
    dom = domain_ids(values)
    _need_two_values(dom, domain)
    # stable sort by (value, node index), reversed for descending
    key = dom.numpy().astype(np.int64) * (n + 1) + np.arange(n)
    ordered = np.argsort(key, kind="stable")
    if order == "descending":
        ordered = ordered[::-1].copy()
    od = dom.numpy()[ordered]
    targets = (math.floor(ratios[0] * n), math.floor((ratios[0] + ratios[1]) * n))
    cuts, rule = _covariate_cuts(od, targets, min_train=2 * math.floor(id_ratio * n) + 1)
    if rule != "good":
        if fallback == "error":
            raise ValueError(
                f"covariate split by domain {_name(domain)!r} ({int(dom.max()) + 1} distinct values): "
                "GOOD's rule (move each cut forward to the next change of domain value) leaves a split "
                "empty; pass fallback='nearest' or 'within' (see good_covariate_split)"
            )
        if rule == "within" or fallback == "within":
            # exact cuts inside runs of tied values, the ties in a seeded random order
            tie_rng = np.random.default_rng(seed + 104729)
            noise = tie_rng.permutation(n)
            key = dom.numpy().astype(np.int64) * (n + 1) + noise
            ordered = np.argsort(key, kind="stable")
            if order == "descending":
                ordered = ordered[::-1].copy()
            od = dom.numpy()[ordered]
            cuts, rule = (max(1, targets[0]), max(targets[0] + 1, targets[1], 2)), "within"
            cuts = (min(cuts[0], n - 2), min(cuts[1], n - 1))
        warnings.warn(
            f"covariate split by domain {_name(domain)!r}: GOOD's cut rule leaves a split empty "
            f"(too many ties); used the {rule!r} fallback, sizes "
            f"{cuts[0]}/{cuts[1] - cuts[0]}/{n - cuts[1]} (train/OOD-val/OOD-test)",
            UserWarning,
            stacklevel=2,
        )
    part = np.zeros(n, dtype=np.int64)
    part[cuts[0] : cuts[1]] = 1
    part[cuts[1] :] = 2
    blocks = [ordered[part == k] for k in range(3)]
    names = ("train", "OOD-val", "OOD-test")
    for name, block in zip(names, blocks):
        if block.size == 0:
            raise ValueError(
                f"covariate split by domain {_name(domain)!r} ({int(dom.max()) + 1} distinct values) "
                f"left the {name} split empty; the domain has too few distinct values or too many ties"
            )
    train_block = blocks[0]
    env = np.full(n, -1, dtype=np.int64)
    rng = np.random.default_rng(seed)
    if env_after_shuffle:
        shuffled = rng.permutation(train_block)
        chunk = max(1, len(shuffled) // num_envs)
        for i, node in enumerate(shuffled):
            env[node] = min(i // chunk, num_envs - 1)
        perm_source = shuffled
    else:
        chunk = max(1, len(train_block) // num_envs)
        tdom = dom.numpy()[train_block]
        e = 0
        for pos, node in enumerate(train_block):
            if e < num_envs - 1 and pos >= (e + 1) * chunk and tdom[pos] != tdom[pos - 1]:
                e += 1
            env[node] = e
        perm_source = train_block
    shuffled = rng.permutation(perm_source)
    n_id = math.floor(id_ratio * n)
    if 2 * n_id >= len(shuffled):
        raise ValueError(
            f"the training block has {len(shuffled)} nodes, too few for two ID splits of {n_id}"
        )
    cut = len(shuffled) - 2 * n_id
    train, id_val, id_test = shuffled[:cut], shuffled[cut : cut + n_id], shuffled[cut + n_id :]
    masks = {
        "train_mask": _mask(n, train),
        "id_val_mask": _mask(n, id_val),
        "id_test_mask": _mask(n, id_test),
        "ood_val_mask": _mask(n, blocks[1]),
        "ood_test_mask": _mask(n, blocks[2]),
    }
    info = {
        "shift": "covariate",
        "domain": _name(domain),
        "order": order,
        "ratios": list(ratios),
        "id_ratio": id_ratio,
        "num_envs": len(np.unique(env[env >= 0])),
        "num_domains": int(dom.max()) + 1,
        "env_after_shuffle": env_after_shuffle,
        "cut_rule": rule,
        "seed": seed,
    }
    out = ShiftSplit(masks, torch.from_numpy(env), dom, info)
    out.info["sizes"] = out.sizes()
    return out


def _label_stat(y: Tensor, label_stat: str, seed: int) -> np.ndarray:
    y_np = y.detach().cpu().numpy().astype(np.int64)
    if label_stat == "class_index":
        return y_np.astype(np.float64)
    if label_stat == "class_group":
        classes = np.unique(y_np)
        rng = np.random.default_rng(seed + 7919)
        perm = rng.permutation(classes)
        group = {int(c): (1.0 if i < len(classes) // 2 else 0.0) for i, c in enumerate(perm)}
        return np.array([group[int(c)] for c in y_np])
    raise ValueError(f"label_stat must be 'class_index' or 'class_group', got {label_stat!r}")


def good_concept_split(
    data: Any,
    domain: str | Tensor = "degree",
    *,
    bias: Sequence[float] = (0.95, 0.95, 0.9, 0.85, 0.5),
    roles: Sequence[str] = ("train", "test", "train", "train", "val"),
    pick: Sequence[float] = (0.4, 0.6, 0.5, 1.0, 1.0),
    label_stat: str = "class_index",
    id_ratio: float = 0.15,
    seed: int = 0,
) -> ShiftSplit:
    """GOOD's concept shift: a domain-label correlation of strength ``bias`` that flips in OOD-test.

    Per domain (ascending), nodes are "aligned" when o_d (s_i - mean s) > 0, with s_i the label
    statistic (GOOD: the class index) and o_d = +1 for domains in the lower half of the node order, -1
    otherwise (negated in the ``test`` split). Split k takes an aligned node with probability
    bias_k * pick_k and another node with (1 - bias_k) * pick_k; the ``val`` split takes the rest.
    """
    roles = tuple(roles)
    bias = tuple(float(b) for b in bias)
    pick = tuple(float(p) for p in pick)
    if not (len(roles) == len(bias) == len(pick)) or len(roles) < 3:
        raise ValueError("bias, roles and pick must have the same length (>= 3)")
    if roles.count("test") != 1 or roles.count("val") != 1 or roles[-1] != "val":
        raise ValueError(f"roles must hold one 'test' and end with one 'val', got {roles}")
    if any(r not in ("train", "test", "val") for r in roles):
        raise ValueError(f"roles must be train, test or val, got {roles}")
    if any(not 0 <= b <= 1 for b in bias) or any(not 0 <= p <= 1 for p in pick):
        raise ValueError("bias and pick entries must be in [0, 1]")
    if not 0 <= id_ratio < 0.5:
        raise ValueError(f"id_ratio must be in [0, 0.5), got {id_ratio}")
    values = domain_values(data, domain)
    n = values.numel()
    dom = domain_ids(values)
    _need_two_values(dom, domain)
    y = getattr(data, "y", None)
    if y is None or y.numel() != n:
        raise ValueError("a concept split needs labels data.y, one per node")
    stat = _label_stat(y.flatten(), label_stat, seed)
    mu = float(stat.mean())
    dom_np = dom.numpy()
    n_dom = int(dom.max()) + 1
    members = [np.flatnonzero(dom_np == d) for d in range(n_dom)]
    before = np.cumsum([0] + [len(m) for m in members[:-1]])
    orient = np.where(before < n / 2, 1.0, -1.0)
    rng = np.random.default_rng(seed)
    assigned = np.full(n, -1, dtype=np.int64)
    for k, role in enumerate(roles):
        last = k == len(roles) - 1
        for d in range(n_dom):
            cand = members[d][assigned[members[d]] < 0]
            if cand.size == 0:
                continue
            if last:
                assigned[cand] = k
                continue
            o = orient[d] * (-1.0 if role == "test" else 1.0)
            aligned = o * (stat[cand] - mu) > 0
            u_pick = rng.random(cand.size)
            u_bias = rng.random(cand.size)
            take = np.where(aligned, u_bias < bias[k], u_bias > bias[k]) & (u_pick < pick[k])
            if aligned.any() and (~aligned).any():
                kinds_taken = set(aligned[take].tolist())
                for kind in (True, False):
                    if kinds_taken and kind not in kinds_taken:
                        left = np.flatnonzero((aligned == kind) & ~take)
                        if left.size:
                            take[left[0]] = True
            assigned[cand[take]] = k
    train_splits = [k for k, r in enumerate(roles) if r == "train"]
    env = np.full(n, -1, dtype=np.int64)
    for e, k in enumerate(train_splits):
        env[assigned == k] = e
    train_all = np.flatnonzero(env >= 0)
    test = np.flatnonzero(assigned == roles.index("test"))
    val = np.flatnonzero(assigned == len(roles) - 1)
    for name, block in (("train", train_all), ("OOD-test", test), ("OOD-val", val)):
        if block.size == 0:
            raise ValueError(
                f"concept split by domain {_name(domain)!r} left the {name} split empty"
            )
    shuffled = rng.permutation(train_all)
    n_id = math.floor(id_ratio * len(shuffled))
    if 2 * n_id >= len(shuffled):
        raise ValueError(f"the training set has {len(shuffled)} nodes, too few for ID splits")
    cut = len(shuffled) - 2 * n_id
    masks = {
        "train_mask": _mask(n, shuffled[:cut]),
        "id_val_mask": _mask(n, shuffled[cut : cut + n_id]),
        "id_test_mask": _mask(n, shuffled[cut + n_id :]),
        "ood_val_mask": _mask(n, val),
        "ood_test_mask": _mask(n, test),
    }
    info = {
        "shift": "concept",
        "domain": _name(domain),
        "bias": list(bias),
        "roles": list(roles),
        "pick": list(pick),
        "label_stat": label_stat,
        "id_ratio": id_ratio,
        "num_envs": len(train_splits),
        "num_domains": n_dom,
        "seed": seed,
    }
    out = ShiftSplit(masks, torch.from_numpy(env), dom, info)
    out.info["sizes"] = out.sizes()
    return out


def long_tail_split(
    data: Any,
    *,
    imbalance_ratio: float = 10.0,
    n_minor: int | None = None,
    per_class: int = 20,
    val_per_class: int = 30,
    test_per_class: int = 100,
    seed: int = 0,
) -> ShiftSplit:
    """Class-imbalanced training (``per_class`` nodes for major classes, max(1, per_class / ratio) for
    ``n_minor`` seeded minor classes) with balanced validation and test sets (capped by availability).

    There is no distribution shift between validation and test, so the OOD masks equal the ID masks.
    ``data.minority`` flags nodes of minor classes.
    """
    if imbalance_ratio < 1:
        raise ValueError(f"imbalance_ratio must be >= 1, got {imbalance_ratio}")
    y = data.y.flatten().cpu()
    n = y.numel()
    classes = torch.unique(y).tolist()
    c = len(classes)
    n_minor = c // 2 if n_minor is None else n_minor
    if not 0 <= n_minor < c:
        raise ValueError(f"n_minor must be in [0, {c - 1}], got {n_minor}")
    rng = np.random.default_rng(seed)
    minor = set(rng.choice(classes, size=n_minor, replace=False).tolist()) if n_minor else set()
    n_small = max(1, int(per_class / imbalance_ratio))
    train, val, test = [], [], []
    for cls in classes:
        idx = rng.permutation(np.flatnonzero(y.numpy() == cls))
        k = n_small if cls in minor else per_class
        if idx.size < k + 2:
            raise ValueError(f"class {cls} has {idx.size} nodes, too few for a long-tail split")
        train += idx[:k].tolist()
        rest = idx[k:]
        val += rest[:val_per_class].tolist()
        test += rest[val_per_class : val_per_class + test_per_class].tolist()
    masks = {
        "train_mask": _mask(n, train),
        "id_val_mask": _mask(n, val),
        "id_test_mask": _mask(n, test),
        "ood_val_mask": _mask(n, val),
        "ood_test_mask": _mask(n, test),
    }
    info = {
        "shift": "imbalance",
        "imbalance_ratio": imbalance_ratio,
        "minor_classes": sorted(int(m) for m in minor),
        "per_class": per_class,
        "seed": seed,
    }
    out = ShiftSplit(masks, torch.full((n,), -1, dtype=torch.long), y.long().clone(), info)
    out.info["sizes"] = out.sizes()
    return out


def make_split(
    data: Any, shift: str, domain: str | Tensor = "degree", seed: int = 0, **kw: Any
) -> ShiftSplit:
    """``shift``: ``covariate`` | ``concept`` | ``imbalance`` (the builders above)."""
    if shift == "covariate":
        return good_covariate_split(data, domain, seed=seed, **kw)
    if shift == "concept":
        return good_concept_split(data, domain, seed=seed, **kw)
    if shift == "imbalance":
        return long_tail_split(data, seed=seed, **kw)
    raise ValueError(f"unknown shift {shift!r}; accepted: covariate, concept, imbalance")
