"""Reliability diagrams (PNG): per-bin accuracy against confidence with the diagonal, the gap shaded,
and a count histogram below (needs matplotlib: ``pip install 'cft-calibration[plot]'``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .metrics import classwise_ece, conf_ece

__all__ = ["plot_classwise_reliability", "plot_reliability"]


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'cft-calibration[plot]'") from exc
    return plt


def _panel(ax: Any, ax_hist: Any, rows: list[dict[str, float]], n_bins: int, title: str) -> None:
    width = 1.0 / n_bins
    centres = [(r["bin"] + 0.5) * width for r in rows]
    acc = [r["accuracy"] if r["count"] else 0.0 for r in rows]
    conf = [r["confidence"] if r["count"] else 0.0 for r in rows]
    ax.bar(centres, acc, width=width, edgecolor="black", color="#4c72b0", label="accuracy")
    labelled = False
    for c, a, f, r in zip(centres, acc, conf, rows):
        if r["count"]:
            ax.bar(
                c, f - a, bottom=a, width=width, color="#dd8452", alpha=0.45, hatch="//",
                edgecolor="#dd8452", label=None if labelled else "gap",
            )  # fmt: skip
            labelled = True
    ax.plot([0, 1], [0, 1], "k--", lw=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=7)
    ax_hist.bar(centres, [r["count"] for r in rows], width=width, color="grey", edgecolor="black")
    ax_hist.set_xlim(0, 1)
    ax_hist.set_xlabel("confidence")
    ax_hist.set_ylabel("count")


def plot_reliability(
    results: Mapping[str, tuple[Any, Any, Any]] | tuple[Any, Any, Any],
    path: str | Path,
    n_bins: int = 10,
    title: str | None = None,
) -> Path:
    """Write a reliability diagram to ``path``: one panel per entry of ``results``
    (``{name: (probs, labels, mask)}``, or a single ``(probs, labels, mask)``)."""
    plt = _plt()
    panels = results if isinstance(results, Mapping) else {title or "model": results}
    n = len(panels)
    fig, axes = plt.subplots(
        2, n, figsize=(3.2 * n, 4.2), squeeze=False, gridspec_kw={"height_ratios": [3, 1]}
    )
    for j, (name, (probs, labels, mask)) in enumerate(panels.items()):
        ece, rows = conf_ece(probs, labels, n_bins, mask=mask, return_table=True)
        _panel(axes[0][j], axes[1][j], rows, n_bins, f"{name}\nconf-ECE {ece:.3f}")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_classwise_reliability(
    probs: Any, labels: Any, path: str | Path, mask: Any = None, n_bins: int = 10
) -> Path:
    """Per-class (option position) reliability diagrams, the pieces of cw-ECE."""
    plt = _plt()
    value, tables = classwise_ece(probs, labels, n_bins, mask=mask, return_table=True)
    n = len(tables)
    fig, axes = plt.subplots(
        2, n, figsize=(3.0 * n, 4.0), squeeze=False, gridspec_kw={"height_ratios": [3, 1]}
    )
    for j, t in enumerate(tables):
        _panel(
            axes[0][j], axes[1][j], t["bins"], n_bins, f"option {t['class']}: ECE {t['ece']:.3f}"
        )
    fig.suptitle(f"class-wise ECE {value:.3f}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
