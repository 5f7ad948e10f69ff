"""The package's jobs as Python calls: :func:`run_demo`, :func:`run_train`, :func:`run_export`.

Each takes its config (:mod:`parq_optim.config`) and returns a result object; none parses arguments,
prints or exits, so a script or notebook gets exactly what the command line gets::

    from parq_optim.config import TrainRunConfig
    from parq_optim.experiments import run_train

    run = run_train(TrainRunConfig(data="synthetic", bits=1, epochs=3), out="runs/t")
    run.record["test_acc"], run.checkpoint

Bad input (a data folder that does not load, a checkpoint from elsewhere, a bit width the quantizer
cannot do) raises :class:`~parq_optim.config.ConfigError` naming the config field; the CLI reports it
as the flag. A run that diverges (non-finite loss or weights) writes no checkpoint: its result says
so in ``diverged``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import pickle
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._contract import ConfigError, mean_std
from .config import DemoConfig, ExportConfig, TrainRunConfig
from .data import Split, load_digits, load_folder, make_synthetic
from .train import Diverged, TrainConfig, save_checkpoint, train

__all__ = [
    "DATA_TEXT",
    "DemoResult",
    "ExportResult",
    "TrainRun",
    "resolve_data",
    "run_demo",
    "run_export",
    "run_train",
]

Progress = Callable[[int], object] | None
DATA_TEXT = {
    "synthetic": "synthetic (embedded Gaussian mixture of 8x8 images, 10 classes, "
    "2,000 train / 1,000 test; no download)",
    "digits": "digits (scikit-learn's 8x8 handwritten digits, 1,437 train / 360 test)",
}
DEMO_METHODS = ("fp", "ste", "binaryrelax", "parq")
# TrainConfig / LMConfig fields whose TrainRunConfig field has another name
FIELD_OF = {"method": "prox", "d_model": "hidden", "n_layers": "layers", "n_heads": "heads"}
_NAMED = {"mnist": ("mnist", "raw"), "tinyshakespeare": ("tinyshakespeare", "input.txt")}
_INPUT_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    UnicodeDecodeError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
)


@dataclass
class DemoResult:
    """What :func:`run_demo` measured: per bit width and method, the test accuracy of each seed."""

    data: str
    data_description: str
    seeds: list[int]
    n_seeds: int
    epochs: int
    std: str
    rows: list[dict[str, Any]]
    diverged: list[str]
    plot: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        """The results-file fields."""
        return {k: v for k, v in asdict(self).items() if k != "plot"}


@dataclass
class TrainRun:
    """What :func:`run_train` produced: the results-file ``record`` (metrics, history, the training
    config), the files it wrote, and the trained model and optimizer (None when it diverged)."""

    record: dict[str, Any]
    diverged: str | None = None
    checkpoint: Path | None = None
    plot: Path | None = None
    model: torch.nn.Module | None = field(default=None, repr=False)
    optimizer: torch.optim.Optimizer | None = field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return self.record


@dataclass
class ExportResult:
    """What :func:`run_export` wrote: the packed file and its report (bits/weight, sizes, error)."""

    record: dict[str, Any]
    file: Path

    def as_dict(self) -> dict[str, Any]:
        return self.record


# ------------------------------------------------------------------------------------------ helpers


@contextmanager
def blame(name: str, *extra: type[BaseException]) -> Iterator[None]:
    """Input errors raised inside the block (a bad file, a missing field) become a
    :class:`ConfigError` naming the config field ``name``."""
    errors: tuple[type[BaseException], ...] = (*_INPUT_ERRORS, *extra)
    try:
        yield
    except ConfigError:
        raise
    except errors as exc:
        if isinstance(exc, OSError) and exc.strerror:
            text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        elif isinstance(exc, EOFError):
            text = "the file is truncated or empty"
        else:
            text = (str(exc).strip() or type(exc).__name__)[:400].splitlines()[0]
        raise ConfigError(name, text) from exc


def resolve_data(name: str | Path, field_name: str = "data") -> str | Path:
    """A data name or path as the loaders take it: ``mnist`` and ``tinyshakespeare`` are read from
    the shared data folder ``$ICML25_DATA`` (:class:`ConfigError` when it is unset or lacks them)."""
    if str(name) not in _NAMED:
        return name
    parts = _NAMED[str(name)]
    root = os.environ.get("ICML25_DATA")
    path = Path(root).joinpath(*parts) if root else None
    if path is None or not path.exists():
        where = f"{path} does not exist" if path else "ICML25_DATA is not set"
        raise ConfigError(
            field_name,
            f"{name} is read from $ICML25_DATA/{'/'.join(parts)} and {where}; set ICML25_DATA to "
            "the shared data folder or give the path itself",
        )
    return path


def _load(
    spec: str | Path, seed: int, max_train: int | None = None, max_test: int | None = None
) -> Split:
    if spec == "synthetic":
        return make_synthetic(seed=seed)
    if spec == "digits":
        if importlib.util.find_spec("sklearn") is None:
            raise ConfigError("data", "digits needs scikit-learn: pip install 'parq-optim[data]'")
        with blame("data"):
            return load_digits(seed=seed)
    with blame("data"):
        return load_folder(spec, max_train=max_train, max_test=max_test, seed=seed)


def _checked(
    check: Callable[..., None], *values: Any, rename: dict[str, str] | None = None
) -> None:
    """Run a TrainConfig / LMConfig check; its error becomes a :class:`ConfigError` naming the
    field of the job's config."""
    from .lm import LMConfigError
    from .train import ConfigError as RunError

    try:
        check(*values)
    except (RunError, LMConfigError) as exc:
        name = (rename or {}).get(exc.field, FIELD_OF.get(exc.field, exc.field))
        raise ConfigError(name, str(exc)) from exc


