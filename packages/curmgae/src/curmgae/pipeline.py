"""Shared pretrain/evaluate pipeline used by the CLI, the demo and the benchmarks."""

from __future__ import annotations

import os
import pickle
import sys
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data

from .baselines import GAEBaseline
from .config import METHODS, PROTOCOLS, CurMGAEConfig
from .data import check_finite
from .evaluation import linear_probe, random_node_split, svm_cv
from .method import CurMGAE, FitHistory


def make_config(method: str, **overrides: Any) -> CurMGAEConfig:
    """Config of ``method`` (a key of ``METHODS``) with user ``overrides`` applied last."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not accepted; choose one of {', '.join(METHODS)}")
    return CurMGAEConfig(**{**METHODS[method], **overrides})


def build_model(method: str, in_channels: int, config: CurMGAEConfig) -> CurMGAE:
    if method == "gae":
        return GAEBaseline(in_channels, config)
    return CurMGAE.from_config(in_channels, config)


def pretrain(
    method: str, data: Data, config: CurMGAEConfig, seed: int = 0, progress: bool = False
) -> tuple[CurMGAE, FitHistory]:
    """Build and fit ``method`` on the split ``data`` (from :func:`curmgae.split_edges`)."""
    model = build_model(method, data.num_features, config)
    return model, model.fit(data, seed=seed, progress=progress)


def node_masks(data: Data, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Public split when the dataset has one, else a seeded 10/10/80 split."""
    if getattr(data, "train_mask", None) is not None:
        return data.train_mask, data.val_mask, data.test_mask
    return random_node_split(data.num_nodes, seed)  # type: ignore[return-value]


def evaluate(
    model: CurMGAE,
    data: Data,
    tasks: tuple[str, ...] = ("link", "node"),
    protocols: tuple[str, ...] = PROTOCOLS,
    features: str = "concat",
    seed: int = 0,
    probe_epochs: int = 100,
) -> dict[str, float]:
    """Link prediction on ``test_pos``/``test_neg`` and node classification (named protocols; the
    linear probe trains for ``probe_epochs``)."""
    out: dict[str, float] = {}
    if "link" in tasks:
        lp = model.link_prediction(data, "test")
        out["lp_auc"], out["lp_ap"] = lp["auc"], lp["ap"]
    if "node" in tasks:
        if getattr(data, "y", None) is None:
            raise ValueError("task 'node' needs node labels data.y")
        last, concat = model.embed(data)
        emb = concat if features == "concat" else last
        if "svm" in protocols:
            out["nc_svm_acc"] = svm_cv(emb, data.y)["acc"]
        if "linear_probe" in protocols:
            tr, va, te = node_masks(data, seed)
            out["nc_probe_acc"] = linear_probe(
                emb, data.y, tr, va, te, seed=seed, epochs=probe_epochs
            )["acc"]
    return out


#: Fields of a checkpoint written by :func:`save_checkpoint` (``curmgae pretrain``'s ``model.pt``).
CHECKPOINT_FIELDS = (
    "state_dict",
    "config",
    "method",
    "dataset",
    "root",
    "split_seed",
    "quick",
    "seed",
    "in_channels",
)


