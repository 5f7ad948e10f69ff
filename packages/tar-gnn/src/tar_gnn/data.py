"""Datasets: the embedded contextual-SBM OOD generator, Planetoid-format folders, GOOD processed files,
and plain ``.pt``/``.npz`` graphs. Nothing is ever downloaded.

Every loader validates what it reads and raises ``ValueError`` naming the file and what is wrong.
"""

from __future__ import annotations

import json
import math
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .splits import MASKS, ShiftSplit, good_covariate_split

PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
PLANETOID_FILES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
GOOD_NAMES = ("GOODCora", "GOODCBAS", "GOODTwitch", "GOODWebKB", "GOODArxiv")

__all__ = [
    "GOOD_NAMES",
    "PLANETOID_NAMES",
    "find_planetoid",
    "load_file",
    "load_good_processed",
    "load_planetoid",
    "load_split",
    "make_csbm_ood",
    "save_split",
    "validate_graph",
]


def _data_cls() -> Any:
    from torch_geometric.data import Data

    return Data


# ------------------------------------------------------------------------------------------ checks


def validate_graph(data: Any, source: str = "data") -> Any:
    """Check a node-classification graph: finite 2-D ``x``, integer labels, ``edge_index`` in range.

    Returns ``data`` with ``x`` as float32, ``y`` and ``edge_index`` as int64 and bool masks.
    """
    for key in ("x", "edge_index", "y"):
        if getattr(data, key, None) is None:
            raise ValueError(f"{source}: missing field {key!r}")
    x, edge_index, y = data.x, data.edge_index, data.y
    if x.is_sparse or getattr(x, "layout", torch.strided) != torch.strided:
        x = x.to_dense()
    if x.dim() != 2 or x.size(0) == 0:
        raise ValueError(f"{source}: x must be a non-empty 2-D array [N, F], got {list(x.shape)}")
    n = x.size(0)
    xf = x.to(torch.float32)
    if not torch.isfinite(xf).all():
        bad = (~torch.isfinite(xf)).nonzero()[0].tolist()
        raise ValueError(f"{source}: x holds NaN or inf (first at row {bad[0]}, column {bad[1]})")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(
            f"{source}: edge_index must have shape [2, E], got {list(edge_index.shape)}"
        )
    if edge_index.is_floating_point():
        if not torch.isfinite(edge_index).all():
            raise ValueError(f"{source}: edge_index holds NaN or inf")
        if not torch.equal(edge_index, edge_index.round()):
            raise ValueError(f"{source}: edge_index holds fractional node ids")
    edge_index = edge_index.long()
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise ValueError(
            f"{source}: edge_index holds node ids outside [0, {n - 1}] "
            f"(min {int(edge_index.min())}, max {int(edge_index.max())})"
        )
    y = y.flatten() if y.dim() == 2 and y.size(1) == 1 else y
    if y.dim() != 1 or y.numel() != n:
        raise ValueError(
            f"{source}: y must hold one label per node ({n}), got shape {list(y.shape)}"
        )
    if y.is_floating_point():
        if not torch.isfinite(y).all():
            raise ValueError(f"{source}: y holds NaN or inf")
        if not torch.equal(y, y.round()):
            raise ValueError(f"{source}: y holds fractional labels; expected class indices")
    y = y.long()
    if int(y.min()) < 0:
        raise ValueError(f"{source}: y holds negative labels")
    if int(torch.unique(y).numel()) < 2:
        raise ValueError(f"{source}: y has a single class; node classification needs >= 2")
    data.x, data.edge_index, data.y = xf, edge_index, y
    for name in (*MASKS, "train_mask", "val_mask", "test_mask"):
        mask = getattr(data, name, None)
        if mask is None:
            continue
        if mask.numel() != n:
            raise ValueError(f"{source}: {name} has {mask.numel()} entries, expected {n}")
        setattr(data, name, mask.flatten().bool())
    for name in ("env_id", "domain_id"):
        value = getattr(data, name, None)
        if value is not None:
            if value.numel() != n:
                raise ValueError(f"{source}: {name} has {value.numel()} entries, expected {n}")
            setattr(data, name, value.flatten().long())
    return data


# -------------------------------------------------------------------------------------- Planetoid