def bits_label(method: str, bits: int) -> str:
    return "fp" if method == "fp" else ("ternary" if bits == 0 else str(bits))


def _setup(seed: int, device: str) -> None:
    torch.manual_seed(seed)
    if device == "cpu":
        torch.set_num_threads(1)  # small models: threads only add contention (and noise)


# --------------------------------------------------------------------------------------------- demo


def run_demo(
    cfg: DemoConfig, out: str | os.PathLike | None = None, progress: Progress = None
) -> DemoResult:
    """Full precision, STE, BinaryRelax and PARQ at 1 bit and ternary over ``cfg``'s seeds; writes
    ``demo.png`` in ``out`` (when given and matplotlib is installed)."""
    _setup(cfg.seed, cfg.device)
    seeds, epochs = cfg.seed_list, cfg.n_epochs
    runs = [(b, m) for b in (1, 0) for m in DEMO_METHODS if not (m == "fp" and b == 0)]
    fields = {k: getattr(cfg, k) for k in TrainConfig.__dataclass_fields__ if hasattr(cfg, k)}
    fields["lr"] = cfg.lr if cfg.lr is not None else {"sgd": 0.1, "adamw": 1e-3}[cfg.optimizer]
    configs = {}
    for b, m in runs:
        for s in seeds:
            c = TrainConfig(**{**fields, "method": m, "bits": b, "seed": s, "epochs": epochs})
            rename = {"bits": "quantizer"}
            try:
                _checked(c.validate, rename=rename)
            except ConfigError as exc:
                if exc.field != "quantizer":
                    raise
                raise ConfigError("quantizer", f"the demo runs 1 bit and ternary; {exc}") from exc
            configs[b, m, s] = c
    datasets = {s: _load(cfg.data, s) for s in seeds}
    for (_, _, s), c in configs.items():
        _checked(c.check_data, datasets[s])
    rows: list[dict[str, Any]] = []
    diverged = []
    for b, m in runs:
        accs: list[float] = []
        for s in seeds:
            try:
                accs.append(train(configs[b, m, s], datasets[s], quiet=True)["test_acc"])
            except Diverged as e:
                accs.append(math.nan)
                diverged.append(f"{m} {bits_label(m, b)} seed {s}: {e}")
            if progress is not None:
                progress(1)
        mean, std = mean_std(accs)
        rows.append(
            {"bits": bits_label(m, b), "method": m, "test_acc": accs, "mean": mean, "std": std}
        )
    result = DemoResult(
        data=cfg.data,
        data_description=DATA_TEXT[cfg.data],
        seeds=seeds,
        n_seeds=len(seeds),
        epochs=epochs,
        std="sample standard deviation (ddof=1) over the seeds; null for one seed",
        rows=rows,
        diverged=diverged,
    )
    if out is not None:
        result.plot = _plot_demo(Path(out), rows)
    return result


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _plot_demo(out: Path, rows: list[dict[str, Any]]) -> Path | None:
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 3))
    means = [r["mean"] for r in rows]
    ax.bar(range(len(rows)), means, yerr=[r["std"] or 0.0 for r in rows], capsize=3)
    ax.set_xticks(range(len(rows)), [f"{r['method']}\n{r['bits']}" for r in rows], fontsize=7)
    ax.set_ylabel("test accuracy (%)")
    finite = [m for m in means if math.isfinite(m)]
    ax.set_ylim(max(0, min(finite, default=0) - 10), 100)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "demo.png", dpi=80)
    plt.close(fig)
    return out / "demo.png"


