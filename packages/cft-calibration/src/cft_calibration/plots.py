"""Reliability diagrams (PNG): per-bin accuracy and mean-confidence bars side by side with the
diagonal, and a count histogram below (needs matplotlib: ``pip install 'cft-calibration[plot]'``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .metrics import classwise_ece, conf_ece

__all__ = ["plot_classwise_reliability", "plot_reliability", "reliability_figure"]


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'cft-calibration[plot]'") from exc
    return plt


def _panel(ax: Any, ax_hist: Any, rows: list[dict[str, float]], n_bins: int, title: str) -> None:
    """Two bars per non-empty bin, side by side and each as labelled: the bin's accuracy (left half)
    and its mean confidence (right half); the diagonal marks perfect calibration. Empty bins get no
    bars (their accuracy is undefined)."""
    width = 1.0 / n_bins
    full = [r for r in rows if r["count"]]
    left = [(r["bin"] + 0.25) * width for r in full]
    right = [(r["bin"] + 0.75) * width for r in full]
    ax.bar(
        left, [r["accuracy"] for r in full], width=width / 2, color="#4c72b0", edgecolor="black",
        lw=0.5, label="accuracy",
    )  # fmt: skip
    ax.bar(
        right, [r["confidence"] for r in full], width=width / 2, color="#dd8452",
        edgecolor="black", lw=0.5, label="mean confidence",
    )  # fmt: skip
    ax.plot([0, 1], [0, 1], "k--", lw=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy / confidence")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=7)
    centres = [(r["bin"] + 0.5) * width for r in rows]
    ax_hist.bar(
        centres, [r["count"] for r in rows], width=width, color="grey", edgecolor="black",
        label="count",
    )  # fmt: skip
    ax_hist.set_xlim(0, 1)
    ax_hist.set_xlabel("confidence bin")
    ax_hist.set_ylabel("count")


def reliability_figure(
    results: Mapping[str, tuple[Any, Any, Any]] | tuple[Any, Any, Any],
    n_bins: int = 10,
    title: str | None = None,
) -> Any:
    """The reliability diagram as a matplotlib figure (caller closes it): one column per entry of
    ``results`` (``{name: (probs, labels, mask)}`` or one ``(probs, labels, mask)``), bars of per-bin
    accuracy and mean confidence (:func:`~cft_calibration.metrics.reliability_table`) above a count
    histogram."""
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
    return fig


def plot_reliability(
    results: Mapping[str, tuple[Any, Any, Any]] | tuple[Any, Any, Any],
    path: str | Path,
    n_bins: int = 10,
    title: str | None = None,
) -> Path:
    """Write a reliability diagram (:func:`reliability_figure`) to ``path``."""
    plt = _plt()
    fig = reliability_figure(results, n_bins, title)
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