def find_planetoid(path: str | Path, name: str | None = None) -> tuple[Path, str]:
    """The raw folder and file prefix of a Planetoid-format dataset under ``path``.

    ``path`` may be the raw folder itself (``ind.<prefix>.x`` ...), a dataset folder holding ``raw/``,
    or a root holding ``<Name>/raw``. ``name`` picks the prefix when several are present.
    """
    path = Path(path)
    candidates = [path, path / "raw"]
    if name:
        candidates += [path / name / "raw", path / PLANETOID_NAMES.get(name.lower(), name) / "raw"]
    elif path.is_dir():
        candidates += [p / "raw" for p in sorted(path.iterdir()) if p.is_dir()]
    for folder in candidates:
        if not folder.is_dir():
            continue
        prefixes = sorted(p.name[4:-2] for p in folder.glob("ind.*.x"))
        if name:
            prefixes = [p for p in prefixes if p.lower() == name.lower()]
        if prefixes:
            return folder, prefixes[0]
    wanted = f"ind.{name.lower()}.x" if name else "ind.<name>.x"
    raise ValueError(
        f"{path}: no Planetoid files ({wanted}, ...) in it, in raw/ or in <Name>/raw/; expected the "
        "Planetoid raw layout ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}"
    )


def load_planetoid(path: str | Path, name: str | None = None) -> Any:
    """A Planetoid-format graph (Cora, CiteSeer, PubMed or any ``ind.<prefix>.*`` set) as a PyG ``Data``.

    Reads the raw files in place (nothing is written, so a read-only folder works); the features are
    the raw bag-of-words (not row-normalised), so the ``word`` domain is the document length. Edges are
    made undirected and coalesced; PyG's public split masks are dropped (the shift builders make new ones).
    """
    from torch_geometric.io import read_planetoid_data
    from torch_geometric.utils import coalesce, to_undirected

    folder, prefix = find_planetoid(path, name)
    missing = [
        f"ind.{prefix}.{f}" for f in PLANETOID_FILES if not (folder / f"ind.{prefix}.{f}").is_file()
    ]
    if missing:
        raise ValueError(f"{folder}: missing Planetoid file(s) {', '.join(missing)}")
    for f in PLANETOID_FILES:
        if (folder / f"ind.{prefix}.{f}").stat().st_size == 0:
            raise ValueError(f"{folder / f'ind.{prefix}.{f}'}: the file is empty")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            raw = read_planetoid_data(str(folder), prefix)
        except (
            pickle.UnpicklingError,
            EOFError,
            ValueError,
            IndexError,
            TypeError,
            AttributeError,
        ) as exc:
            raise ValueError(
                f"{folder}: cannot read Planetoid files ind.{prefix}.* ({type(exc).__name__}: {exc})"
            ) from exc
    Data = _data_cls()
    n = raw.x.size(0)
    edge_index = coalesce(to_undirected(raw.edge_index, num_nodes=n), num_nodes=n)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    data = Data(x=raw.x, edge_index=edge_index, y=raw.y)
    data.name = PLANETOID_NAMES.get(prefix.lower(), prefix)
    return validate_graph(data, f"{folder}/ind.{prefix}.*")


# ----------------------------------------------------------------------------------- file formats


def _torch_load(path: Path) -> Any:
    warnings.warn(
        f"loading {path.name} unpickles Python objects, which can run code: load only trusted files",
        UserWarning,
        stacklevel=3,
    )
    return torch.load(path, map_location="cpu", weights_only=False)


def _from_mapping(obj: dict[str, Any], source: str) -> Any:
    Data = _data_cls()
    fields = {}
    for key, value in obj.items():
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        fields[key] = value
    return Data(**fields)


