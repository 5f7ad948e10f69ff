"""Datasets (never downloaded), graph checks, the leakage-free 85/5/10 edge splitter, negative sampling
and the embedded synthetic graph with planted easy/medium/hard edges (the paper's synthetic curriculum
benchmark, Sec. 3 and Figure 2)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, is_undirected, remove_self_loops, to_undirected

from .config import DATASET_NAMES as DATASET_NAMES  # re-exported: the names load_dataset accepts

PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
PLANETOID_RAW = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


# --------------------------------------------------------------------------------------- graph utils
def check_finite(t: Tensor, what: str) -> None:
    """Raise a ValueError naming ``what``, the count and the first position of NaN/inf entries."""
    if not t.is_floating_point() or t.numel() == 0:
        return
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        first = [int(i) for i in bad.nonzero()[0]]
        where = f"row {first[0]}, column {first[1]}" if len(first) == 2 else f"index {first}"
        value = float(t[tuple(first)])
        raise ValueError(
            f"{what} hold {int(bad.sum())} non-finite value(s) (NaN or inf); the first, {value}, "
            f"is at {where}; expected finite numbers"
        )


def prepare_graph(data: Data) -> Data:
    """Validate ``edge_index``; symmetrise (with a warning), drop self-loops and coalesce. Copies."""
    ei = getattr(data, "edge_index", None)
    if not isinstance(ei, Tensor) or ei.dim() != 2 or ei.size(0) != 2:
        shape = None if not isinstance(ei, Tensor) else tuple(ei.shape)
        raise ValueError(f"edge_index must be a tensor of shape [2, E]; got {shape}")
    if ei.dtype != torch.long:
        raise ValueError(f"edge_index must have dtype torch.long; got {ei.dtype}")
    x = getattr(data, "x", None)
    if x is None:
        raise ValueError("data.x (node features [N, F]) is required")
    if not isinstance(x, Tensor) or x.dim() != 2 or x.size(0) == 0 or x.size(1) == 0:
        got = str(tuple(x.shape)) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"node features x must be a tensor of shape [N, F], N, F >= 1; got {got}")
    check_finite(x, "node features x")
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
    if num == 0:
        return torch.empty(2, 0, dtype=torch.long)
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
    if (val > 0 and n_val == 0) or (test > 0 and n_test == 0):
        need = math.ceil(1 / min(r for r in (val, test) if r > 0) - 1e-9)
        raise ValueError(
            f"the graph has {m} undirected edge(s): too few for a {val:.0%} / {test:.0%} "
            f"validation / test edge split (at least {need} needed)"
        )
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
        out.val_difficulty, out.test_difficulty = diff_und[val_idx], diff_und[test_idx]
    out.split_seed = seed
    return out


def _difficulty_by_pair(g: Data, und: Tensor) -> Tensor:
    """``edge_difficulty`` (aligned with ``edge_index``) re-aligned to canonical pairs ``und``."""
    n = g.num_nodes
    keys = g.edge_index[0] * n + g.edge_index[1]
    lookup = dict(zip(keys.tolist(), g.edge_difficulty.tolist()))
    return torch.tensor([lookup[int(a) * n + int(b)] for a, b in und.T], dtype=torch.long)


# ---------------------------------------------------------------------------------------- loaders
#: Version of what the processed cache holds (bump when the reading or preprocessing changes).
CACHE_FORMAT = 2
#: Raw file of each PyG folder dataset (``<root>/<name>/raw/<file>``), read with ``read_npz``.
PYG_NPZ_RAW = {
    ("coauthor", "cs"): ("CS", "ms_academic_cs.npz"),
    ("coauthor", "physics"): ("Physics", "ms_academic_phy.npz"),
    ("amazon", "computers"): ("Computers", "amazon_electronics_computers.npz"),
    ("amazon", "photo"): ("Photo", "amazon_electronics_photo.npz"),
}


def cache_dir() -> Path:
    """Writable cache: ``$CURMGAE_CACHE`` or ``~/.cache/curmgae``."""
    return Path(os.environ.get("CURMGAE_CACHE", Path.home() / ".cache" / "curmgae"))


def _find_raw(root: Path, folders: list[str], expected: list[str], what: str) -> Path:
    """The first of ``<root>/<folder>/raw``, ``<root>/raw``, ``<root>`` holding every ``expected`` file.

    Otherwise a ``FileNotFoundError`` naming the files missing from the folder that holds most of them."""
    candidates = [root / f / "raw" for f in folders] + [root / "raw", root]
    present = {c: [f for f in expected if (c / f).is_file()] for c in candidates}
    for c in candidates:
        if len(present[c]) == len(expected):
            return c
    best = max(candidates, key=lambda c: len(present[c]))  # first one wins ties: <root>/<name>/raw
    missing = [f for f in expected if f not in present[best]]
    looked = ", ".join(str(c) for c in candidates)
    if present[best]:
        raise FileNotFoundError(
            f"{what}: {best} lacks {', '.join(missing)} ({len(present[best])} of {len(expected)} "
            "raw files found); curmgae never downloads"
        )
    raise FileNotFoundError(
        f"{what}: no raw files under {root} (looked in {looked}); expected {', '.join(expected)}; "
        "curmgae never downloads"
    )


def _identity(files: list[Path], reader: str) -> dict[str, object]:
    """What the processed data depends on: every raw file's name, size and SHA-256, and the reader."""
    import torch_geometric

    manifest = {}
    for f in files:
        digest = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        manifest[f.name] = {"size": f.stat().st_size, "sha256": digest.hexdigest()}
    return {
        "cache_format": CACHE_FORMAT,
        "reader": reader,
        "torch_geometric": torch_geometric.__version__,
        "files": manifest,
    }


