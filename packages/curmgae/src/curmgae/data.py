"""Datasets (never downloaded), graph checks, the leakage-free 85/5/10 edge splitter, negative sampling
and the embedded synthetic graph with planted easy/medium/hard edges (spec section 5)."""

from __future__ import annotations

import math
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, is_undirected, remove_self_loops, to_undirected

PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
PLANETOID_RAW = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


# --------------------------------------------------------------------------------------- graph utils
def prepare_graph(data: Data) -> Data:
    """Validate ``edge_index``; symmetrise (with a warning), drop self-loops and coalesce. Copies."""
    ei = getattr(data, "edge_index", None)
    if not isinstance(ei, Tensor) or ei.dim() != 2 or ei.size(0) != 2:
        shape = None if not isinstance(ei, Tensor) else tuple(ei.shape)
        raise ValueError(f"edge_index must be a tensor of shape [2, E]; got {shape}")
    if ei.dtype != torch.long:
        raise ValueError(f"edge_index must have dtype torch.long; got {ei.dtype}")
    if getattr(data, "x", None) is None:
        raise ValueError("data.x (node features [N, F]) is required")
    n = data.num_nodes
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        raise ValueError(f"edge_index holds node ids outside [0, {n - 1}]")
    out = data.clone()
    ei, _ = remove_self_loops(ei)
    if not is_undirected(ei, num_nodes=n):
        warnings.warn("directed input graph: symmetrising edge_index", stacklevel=2)
        ei = to_undirected(ei, num_nodes=n)
    out.edge_index = coalesce(ei, num_nodes=n)
    if out.edge_index.size(1) == 0:
        raise ValueError("curmgae needs at least one edge to mask; the graph has zero edges")
    return out


def canonical_edges(edge_index: Tensor) -> Tensor:
    """Each undirected edge once, as ``(u, v)`` with ``u < v``, sorted; shape ``[2, M]``."""
    u, v = edge_index
    keep = u < v
    return torch.stack([u[keep], v[keep]])


def both_directions(pairs: Tensor) -> Tensor:
    """``[2, M]`` undirected pairs -> ``[2, 2M]`` with both orientations."""
    return torch.cat([pairs, pairs.flip(0)], dim=1)


def _pair_keys(pairs: Tensor | np.ndarray, n: int) -> np.ndarray:
    p = np.asarray(pairs)
    lo, hi = np.minimum(p[0], p[1]), np.maximum(p[0], p[1])
    return lo.astype(np.int64) * n + hi


def sample_non_edges(
    num: int,
    num_nodes: int,
    forbidden: Tensor,
    rng: np.random.Generator,
    canonical: bool = True,
) -> Tensor:
    """``num`` distinct pairs that are neither self-pairs nor (in either direction) in ``forbidden``.

    ``canonical=True`` returns ``u < v`` pairs with no ``(u,v)/(v,u)`` duplicates."""
    banned = set(_pair_keys(forbidden, num_nodes).tolist())
    max_pairs = num_nodes * (num_nodes - 1) // 2 - len(banned)
    if num > max_pairs:
        raise ValueError(f"cannot sample {num} non-edges; only {max_pairs} exist")
    out: list[tuple[int, int]] = []
    while len(out) < num:
        need = num - len(out)
        cand = rng.integers(0, num_nodes, size=(2, 2 * need + 16))
        for a, b in cand.T:
            if a == b:
                continue
            key = min(a, b) * num_nodes + max(a, b)
            if key in banned:
                continue
            banned.add(key)
            out.append((min(a, b), max(a, b)) if canonical else (a, b))
            if len(out) == num:
                break
    return torch.tensor(out, dtype=torch.long).T.reshape(2, num)


def split_edges(data: Data, val: float = 0.05, test: float = 0.10, seed: int = 234) -> Data:
    """Leakage-free link-prediction split of the undirected edges (S2GAE ``do_edge_split`` ratios).

    Returns a copy whose ``edge_index`` holds only the *training* edges (both directions; used for
    message passing and for masking) and ``train_pos``, ``val_pos``, ``val_neg``, ``test_pos``,
    ``test_neg`` (canonical ``[2, *]``). Val/test negatives are non-edges of the full graph, one per
    positive, disjoint across splits. ``full_edge_index`` keeps the whole graph for node classification.
    """
    if not (0 <= val < 1 and 0 <= test < 1 and val + test < 1):
        raise ValueError(f"val={val!r}, test={test!r} must be in [0, 1) with val + test < 1")
    g = prepare_graph(data)
    n = g.num_nodes
    und = canonical_edges(g.edge_index)
    m = und.size(1)
    rng = np.random.default_rng(seed)
    perm = torch.from_numpy(rng.permutation(m))
    n_val, n_test = math.floor(val * m), math.floor(test * m)
    val_idx, test_idx, train_idx = (
        perm[:n_val],
        perm[n_val : n_val + n_test],
        perm[n_val + n_test :],
    )
    train_idx = train_idx.sort().values
    neg = sample_non_edges(n_val + n_test, n, und, rng)
    out = g.clone()
    out.full_edge_index = g.edge_index
    out.train_pos = und[:, train_idx]
    out.val_pos, out.test_pos = und[:, val_idx], und[:, test_idx]
    out.val_neg, out.test_neg = neg[:, :n_val], neg[:, n_val:]
    out.edge_index = both_directions(out.train_pos)
    if getattr(g, "edge_difficulty", None) is not None:
        diff_und = _difficulty_by_pair(g, und)
        out.train_difficulty = diff_und[train_idx]
    out.split_seed = seed
    return out