def load_file(path: str | Path) -> Any:
    """A graph from ``.npz`` (arrays ``x``, ``edge_index``, ``y``; optional masks, ``env_id``,
    ``domain_id``) or ``.pt`` (a PyG ``Data`` or a dict of tensors; unpickling: trusted files only)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: not a file")
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: the file is empty")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{path}: not a readable .npz file ({exc})") from exc
        for key in ("x", "edge_index", "y"):
            if key not in arrays:
                raise ValueError(
                    f"{path}: missing array {key!r} (has {', '.join(arrays) or 'none'})"
                )
        data = _from_mapping(arrays, str(path))
    elif suffix == ".pt":
        obj = _torch_load(path)
        if isinstance(obj, tuple) and obj:
            obj = obj[0]
        if isinstance(obj, dict):
            data = _from_mapping(obj, str(path))
        elif hasattr(obj, "edge_index"):
            data = obj
        else:
            raise ValueError(f"{path}: holds a {type(obj).__name__}, expected a PyG Data or a dict")
    else:
        raise ValueError(f"{path}: unknown format {suffix!r}; accepted: .npz, .pt")
    return validate_graph(data, str(path))


def _rebuild_data(obj: Any, source: str) -> Any:
    """A ``Data`` from what ``InMemoryDataset.collate`` stored, across PyG versions."""
    Data = _data_cls()
    if isinstance(obj, dict):
        return _from_mapping(obj, source)
    try:
        _ = obj.num_nodes
        keys = list(obj.keys()) if callable(getattr(obj, "keys", None)) else list(obj.keys)
        return Data(**{k: obj[k] for k in keys})
    except (RuntimeError, AttributeError, KeyError, TypeError):
        raw = {k: v for k, v in vars(obj).items() if not k.startswith("_") and v is not None}
        if not raw:
            raise ValueError(f"{source}: cannot read the stored Data object") from None
        return Data(**raw)


def load_good_processed(root: str | Path, name: str, domain: str, shift: str) -> Any:
    """A GOOD node dataset from its processed file ``<root>/<name>/<domain>/processed/<shift>.pt``.

    The file is the ``(data, slices)`` tuple GOOD writes with ``InMemoryDataset.collate``; loading it
    unpickles (trusted files only). GOOD's ``val_mask``/``test_mask`` become ``ood_val_mask``/
    ``ood_test_mask``. GOOD's archives are on Google Drive: fetch them yourself; nothing is downloaded.
    """
    if name not in GOOD_NAMES:
        raise ValueError(f"unknown GOOD dataset {name!r}; accepted: {', '.join(GOOD_NAMES)}")
    if shift not in ("no_shift", "covariate", "concept"):
        raise ValueError(f"shift must be no_shift, covariate or concept, got {shift!r}")
    path = Path(root) / name / domain / "processed" / f"{shift}.pt"
    if not path.is_file():
        raise ValueError(
            f"{path} not found; expected GOOD's layout <root>/{name}/{domain}/processed/"
            "{no_shift,covariate,concept}.pt (GOOD's archives must be fetched by the user)"
        )
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: the file is empty")
    obj = _torch_load(path)
    if isinstance(obj, (tuple, list)) and obj:
        obj = obj[0]
    data = _rebuild_data(obj, str(path))
    for old, new in (("val_mask", "ood_val_mask"), ("test_mask", "ood_test_mask")):
        if getattr(data, old, None) is not None:
            setattr(data, new, getattr(data, old))
            delattr(data, old)
    for key in ("train_mask", "ood_val_mask", "ood_test_mask"):
        if getattr(data, key, None) is None:
            raise ValueError(f"{path}: missing field {key!r} (GOOD's {key.replace('ood_', '')})")
    for key in ("id_val_mask", "id_test_mask"):
        if getattr(data, key, None) is None:  # GOOD's no_shift files have none
            setattr(data, key, torch.zeros(data.train_mask.numel(), dtype=torch.bool))
    data = validate_graph(data, str(path))
    if getattr(data, "env_id", None) is not None:
        env = data.env_id.clone()
        env[~data.train_mask] = -1
        data.env_id = env
    return data


# ----------------------------------------------------------------------------------- split files


def save_split(path: str | Path, split: ShiftSplit) -> Path:
    """Write a split as ``.npz``: the five masks, ``env_id``, ``domain_id`` and ``info`` (JSON)."""
    path = Path(path)
    arrays: dict[str, Any] = {k: v.numpy() for k, v in split.masks.items()}
    arrays["env_id"] = split.env_id.numpy()
    arrays["domain_id"] = split.domain_id.numpy()
    arrays["info"] = np.array(json.dumps(split.info))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def load_split(path: str | Path, num_nodes: int | None = None) -> ShiftSplit:
    """Read a split written by :func:`save_split` (checks every mask and the node count)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        raise ValueError(f"{path}: missing or empty split file")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable .npz split file ({exc})") from exc
    for key in (*MASKS, "env_id", "domain_id"):
        if key not in arrays:
            raise ValueError(f"{path}: missing array {key!r}")
    n = arrays["train_mask"].shape[0]
    if num_nodes is not None and n != num_nodes:
        raise ValueError(f"{path}: the split is for {n} nodes, the graph has {num_nodes}")
    masks = {}
    for key in MASKS:
        arr = arrays[key]
        if arr.shape != (n,):
            raise ValueError(f"{path}: {key} has shape {arr.shape}, expected ({n},)")
        if arr.dtype != np.bool_:
            if not np.isfinite(arr.astype(np.float64)).all() or not np.isin(arr, (0, 1)).all():
                raise ValueError(f"{path}: {key} must hold booleans (0/1)")
        masks[key] = torch.from_numpy(arr.astype(bool))
    info = json.loads(str(arrays["info"])) if "info" in arrays else {}
    return ShiftSplit(
        masks,
        torch.from_numpy(arrays["env_id"].astype(np.int64)),
        torch.from_numpy(arrays["domain_id"].astype(np.int64)),
        info,
    )