def _cached(
    label: str, files: list[Path], reader: str, read: Callable[[], Data], force_reload: bool
) -> Data:
    """``read()``'s result, cached under a key made of the raw files' content and the reader.

    The cache holds ``data.pt`` (a dict of tensors) and ``cache.json`` (the identity it was made from);
    a cache whose identity differs, or that cannot be read, is rebuilt. ``force_reload`` rebuilds it."""
    ident = _identity(files, reader)
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir() / "processed" / f"{label}-{key}"
    stamp, payload = folder / "cache.json", folder / "data.pt"
    if not force_reload and stamp.is_file() and payload.is_file():
        try:
            if json.loads(stamp.read_text(encoding="utf-8")) == ident:
                return Data(**torch.load(payload, map_location="cpu", weights_only=True))
        except (OSError, ValueError, RuntimeError, EOFError, pickle.UnpicklingError):
            pass  # unreadable cache: rebuilt below
    data = read()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".data.{os.getpid()}.tmp"  # unique per process: concurrent runs never clash
        torch.save({k: v for k, v in data.to_dict().items()}, tmp)
        os.replace(tmp, payload)
        stamp.write_text(json.dumps(ident, indent=1, sort_keys=True), encoding="utf-8")
    except OSError as exc:  # a read-only cache only costs speed
        warnings.warn(f"could not write the processed cache in {folder}: {exc}", stacklevel=3)
    return data


def _read_planetoid_file(path: Path) -> None:
    """Read one Planetoid raw file as PyG does; a truncated or foreign file raises a ValueError naming it."""
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty")
    try:
        if path.name.endswith(".test.index"):
            values = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
            bad = next((i for i, v in enumerate(values) if v and not v.lstrip("-").isdigit()), None)
            if bad is not None:
                raise ValueError(f"line {bad + 1} is {values[bad][:40]!r}, not a node index")
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with open(path, "rb") as fh:
                pickle.load(fh, encoding="latin1")  # the Planetoid format is pickled (as in PyG)
    except (
        EOFError,
        pickle.UnpicklingError,
        ValueError,
        TypeError,
        AttributeError,
        ImportError,
        IndexError,
        KeyError,
        UnicodeDecodeError,
    ) as exc:
        detail = "truncated" if isinstance(exc, EOFError) else f"{type(exc).__name__}: {exc}"
        raise ValueError(
            f"{path} is not a readable Planetoid raw file ({detail[:200]})".replace("\n", " ")
        ) from exc


def load_planetoid(root: str | Path, name: str, *, force_reload: bool = False) -> Data:
    """Planetoid ``name`` (Cora, CiteSeer, PubMed) from ``<root>/<name>/raw`` (or ``<root>/raw``).

    The raw files are read in place (``root`` may be read-only) and never downloaded. The processed
    graph is cached in :func:`cache_dir` under a key made of the raw files' content (SHA-256) and the
    reader, so another ``root`` or changed files are never served a stale graph; ``force_reload``
    rebuilds the cache. Missing, empty or truncated files raise an error that names them."""
    key = name.lower()
    if key not in PLANETOID_NAMES:
        raise ValueError(
            f"dataset={name!r} is not a Planetoid name; accepted: Cora, CiteSeer, PubMed"
        )
    name = PLANETOID_NAMES[key]
    expected = [f"ind.{key}.{s}" for s in PLANETOID_RAW]
    raw = _find_raw(Path(root), [name, key], expected, f"Planetoid {name}")
    files = [raw / f for f in expected]

    def read() -> Data:
        for f in files:
            _read_planetoid_file(f)
        from torch_geometric.io.planetoid import read_planetoid_data

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return read_planetoid_data(str(raw), name)
            except (ValueError, IndexError, RuntimeError, TypeError, AttributeError) as exc:
                raise ValueError(
                    f"Planetoid {name} raw files in {raw} are inconsistent: {exc}"
                ) from exc

    data = _cached(name, files, "torch_geometric.io.read_planetoid_data", read, force_reload)
    return _prepared(data, f"Planetoid {name} in {raw}")