def _plot_curve(
    out: Path,
    train_pts: list[tuple[float, float]],
    val: list[tuple[float, float]],
    *,
    xlabel: str,
    title: str,
    baseline: float | None = None,
) -> Path | None:
    """``loss_curve.png``: training (and validation) loss; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(*zip(*train_pts), label="train loss", marker="." if len(train_pts) < 30 else None)
    if val:
        ax.plot(*zip(*val), label="validation loss (subset)")
    if baseline is not None:
        ax.axhline(baseline, color="grey", ls="--", lw=1, label="unigram (trivial)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "loss_curve.png", dpi=80)
    plt.close(fig)
    return out / "loss_curve.png"


# -------------------------------------------------------------------------------------------- train


def run_train(
    cfg: TrainRunConfig, out: str | os.PathLike | None = None, progress: Progress = None
) -> TrainRun:
    """Train one model as ``parq-optim train`` does; with ``out``, write ``checkpoint.pt`` (never
    for a diverged run) and ``loss_curve.png`` there. ``progress(n)`` is called per epoch (per
    optimizer step for charlm)."""
    _setup(cfg.seed, cfg.device)
    v = cfg.resolved()
    if cfg.model == "charlm":
        return _train_charlm(cfg, v, out, progress)
    tc = TrainConfig(
        method=v["prox"],
        bits=v["bits"],
        quantizer=v["quantizer"],
        model=v["model"],
        hidden=v["hidden"],
        epochs=v["epochs"],
        batch_size=v["batch_size"],
        optimizer=v["optimizer"],
        lr=v["lr"],
        weight_decay=v["weight_decay"],
        warmup_steps=v["warmup_steps"],
        quant_period=v["quant_period"],
        per_channel=v["per_channel"],
        block_size=v["block_size"],
        steepness=v["steepness"],
        anneal_end_frac=v["anneal_end_frac"],
        seed=v["seed"],
        device=v["device"],
    )
    _checked(tc.validate)
    data = _load(resolve_data(cfg.data), cfg.seed, cfg.max_train, cfg.max_test)
    _checked(tc.check_data, data)
    summary = {
        "data": data.name,
        "n_train": len(data.y_train),
        "n_test": len(data.y_test),
        "n_features": data.n_features,
        "n_classes": data.n_classes,
        "method": tc.method,
        "bits": tc.bits,
        "train_config": asdict(tc),
    }
    try:
        r = train(tc, data, quiet=True, progress=progress)
    except Diverged as e:
        return TrainRun(
            {**summary, "diverged": str(e), "history": e.history, "checkpoint": None},
            diverged=str(e),
        )
    run = TrainRun({}, model=r["model"], optimizer=r["optimizer"])
    if out is not None:
        run.checkpoint = save_checkpoint(
            Path(out) / "checkpoint.pt", tc, data, r["model"], r["optimizer"]
        )
        title = f"{data.name}: {tc.model}, {tc.method}, {bits_label(tc.method, tc.bits)} bits"
        run.plot = _plot_curve(
            Path(out),
            [(h["epoch"], h["loss"]) for h in r["history"]],
            [],
            xlabel="epoch",
            title=title,
        )
    keep = ("test_acc", "train_acc", "quantized_fraction_end", "layers")
    run.record = {
        **summary,
        **{k: r[k] for k in keep if k in r},
        "train_time_s": r["wall_time_s"],
        "diverged": None,
        "checkpoint": run.checkpoint.name if run.checkpoint else None,
        "history": r["history"],
    }
    return run


def _train_charlm(
    cfg: TrainRunConfig, v: dict[str, Any], out: str | os.PathLike | None, progress: Progress
) -> TrainRun:
    from .lm import LMConfig, save_lm_checkpoint, train_lm
    from .text import load_text, unigram_loss

    lc = LMConfig(
        method=v["prox"],
        bits=v["bits"],
        quantizer=v["quantizer"],
        per_channel=v["per_channel"],
        block_size=v["block_size"],
        optimizer=v["optimizer"],
        d_model=v["hidden"],
        n_layers=v["layers"],
        n_heads=v["heads"],
        context=v["context"],
        batch_size=v["batch_size"],
        steps=v["steps"],
        lr=v["lr"],
        weight_decay=v["weight_decay"],
        warmup_steps=v["warmup_steps"],
        quant_period=v["quant_period"],
        steepness=v["steepness"],
        anneal_end_frac=v["anneal_end_frac"],
        eval_every=max(1, v["steps"] // 20),
        seed=v["seed"],
        device=v["device"],
    )
    _checked(lc.validate)
    with blame("data"):
        corpus = load_text(resolve_data(cfg.data))
    _checked(lc.check_corpus, corpus)
    unigram = {"val_loss": unigram_loss(corpus, "val"), "test_loss": unigram_loss(corpus, "test")}
    summary = {
        "data": corpus.name,
        "model": "charlm",
        "n_chars": {k: len(corpus.split(k)) for k in ("train", "val", "test")},
        "vocab_size": corpus.vocab_size,
        "method": lc.method,
        "bits": lc.bits,
        "unigram": unigram,
        "train_config": asdict(lc),
    }
    try:
        r = train_lm(lc, corpus, quiet=True, progress=progress)
    except Diverged as e:
        return TrainRun({**summary, "diverged": str(e), "history": e.history}, diverged=str(e))
    run = TrainRun({}, model=r["model"], optimizer=r["optimizer"])
    if out is not None:
        run.checkpoint = save_lm_checkpoint(
            Path(out) / "checkpoint.pt", lc, corpus, r["model"], r["optimizer"]
        )
        run.plot = _plot_curve(
            Path(out),
            [(h["step"], h["train_loss"]) for h in r["history"]],
            [(h["step"], h["val_loss_subset"]) for h in r["history"]],
            xlabel="optimizer step",
            title=f"{corpus.name}: charlm, {lc.method}, {bits_label(lc.method, lc.bits)} bits",
            baseline=unigram["val_loss"],
        )
    keep = ("val_loss", "test_loss", "quantized_fraction_end", "storage")
    run.record = {
        **summary,
        **{k: r[k] for k in keep if k in r},
        "step_time_median_s": r["step_time_median_s"],
        "opt_step_time_median_s": r["opt_step_time_median_s"],
        "train_time_s": r["wall_time_s"],
        "diverged": None,
        "checkpoint": run.checkpoint.name if run.checkpoint else None,
        "history": r["history"],
    }
    return run


# ------------------------------------------------------------------------------------------- export


def load_any_checkpoint(
    path: str | os.PathLike,
) -> tuple[Any, torch.nn.Module, torch.optim.Optimizer, Any]:
    """A checkpoint of ``train`` (MLP/CNN or charlm): config, model, optimizer and a function that
    builds a fresh model of the same shape."""
    from .lm import LM_CHECKPOINT_FORMAT, build_lm, load_lm_checkpoint
    from .train import build, load_checkpoint

    blob = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(blob, dict) and blob.get("format") == LM_CHECKPOINT_FORMAT:
        lm_cfg, vocab, lm_model, lm_opt = load_lm_checkpoint(path)
        return lm_cfg, lm_model, lm_opt, lambda: build_lm(lm_cfg, len(vocab))[0]
    cfg, stub, model, opt = load_checkpoint(path)
    return cfg, model, opt, lambda: build(cfg, stub, 1)[0]


def run_export(cfg: ExportConfig, out: str | os.PathLike) -> ExportResult:
    """Write ``model.parq.pt`` (level tables + bit-packed codes) for ``cfg.checkpoint`` in ``out``
    and check that it loads back to the trained weights exactly."""
    from .export import load_quantized, save_quantized
    from .optim import QuantOptimizer

    _setup(cfg.seed, "cpu")
    with blame("checkpoint", RuntimeError):
        trained, model, opt, rebuild = load_any_checkpoint(cfg.checkpoint)
    if not isinstance(opt, QuantOptimizer):
        raise ConfigError(
            "checkpoint",
            f"{Path(cfg.checkpoint).name} was trained in full precision (--prox fp); there is "
            "nothing to quantize: train with --prox parq, ste or binaryrelax",
        )
    path = Path(out) / "model.parq.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    report = save_quantized(model, opt, path)
    rebuilt = rebuild()
    load_quantized(path, rebuilt)
    report["file"] = path.name
    report["roundtrip_max_abs_diff"] = max(
        (a - b).abs().max().item()
        for a, b in zip(model.state_dict().values(), rebuilt.state_dict().values())
    )
    report["compression_vs_fp32"] = report["fp32_bytes"] / report["file_bytes"]
    record = {
        "checkpoint": cfg.checkpoint,
        "trained": {
            "method": trained.method,
            "bits": trained.bits,
            "quantizer": trained.quantizer,
            "model": getattr(trained, "model", "charlm"),
        },
        **report,
    }
    return ExportResult(record, path)