# ---------------------------------------------------------------------------------- synthetic CSBM


def make_csbm_ood(
    n_nodes: int = 2000,
    n_classes: int = 4,
    shift: str = "concept",
    seed: int = 0,
    *,
    signal: float = 0.6,
    homophily: float = 0.8,
    kappa: float = 3.0,
    avg_degree: float = 8.0,
    p_env: tuple[float, ...] = (0.95, 0.9, 0.85, 0.8, 0.75, 0.3, 0.0),
    inv_dim: int = 8,
    env_noise: float = 0.1,
    id_ratio: float = 0.1,
) -> Any:
    """A contextual stochastic block model with GOOD-style OOD masks (the embedded default dataset).

    ``shift``:

    * ``concept``: 5 training environments (12% of nodes each), OOD-val and OOD-test (20% each). A
      "colour" feature equals the label with probability ``p_env`` (0.95 ... 0.75 in training, 0.3 in
      OOD-val, 0.0 in OOD-test), else a uniform colour; ``minority`` flags nodes whose colour is not
      their label (the hard training nodes for a model that uses colour).
    * ``covariate``: 5 training environments (16% each), OOD-val and OOD-test (10% each); each
      environment has its own random code as features, unrelated to the label (OOD nodes carry unseen codes).
    * ``degree``: degree-corrected (Pareto(2.5) propensities), no environment features, then
      :func:`~tar_gnn.good_covariate_split` by degree (descending): a topological covariate shift.

    Invariant features ``m_y + N(0, I)`` (class means of norm ``signal``) are always present. Edges:
    a degree-corrected SBM with class homophily ``homophily`` and environment assortativity ``kappa``,
    mean degree ``avg_degree``, sampled block-wise (O(E) memory).
    """
    if shift not in ("concept", "covariate", "degree"):
        raise ValueError(f"shift must be concept, covariate or degree, got {shift!r}")
    if n_nodes < 50 or n_classes < 2:
        raise ValueError(
            f"make_csbm_ood needs n_nodes >= 50 and n_classes >= 2, got {n_nodes}, {n_classes}"
        )
    if not 0 <= homophily <= 1 or kappa <= 0 or avg_degree <= 0 or signal < 0:
        raise ValueError("homophily must be in [0, 1]; kappa, avg_degree > 0; signal >= 0")
    if len(p_env) != 7:
        raise ValueError(
            f"p_env needs 7 entries (5 training envs, OOD-val, OOD-test), got {len(p_env)}"
        )
    rng = np.random.default_rng(seed)
    n, c = n_nodes, n_classes
    y = rng.integers(0, c, size=n)
    fracs = [0.12] * 5 + [0.2, 0.2] if shift == "concept" else [0.16] * 5 + [0.1, 0.1]
    perm = rng.permutation(n)
    bounds = np.floor(np.cumsum([0.0, *fracs]) * n).astype(int)
    bounds[-1] = n
    env = np.empty(n, dtype=np.int64)
    for e in range(7):
        env[perm[bounds[e] : bounds[e + 1]]] = e
    means = rng.standard_normal((c, inv_dim))
    means *= signal / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
    x_inv = means[y] + rng.standard_normal((n, inv_dim))
    minority = np.zeros(n, dtype=bool)
    colour = np.full(n, -1, dtype=np.int64)
    if shift == "concept":
        p = np.asarray(p_env)[env]
        keep = rng.random(n) < p
        colour = np.where(keep, y, rng.integers(0, c, size=n))
        minority = colour != y
        x_env = np.eye(c)[colour] + env_noise * rng.standard_normal((n, c))
        x = np.concatenate([x_inv, x_env], axis=1)
    elif shift == "covariate":
        codes = rng.standard_normal((7, c))
        codes /= np.linalg.norm(codes, axis=1, keepdims=True)
        x = np.concatenate([x_inv, codes[env] + env_noise * rng.standard_normal((n, c))], axis=1)
    else:
        x = x_inv
    theta = np.ones(n)
    if shift == "degree":
        theta = rng.pareto(2.5, size=n) + 1.0
        for cls in range(c):
            sel = y == cls
            theta[sel] /= theta[sel].mean()
    block_env = env if shift != "degree" else np.zeros(n, dtype=np.int64)
    edge_index = _sbm_edges(rng, y, block_env, theta, c, homophily, kappa, avg_degree)
    Data = _data_cls()
    data = Data(
        x=torch.tensor(x, dtype=torch.float32),
        edge_index=edge_index,
        y=torch.tensor(y, dtype=torch.long),
    )
    data.minority = torch.tensor(minority)
    data.colour = torch.tensor(colour)
    data.name = f"csbm-{shift}"
    if shift == "degree":
        split = good_covariate_split(
            data, "degree", order="descending", id_ratio=id_ratio, seed=seed
        )
        return split.apply(data)
    train_env = env < 5
    train_idx = rng.permutation(np.flatnonzero(train_env))
    _set_split_masks(
        data,
        n,
        train_idx,
        math.floor(id_ratio * n),
        np.flatnonzero(env == 5),
        np.flatnonzero(env == 6),
    )
    data.env_id = torch.tensor(np.where(train_env, env, -1))
    data.domain_id = torch.tensor(env)
    return data