def _load_pyg_npz(kind: str, name: str, root: Path, force_reload: bool = False) -> Data:
    """Coauthor / Amazon graphs from an existing PyG folder (``<root>/<name>/raw/<file>.npz``)."""
    entry = PYG_NPZ_RAW.get((kind, name.lower()))
    if entry is None:
        names = ", ".join(f"{k}:{v[0]}" for k, v in PYG_NPZ_RAW.items())
        raise ValueError(f"dataset={kind}:{name} is not accepted; accepted: {names}")
    title, filename = entry
    raw = _find_raw(root, [title, title.lower()], [filename], f"{kind}:{title}")
    path = raw / filename

    def read() -> Data:
        from torch_geometric.io import read_npz

        try:
            return read_npz(str(path), to_undirected=True)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{path} is not a readable PyG .npz graph: {exc}") from exc

    data = _cached(f"{kind}-{title}", [path], "torch_geometric.io.read_npz", read, force_reload)
    return _prepared(data, f"{kind}:{title} in {raw}")


def _prepared(data: Data, where: str) -> Data:
    """:func:`prepare_graph` with the source named in its error messages."""
    try:
        return prepare_graph(data)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from exc


def load_dataset(
    name: str | Path,
    root: str | Path | None = None,
    seed: int = 0,
    quick: bool = False,
    *,
    force_reload: bool = False,
) -> Data:
    """Load a dataset by name without downloading.

    ``synthetic`` (the embedded default, the paper's synthetic curriculum benchmark of Sec. 3, Figure 2),
    ``Cora``/``CiteSeer``/``PubMed`` or ``planetoid:<name>`` (raw files under ``root``),
    ``coauthor:{CS,Physics}``, ``amazon:{Computers,Photo}`` (existing PyG folders under ``root``), or a
    file: a :class:`~pathlib.Path` or ``file:<path>`` (``.npz`` with ``x``, ``edge_index`` and optional
    ``y``, or ``.pt`` holding a PyG ``Data``). ``force_reload`` rebuilds the processed cache.
    """
    if isinstance(name, Path):
        return _load_file(name)
    key = name.lower()
    if key == "synthetic":
        return make_curriculum_sbm(seed=seed, quick=quick)
    if key.startswith("file:"):
        return _load_file(Path(name[5:]))
    kind, _, dname = key.rpartition(":")
    if kind in ("", "planetoid") and dname in PLANETOID_NAMES:
        if root is None:
            raise ValueError(f"dataset={name!r} needs --root DIR (a folder holding {name}/raw)")
        return load_planetoid(root, dname, force_reload=force_reload)
    if kind in ("coauthor", "amazon"):
        if root is None:
            raise ValueError(f"dataset={name!r} needs --root DIR (a folder holding <name>/raw)")
        return _load_pyg_npz(kind, name.split(":", 1)[1], Path(root), force_reload)
    if kind.startswith("ogb") or dname.startswith("ogb"):
        raise ValueError(f"dataset={name!r}: OGB datasets are not implemented yet in curmgae")
    raise ValueError(
        f"dataset={name!r} is not accepted; use synthetic, Cora, CiteSeer, PubMed, planetoid:<name>, "
        "coauthor:<CS|Physics>, amazon:<Computers|Photo> or a .npz/.pt file"
    )


def _array(z: Any, key: str, path: Path) -> np.ndarray:
    if key not in z.files:
        raise ValueError(
            f"{path}: missing field {key!r}; a graph .npz holds x [N, F], edge_index [2, E] and "
            f"optionally y [N] (found: {', '.join(z.files) or 'nothing'})"
        )
    arr = z[key]
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{path}: field {key!r} must be numeric, got dtype {arr.dtype}")
    return np.asarray(arr)


def _integers(arr: np.ndarray, key: str, path: Path) -> np.ndarray:
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{path}: {key} must hold integers; entry {where} is {arr[where]!r}")
    return arr.astype(np.int64)


def _load_npz(path: Path) -> Data:
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        what = "empty" if path.stat().st_size == 0 else f"not a readable .npz file ({exc})"
        raise ValueError(f"{path} is {what}") from exc
    try:
        with z:
            x = _array(z, "x", path)
            ei = _array(z, "edge_index", path)
            y = _array(z, "y", path) if "y" in z.files else None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:  # a member cut short
        raise ValueError(f"{path} is truncated or corrupt ({exc})") from exc
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{path}: x must have shape [N, F] with N, F >= 1; got {x.shape}")
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"{path}: edge_index must have shape [2, E]; got {ei.shape}")
    data = Data(
        x=torch.as_tensor(x).float(),
        edge_index=torch.as_tensor(_integers(ei, "edge_index", path)),
    )
    if y is not None:
        if y.shape != (x.shape[0],):
            raise ValueError(f"{path}: y must have shape [N] = [{x.shape[0]}]; got {y.shape}")
        data.y = torch.as_tensor(_integers(y, "y", path))
    return _prepared(data, str(path))