def save_checkpoint(path: Path, model: CurMGAE, **meta: Any) -> Path:
    """Write ``model``'s weights with ``meta`` (the other :data:`CHECKPOINT_FIELDS`) to ``path``.

    Only tensors, strings, numbers and dicts are stored, so :func:`load_checkpoint` reads it with
    ``torch.load(weights_only=True)``. Written to a temporary file first, then renamed."""
    missing = [k for k in CHECKPOINT_FIELDS if k not in meta and k != "state_dict"]
    if missing:
        raise ValueError(f"save_checkpoint: missing fields {missing}")
    meta = {k: (str(v) if isinstance(v, Path) else v) for k, v in meta.items()}
    if isinstance(meta.get("config"), CurMGAEConfig):
        meta["config"] = meta["config"].to_dict()
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"format": "curmgae-checkpoint-1", "state_dict": model.state_dict(), **meta}, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read and check a checkpoint written by :func:`save_checkpoint`.

    Raises ``FileNotFoundError`` when it is absent and ``ValueError`` naming the file when it is empty,
    truncated, not a curmgae checkpoint, lacks a field or holds non-finite weights."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"checkpoint {path} not found; run 'curmgae pretrain' first (it writes model.pt)"
        )
    if path.stat().st_size == 0:
        raise ValueError(f"checkpoint {path} is empty; expected a model.pt from 'curmgae pretrain'")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (EOFError, RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile, OSError) as exc:
        raise ValueError(
            f"checkpoint {path} is truncated or not written by 'curmgae pretrain' "
            f"({type(exc).__name__})"
        ) from exc
    if not isinstance(ckpt, dict):
        raise ValueError(
            f"checkpoint {path} holds a {type(ckpt).__name__}, not a curmgae checkpoint"
        )
    missing = [k for k in CHECKPOINT_FIELDS if k not in ckpt]
    if missing:
        raise ValueError(
            f"checkpoint {path} lacks the field(s) {', '.join(missing)}; "
            "expected a model.pt from 'curmgae pretrain'"
        )
    state = ckpt["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"checkpoint {path}: state_dict must map names to tensors")
    for name, value in state.items():
        check_finite(value, f"checkpoint {path}: weight {name!r}")
    try:
        ckpt["config"] = CurMGAEConfig.from_dict(ckpt["config"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"checkpoint {path}: bad config ({exc})") from exc
    if ckpt["method"] not in METHODS:
        raise ValueError(f"checkpoint {path}: unknown method {ckpt['method']!r}")
    return ckpt


def plot_curriculum(trace: list[dict[str, Any]], path: Path) -> bool:
    """Diagnostic plot of one run's curriculum, per S-update: the masked fraction (with the cap and,
    under the ``quantile`` pace, the target rho_t), lambda, the residual quantiles with lambda on the
    same axis, the mean difficulty of the masked edges (planted labels when the graph has them, else
    residuals), and the easy/medium/hard shares of the difficulty-chosen edges (the paper's Figure 2)
    when planted labels exist. Returns False (and writes nothing) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: install curmgae[cli] (matplotlib) for the curriculum plot", file=sys.stderr)
        return False
    if not trace:
        return False
    ep = [e["epoch"] for e in trace]
    M = trace[0].get("num_edges")  # absent in traces written before 0.3.0
    fig, axes = plt.subplots(2, 3, figsize=(12, 6))
    ax = axes.ravel()
    if M is not None:
        ax[0].plot(ep, [e["masked_fraction"] for e in trace], label="masked")
        ax[0].plot(ep, [e["K_t"] / M for e in trace], ":", label="K_t / M")
        ax[0].plot(ep, [e["cap"] / M for e in trace], "--", label="cap")
        if trace[0].get("rho") is not None:
            ax[0].plot(ep, [e["rho"] for e in trace], "-.", label="target rho_t")
    ax[0].set_title("masked fraction")
    ax[0].legend(fontsize=7)
    ax[1].plot(ep, [e["lambda"] for e in trace])
    ax[1].set_title("lambda")
    qkeys = [k for k in trace[0] if k.startswith("residual_q")]
    for k in qkeys:
        ax[2].plot(ep, [e[k] for e in trace], label=k.replace("residual_", ""))
    ax[2].plot(ep, [e["lambda"] for e in trace], "k--", label="lambda")
    ax[2].set_title("residual quantiles vs lambda")
    ax[2].legend(fontsize=7)
    if trace[0].get("mean_difficulty_masked") is not None:
        ax[3].plot(ep, [e["mean_difficulty_masked"] for e in trace], label="all masked")
        ax[3].plot(
            ep,
            [e.get("mean_difficulty_difficulty") for e in trace],
            label="difficulty-chosen",
        )
        ax[3].set_title("mean planted difficulty of masked edges\n(0 easy, 1 medium, 2 hard)")
    else:
        ax[3].plot(ep, [e.get("mean_residual_masked") for e in trace], label="all masked")
        ax[3].plot(
            ep, [e.get("mean_residual_difficulty") for e in trace], label="difficulty-chosen"
        )
        ax[3].plot(ep, [e["mean_residual"] for e in trace], "--", label="all edges")
        ax[3].set_title("mean residual (difficulty) of masked edges")
    ax[3].legend(fontsize=7)
    if trace[0].get("share_easy") is not None:
        for name in ("easy", "medium", "hard"):
            ax[4].plot(ep, [e.get(f"share_{name}") or 0.0 for e in trace], label=name)
        ax[4].set_title("difficulty-chosen edges: shares")
        ax[4].legend(fontsize=7)
    else:
        ax[4].axis("off")
    ax[5].plot(ep, [e["K_t"] for e in trace], label="K_t")
    ax[5].plot(ep, [e["cap"] for e in trace], "--", label="cap")
    ax[5].set_title("curriculum size")
    ax[5].legend(fontsize=7)
    for a in ax:
        a.set_xlabel("epoch")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True