def make_csbm_shift(
    n_nodes: int = 1000,
    seed: int = 0,
    *,
    signal: float = 1.0,
    homophily: float = 0.8,
    shift: float = 0.9,
    minority: float = 0.1,
    clustered: bool = True,
    spurious: float = 1.0,
    kappa: float = 30.0,
    avg_degree: float = 6.0,
    inv_dim: int = 8,
    env_noise: float = 0.3,
    id_ratio: float = 0.1,
) -> Any:
    """A two-class contextual SBM with a spurious "colour" whose shift is strong enough to hurt ERM.

    Regions: a training pool (60% of the nodes) and OOD-val and OOD-test (20% each). In the training
    pool a fraction ``1 - minority`` of the nodes (the majority) has colour = label and the rest (the
    minority, ``data.minority``) the other colour; in OOD-val and OOD-test the colour is flipped with
    probability ``shift`` (the shift strength). Features: ``m_y + N(0, I)`` in ``inv_dim`` dimensions
    (class means of norm ``signal``: the invariant part) and ``spurious * onehot(colour) + N(0,
    env_noise^2)``. Edges: an SBM with class homophily ``homophily``, mean degree ``avg_degree`` and
    region assortativity ``kappa`` (edges inside a region are ``kappa`` times likelier), so OOD nodes
    mostly see OOD neighbours and aggregation does not undo the shift.

    ``clustered=True`` makes the minority its own region (minority nodes link mostly to each other:
    moving mass along edges can reach all of them); ``clustered=False`` scatters them inside the
    majority region. ``env_id`` is 0 (majority) / 1 (minority) on training nodes: the group labels that
    an oracle such as GroupDRO uses. ID-val and ID-test (``id_ratio`` N each) come from the training pool.
    """
    if n_nodes < 50:
        raise ValueError(f"make_csbm_shift needs n_nodes >= 50, got {n_nodes}")
    for name, v in (("homophily", homophily), ("shift", shift)):
        if not 0 <= v <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    if not 0 < minority < 0.5:
        raise ValueError(f"minority must be in (0, 0.5), got {minority}")
    if kappa <= 0 or avg_degree <= 0 or signal < 0 or spurious < 0:
        raise ValueError("kappa, avg_degree must be > 0; signal, spurious >= 0")
    rng = np.random.default_rng(seed)
    n, c = n_nodes, 2
    y = rng.integers(0, c, size=n)
    perm = rng.permutation(n)
    n_pool, n_val = math.floor(0.6 * n), math.floor(0.2 * n)
    region = np.empty(n, dtype=np.int64)  # 0 majority, 1 minority, 2 OOD-val, 3 OOD-test
    pool = perm[:n_pool]
    n_min = max(1, round(minority * n_pool))
    region[pool] = 0
    region[pool[:n_min]] = 1
    region[perm[n_pool : n_pool + n_val]] = 2
    region[perm[n_pool + n_val :]] = 3
    flip = np.where(region == 1, True, False)
    ood = region >= 2
    flip[ood] = rng.random(int(ood.sum())) < shift
    colour = np.where(flip, 1 - y, y)
    means = rng.standard_normal((c, inv_dim))
    means *= signal / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
    x_inv = means[y] + rng.standard_normal((n, inv_dim))
    x_sp = spurious * np.eye(c)[colour] + env_noise * rng.standard_normal((n, c))
    x = np.concatenate([x_inv, x_sp], axis=1)
    block = region.copy() if clustered else np.where(region == 1, 0, region)
    block = np.unique(block, return_inverse=True)[1]
    edge_index = _sbm_edges(rng, y, block, np.ones(n), c, homophily, kappa, avg_degree)
    Data = _data_cls()
    data = Data(
        x=torch.tensor(x, dtype=torch.float32),
        edge_index=edge_index,
        y=torch.tensor(y, dtype=torch.long),
    )
    data.minority = torch.tensor(region == 1)
    data.colour = torch.tensor(colour)
    data.name = "csbm-shift-" + ("clustered" if clustered else "scattered")
    pool_perm = rng.permutation(pool)
    _set_split_masks(
        data,
        n,
        pool_perm,
        math.floor(id_ratio * n),
        np.flatnonzero(region == 2),
        np.flatnonzero(region == 3),
    )
    env = np.full(n, -1, dtype=np.int64)
    env[pool] = region[pool]
    data.env_id = torch.tensor(env)
    data.domain_id = torch.tensor(region)
    return data