def _load_file(path: Path) -> Data:
    if not path.is_file():
        raise FileNotFoundError(f"dataset file not found: {path}")
    if path.suffix == ".npz":
        return _load_npz(path)
    if path.suffix == ".pt":
        warnings.warn(
            f"loading {path} with weights_only=False: only load trusted files", stacklevel=3
        )
        try:
            data = torch.load(path, map_location="cpu", weights_only=False)
        except (OSError, EOFError, RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile) as e:
            what = "empty" if path.stat().st_size == 0 else "truncated or not a torch file"
            raise ValueError(f"{path} is {what} ({type(e).__name__})") from e
        if not isinstance(data, Data):
            raise ValueError(f"{path} holds a {type(data).__name__}, not a torch_geometric Data")
        return _prepared(data, str(path))
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
    """Structure-difficulty synthetic graph (the paper's synthetic benchmark behind Figure 2; RCL's
    generator with its bugs fixed: collisions resampled within the same class pair, p ~ exp(-d)).

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
    return _synthetic_data(x, y, ei, edge_difficulty, rng)


def make_noisy_sbm(
    n_classes: int = 10,
    n_per_class: int = 40,
    n_edges: int = 2_000,
    noise: float = 0.3,
    feature_dims: int = 16,
    feature_signal: float = 0.3,
    seed: int = 0,
) -> Data:
    """Positive control for the curriculum: a stochastic block model whose edges are either *clean*
    (both ends in the same class: predictable from structure and features) or *noise* (a fraction
    ``noise`` of the edges, both ends uniform over all nodes: unpredictable by construction).

    Features are ``feature_signal * mu_y + N(0, I)`` in ``feature_dims`` dimensions, with one random
    unit-norm-scaled mean ``mu_c ~ N(0, I)`` per class, so structure carries most of the class signal.
    ``edge_difficulty`` is 0 for clean edges and 2 (``hard``) for noise edges, aligned with
    ``edge_index``; node splits are a seeded 1/3-1/3-1/3 partition. A self-paced curriculum that ranks
    edges by how badly they are reconstructed can keep noise edges out of the reconstruction targets;
    uniform random masking cannot."""
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise={noise!r} is outside the accepted range [0, 1)")
    if n_classes < 2 or n_per_class < 2:
        raise ValueError(f"n_classes={n_classes!r} and n_per_class={n_per_class!r} must be >= 2")
    rng = np.random.default_rng(seed)
    C, n = n_classes, n_classes * n_per_class
    max_clean = C * n_per_class * (n_per_class - 1) // 2
    n_noise = round(noise * n_edges)
    if n_edges - n_noise > max_clean // 2:
        raise ValueError(f"n_edges={n_edges!r} is too dense for {C} classes of {n_per_class} nodes")
    y = np.repeat(np.arange(C), n_per_class)
    mu = rng.standard_normal((C, feature_dims))
    x = feature_signal * mu[y] + rng.standard_normal((n, feature_dims))
    seen: set[int] = set()
    src: list[int] = []
    dst: list[int] = []
    diff: list[int] = []
    while len(src) < n_edges:
        is_noise = len(src) >= n_edges - n_noise
        if is_noise:
            u, v = int(rng.integers(n)), int(rng.integers(n))
        else:
            c = int(rng.integers(C))
            u = c * n_per_class + int(rng.integers(n_per_class))
            v = c * n_per_class + int(rng.integers(n_per_class))
        key = min(u, v) * n + max(u, v)
        if u == v or key in seen:
            continue
        seen.add(key)
        src.append(min(u, v))
        dst.append(max(u, v))
        diff.append(2 if is_noise else 0)
    und = torch.tensor([src, dst], dtype=torch.long)
    difficulty = torch.tensor(diff, dtype=torch.long)
    ei, edge_difficulty = coalesce(
        both_directions(und), torch.cat([difficulty, difficulty]), num_nodes=n, reduce="max"
    )
    return _synthetic_data(x, y, ei, edge_difficulty, rng)


def _synthetic_data(
    x: np.ndarray, y: np.ndarray, ei: Tensor, edge_difficulty: Tensor, rng: np.random.Generator
) -> Data:
    """A generated graph as ``Data`` with its planted edge labels and random thirds of the nodes as
    train / val / test masks."""
    n = len(y)
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