def _difficulty_by_pair(g: Data, und: Tensor) -> Tensor:
    """``edge_difficulty`` (aligned with ``edge_index``) re-aligned to canonical pairs ``und``."""
    n = g.num_nodes
    keys = g.edge_index[0] * n + g.edge_index[1]
    lookup = dict(zip(keys.tolist(), g.edge_difficulty.tolist()))
    return torch.tensor([lookup[int(a) * n + int(b)] for a, b in und.T], dtype=torch.long)


# ---------------------------------------------------------------------------------------- loaders
def cache_dir() -> Path:
    """Writable cache: ``$CURMGAE_CACHE`` or ``~/.cache/curmgae``."""
    return Path(os.environ.get("CURMGAE_CACHE", Path.home() / ".cache" / "curmgae"))


def load_planetoid(root: str | Path, name: str) -> Data:
    """Planetoid ``name`` (Cora, CiteSeer, PubMed) from ``<root>/<name>/raw`` (or ``<root>/raw``).

    The raw files are copied to a writable cache before PyG processes them (``root`` may be read-only);
    nothing is ever downloaded."""
    key = name.lower()
    if key not in PLANETOID_NAMES:
        raise ValueError(
            f"dataset={name!r} is not a Planetoid name; accepted: Cora, CiteSeer, PubMed"
        )
    name = PLANETOID_NAMES[key]
    expected = [f"ind.{key}.{s}" for s in PLANETOID_RAW]
    root = Path(root)
    candidates = [root / name / "raw", root / key / "raw", root / "raw", root]
    raw = next((c for c in candidates if all((c / f).is_file() for f in expected)), None)
    if raw is None:
        raise FileNotFoundError(
            f"Planetoid {name} raw files not found under {root} (looked in {name}/raw, raw/, .); "
            f"expected: {', '.join(expected)}"
        )
    from torch_geometric.datasets import Planetoid

    dst_root = cache_dir() / "planetoid"
    dst_raw = dst_root / name / "raw"
    dst_raw.mkdir(parents=True, exist_ok=True)
    for f in expected:
        src, dst = raw / f, dst_raw / f
        if not dst.is_file() or dst.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, dst)
    return prepare_graph(Planetoid(str(dst_root), name)[0])


def _load_pyg_folder(kind: str, name: str, root: Path) -> Data:
    from torch_geometric.datasets import Amazon, Coauthor

    cls = {"coauthor": Coauthor, "amazon": Amazon}[kind]
    raw_dir = root / name / "raw"
    if not raw_dir.is_dir() or not any(raw_dir.iterdir()):
        raise FileNotFoundError(
            f"{kind}:{name} raw files not found in {raw_dir}; curmgae never downloads"
        )
    return prepare_graph(cls(str(root), name)[0])


def load_dataset(
    name: str, root: str | Path | None = None, seed: int = 0, quick: bool = False
) -> Data:
    """Load a dataset by name without downloading.

    ``synthetic`` (embedded default, spec 5.3), ``Cora``/``CiteSeer``/``PubMed`` or ``planetoid:<name>``,
    ``coauthor:{CS,Physics}``, ``amazon:{Computers,Photo}`` (existing PyG folders), ``file:<path>``
    (``.pt`` holding a PyG ``Data`` or ``.npz`` with ``x``, ``edge_index`` and optional ``y``).
    """
    key = name.lower()
    if key == "synthetic":
        return make_curriculum_sbm(seed=seed, quick=quick)
    if key.startswith("file:"):
        return _load_file(Path(name[5:]))
    kind, _, dname = key.rpartition(":")
    if kind in ("", "planetoid") and dname in PLANETOID_NAMES:
        if root is None:
            raise ValueError(f"dataset={name!r} needs --root DIR (a folder holding {name}/raw)")
        return load_planetoid(root, dname)
    if kind in ("coauthor", "amazon"):
        if root is None:
            raise ValueError(f"dataset={name!r} needs --root DIR")
        return _load_pyg_folder(kind, name.split(":", 1)[1], Path(root))
    if kind.startswith("ogb") or dname.startswith("ogb"):
        raise ValueError(f"dataset={name!r}: OGB datasets are not implemented yet in curmgae 0.1.0")
    raise ValueError(
        f"dataset={name!r} is not accepted; use synthetic, Cora, CiteSeer, PubMed, planetoid:<name>, "
        "coauthor:<CS|Physics>, amazon:<Computers|Photo> or file:<path.pt|path.npz>"
    )