def _sbm_edges(
    rng: np.random.Generator,
    y: np.ndarray,
    env: np.ndarray,
    theta: np.ndarray,
    c: int,
    h: float,
    kappa: float,
    avg_degree: float,
) -> Tensor:
    n = y.size
    n_env = int(env.max()) + 1
    block = y * n_env + env
    n_blocks = c * n_env
    members = [np.flatnonzero(block == b) for b in range(n_blocks)]
    mass = np.array([theta[m].sum() for m in members])
    b_cls = np.arange(n_blocks) // n_env
    b_env = np.arange(n_blocks) % n_env
    same_c = b_cls[:, None] == b_cls[None, :]
    aff = np.where(same_c, h * c, (1 - h) * c / (c - 1)) * np.where(
        b_env[:, None] == b_env[None, :], kappa, 1.0
    )
    raw = mass[:, None] * mass[None, :] * aff
    iu = np.triu_indices(n_blocks)
    weights = raw[iu] * np.where(iu[0] == iu[1], 0.5, 1.0)
    expected = weights / weights.sum() * (n * avg_degree / 2)
    counts = rng.poisson(expected)
    src, dst = [], []
    for (a, b), k in zip(zip(*iu), counts):
        if k == 0 or members[a].size == 0 or members[b].size == 0:
            continue
        pa = theta[members[a]] / mass[a]
        pb = theta[members[b]] / mass[b]
        src.append(rng.choice(members[a], size=k, p=pa))
        dst.append(rng.choice(members[b], size=k, p=pb))
    if not src:
        return torch.zeros(2, 0, dtype=torch.long)
    s, d = np.concatenate(src), np.concatenate(dst)
    keep = s != d
    s, d = s[keep], d[keep]
    ei = torch.tensor(np.stack([np.concatenate([s, d]), np.concatenate([d, s])]), dtype=torch.long)
    key = torch.unique(ei[0] * n + ei[1])
    return torch.stack([key // n, key % n])


def _set_split_masks(
    data: Any, n: int, pool: np.ndarray, n_id: int, ood_val: np.ndarray, ood_test: np.ndarray
) -> None:
    """The five node masks of a generated graph: the permuted training ``pool`` gives train, then
    ``n_id`` ID-val and ``n_id`` ID-test nodes (its last ``2 n_id``); the OOD masks as given."""
    cut = len(pool) - 2 * n_id

    def mask(idx: np.ndarray) -> Tensor:
        m = torch.zeros(n, dtype=torch.bool)
        m[torch.as_tensor(idx, dtype=torch.long)] = True
        return m

    data.train_mask = mask(pool[:cut])
    data.id_val_mask = mask(pool[cut : cut + n_id])
    data.id_test_mask = mask(pool[cut + n_id :])
    data.ood_val_mask = mask(ood_val)
    data.ood_test_mask = mask(ood_test)