def _load_file(path: Path) -> Data:
    if not path.is_file():
        raise FileNotFoundError(f"dataset file not found: {path}")
    if path.suffix == ".npz":
        z = np.load(path)
        data = Data(
            x=torch.as_tensor(z["x"]).float(), edge_index=torch.as_tensor(z["edge_index"]).long()
        )
        if "y" in z:
            data.y = torch.as_tensor(z["y"]).long()
        return prepare_graph(data)
    if path.suffix == ".pt":
        warnings.warn(
            f"loading {path} with weights_only=False: only load trusted files", stacklevel=2
        )
        return prepare_graph(torch.load(path, weights_only=False))
    raise ValueError(f"dataset file {path} must end in .pt or .npz")


# ------------------------------------------------------------------------------ synthetic generator
def make_curriculum_sbm(
    n_classes: int = 10,
    n_per_class: int = 500,
    n_edges: int = 30_000,
    homophily: float = 0.5,
    radius: float = 3.0,
    sigma: float = 1.0,
    extra_dims: int = 0,
    pair_prob: str = "exp",
    seed: int = 0,
    quick: bool = False,
) -> Data:
    """Structure-difficulty synthetic graph (spec 5.3; RCL's generator with its bugs fixed).

    Classes sit on a circle; features are 2-D Gaussians around ``radius*(cos, sin)(2 pi c / C)``.
    An edge is intra-class with probability ``homophily``; otherwise an ordered class pair at circular
    label distance ``d`` is drawn with probability proportional to ``exp(-d)`` (``pair_prob="exp"``) or
    ``1/d`` (``"inverse"``). Collisions are resampled within the same class pair. ``edge_difficulty``:
    0 easy (d=0), 1 medium (d=1), 2 hard (d>=2), aligned with ``edge_index``. ``quick``: 10x100 nodes,
    5,000 edges.
    """
    if quick:
        n_per_class, n_edges = 100, 5_000
    if pair_prob not in ("exp", "inverse"):
        raise ValueError(f"pair_prob={pair_prob!r} is not accepted; choose exp or inverse")
    if not 0.0 <= homophily <= 1.0:
        raise ValueError(f"homophily={homophily!r} is outside the accepted range [0, 1]")
    rng = np.random.default_rng(seed)
    C, n = n_classes, n_classes * n_per_class
    y = np.repeat(np.arange(C), n_per_class)
    angle = 2 * np.pi * np.arange(C) / C
    centres = radius * np.stack([np.cos(angle), np.sin(angle)], 1)
    x = centres[y] + sigma * rng.standard_normal((n, 2))
    if extra_dims:
        x = np.concatenate([x, rng.standard_normal((n, extra_dims))], 1)
    a_idx, b_idx = np.meshgrid(np.arange(C), np.arange(C), indexing="ij")
    dist = np.minimum(np.abs(a_idx - b_idx), C - np.abs(a_idx - b_idx)).reshape(-1)
    off = dist > 0
    w = np.exp(-dist[off]) if pair_prob == "exp" else 1.0 / dist[off]
    pairs_a, pairs_b, p_pair = a_idx.reshape(-1)[off], b_idx.reshape(-1)[off], w / w.sum()
    seen: set[int] = set()
    src: list[int] = []
    dst: list[int] = []
    diff: list[int] = []
    while len(src) < n_edges:
        if rng.random() < homophily:
            a = b = int(rng.integers(C))
        else:
            k = int(rng.choice(len(p_pair), p=p_pair))
            a, b = int(pairs_a[k]), int(pairs_b[k])
        for _ in range(1000):  # resample within the same class pair on collision
            u = a * n_per_class + int(rng.integers(n_per_class))
            v = b * n_per_class + int(rng.integers(n_per_class))
            key = min(u, v) * n + max(u, v)
            if u != v and key not in seen:
                break
        else:
            continue
        seen.add(key)
        d = min(abs(a - b), C - abs(a - b))
        src.append(min(u, v))
        dst.append(max(u, v))
        diff.append(0 if d == 0 else (1 if d == 1 else 2))
    und = torch.tensor([src, dst], dtype=torch.long)
    difficulty = torch.tensor(diff, dtype=torch.long)
    ei = both_directions(und)
    ei, edge_difficulty = coalesce(
        ei, torch.cat([difficulty, difficulty]), num_nodes=n, reduce="max"
    )
    perm = torch.from_numpy(rng.permutation(n))
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    for i, part in enumerate(torch.tensor_split(perm, 3)):
        masks[i][part] = True
    return Data(
        x=torch.tensor(x, dtype=torch.float),
        y=torch.from_numpy(y).long(),
        edge_index=ei,
        edge_difficulty=edge_difficulty,
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
    )
