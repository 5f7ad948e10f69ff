"""Configurations of the ``bpr-topk`` jobs (``train``, ``rank``, ``evaluate``, ``demo``, ``baseline``,
``toy``).

Each field carries its default, a one-line doc and the values it accepts; :func:`check_config` checks
them when the config is built (a :class:`ConfigError` names the field), and the command line makes one
flag per field from the same declaration (``--K`` for ``K``, ``--nll-weight`` for ``nll_weight``).
Standard library only: building the CLI does not import torch. The jobs themselves are
:mod:`bpr_topk.runs` (``run_train(TrainRunConfig(...), out)`` and so on).

>>> from bpr_topk.config import TrainRunConfig
>>> from bpr_topk.runs import run_train
>>> result = run_train(TrainRunConfig(dataset="hotspots", objective="nll", epochs=50))  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ._contract import REQUIRED, ConfigError, check_config, param

__all__ = [
    "DATASETS",
    "BaselineConfig",
    "ConfigError",
    "DataConfig",
    "DemoConfig",
    "EvaluateConfig",
    "RankConfig",
    "ToyConfig",
    "TrainRunConfig",
    "named_data_path",
]

# Generated panels, and the Cook County folder read from $ICML25_DATA/bpr/cook_county.
DATASETS = ("synthetic7", "hotspots", "panel", "zeroinflated", "cook_county")
NAMED = {"cook_county": ("bpr", "cook_county")}
DEMO_DATASETS = ("hotspots", "synthetic7")
SPLIT_NAMES = ("train", "valid", "test")
HEURISTIC_NAMES = ("last", "avg", "mean", "zero")
MODEL_NAMES = ("negbin", "truncnorm")
_SEED = 2**32 - 1
_MAX = 1_000_000  # "as many as you like" for counts that only need to be positive
_BIG = 1e6  # upper bound of weights and offsets


def named_data_path(dataset: str) -> Path | None:
    """``$ICML25_DATA/bpr/cook_county`` for ``cook_county`` when that folder exists, else None."""
    root = os.environ.get("ICML25_DATA")
    if dataset not in NAMED or not root:
        return None
    path = Path(root).expanduser().joinpath(*NAMED[dataset])
    return path if path.is_dir() else None


@dataclass(kw_only=True)
class DataConfig:
    """Which data a job reads: a six-CSV folder, or a named dataset (generated, or Cook County)."""

    data: str | Path | None = param(
        None,
        "folder with {train,valid,test}_{x,y}.csv (none: use dataset)",
        path="dir",
        none="none",
    )
    dataset: str = param(
        "synthetic7",
        "data when no folder is given: synthetic7 (paper Sec. 5.1, K=5), hotspots (covariates carry "
        "the signal, K=S/20), panel (Cook-like, K=S/10), zeroinflated (about 92 percent zeros, K=S/20) or "
        "cook_county (read from $ICML25_DATA/bpr/cook_county, K=100)",
        choices=DATASETS,
    )
    target: str | None = param(
        None, "y column to use when y has several (auto: its only target column)", none="auto"
    )
    sites: int | None = param(
        None,
        "sites of dataset panel (a square >= 4), hotspots or zeroinflated (auto: 400 panel, 500 "
        "hotspots, 200 zeroinflated)",
        low=1,
        high=100_000,
        none="auto",
    )
    K: int | None = param(
        None,
        "budget K (auto: 5 synthetic7, S/10 panel, S/20 hotspots and zeroinflated, 100 folder)",
        low=1,
        high=_MAX,
        none="auto",
    )
    history_windows: tuple[int, ...] | None = param(
        None,
        "add one feature per window W: each site's mean count over the previous W steps (lag "
        "columns, else the y history); give rank/evaluate the same windows as train",
        low=1,
        high=10_000,
        none="none",
    )
    features: str = param(
        "auto",
        "history: the history forecaster's per-site features (moving averages over 1, 2, 3, 5 and "
        "10 steps, all-history mean, fraction of zeros; raw lag columns dropped); raw: the data's "
        "feature columns as given (before 0.5.0); auto: history for data with feature columns",
        choices=("auto", "history", "raw"),
    )
    seed: int = param(0, "random seed (also of the generated data)", low=0, high=_SEED)

    def check_data(self) -> None:
        """A folder for ``cook_county``: the one given, or the one under $ICML25_DATA."""
        if self.data is None and self.dataset in NAMED:
            self.data = named_data_path(self.dataset)
            if self.data is None:
                where = "/".join(NAMED[self.dataset])
                raise ConfigError(
                    "data",
                    f"dataset {self.dataset} is read from a folder: give it as data, or set "
                    f"ICML25_DATA to a folder holding {where}",
                )


def _check(cfg: DataConfig) -> None:
    check_config(cfg)
    cfg.check_data()


@dataclass(kw_only=True)
class EvalFields:
    """How a model is scored: ratio-rating trials x samples (paper: 1000 x 1000)."""

    eval_trials: int = param(10, "ratio-ranking repeats", low=1, high=100_000)
    eval_samples: int = param(1000, "forecast samples per repeat", low=1, high=_MAX)
    split: str = param("test", "split to score", choices=SPLIT_NAMES)
    window: int = param(5, "steps of the historical-average baseline", low=1, high=10_000)
    denominator_offset: float = param(
        1.0, "c in the ratio rating y/(c + 1·y); 0 is the literal Eq. 7", low=0, high=_BIG
    )


@dataclass(kw_only=True)
class TrainRunConfig(EvalFields, DataConfig):
    """``bpr-topk train``: fit one forecaster (DAML, NLL-only, BPR-only, SPO+ or PG) and score it."""

    objective: str = param(
        "daml",
        "training objective: DAML (Eq. 13), NLL-only (Eq. 8), BPR-only (Eq. 9), or the "
        "decision-focused baselines SPO+ and PG of Table C.2",
        choices=("daml", "nll", "bpr", "spo+", "pg"),
    )
    model: str = param(
        "auto",
        "forecaster: negbin (Eq. 15) or truncnorm (Eq. 14); auto: negbin when the data has features",
        choices=("auto", *MODEL_NAMES),
    )
    link: str | None = param(
        None,
        "NegBin link g (auto: exp with the history features, softplus, the official code's, with raw)",
        choices=("softplus", "exp"),
        none="auto",
    )
    eps: float = param(1.0, "DAML target BPR ε", low=0, high=1)
    lam: float = param(30.0, "DAML penalty λ", low=0, high=_BIG)
    nll_weight: float = param(1.0, "weight of the NLL", low=0, high=_BIG)
    epochs: int = param(1000, "full-batch epochs", low=1, high=_MAX)
    lr: float = param(1e-2, "Adam learning rate", low=0, low_open=True, high=10)
    M: int = param(
        100, "forecast samples per step for the score function, Eq. 10", low=1, high=100_000
    )
    J: int = param(100, "perturbation samples of the top-K, Eq. 11", low=1, high=100_000)
    sigma: float = param(
        0.01, "std of the perturbation noise on the ratings", low=0, low_open=True, high=100
    )
    noise: str = param("normal", "perturbation noise law", choices=("normal", "gumbel"))
    score: str = param(
        "joint",
        "score function: joint (Eq. 10) or per_site (official code)",
        choices=("joint", "per_site"),
    )
    baseline: str = param(
        "none",
        "control variate of the score function: none or leave-one-out",
        choices=("none", "loo"),
    )
    forward: str = param(
        "hard",
        "top-K forward value: hard mask (Alg. A.1) or smoothed (official code)",
        choices=("hard", "smoothed"),
    )
    reduction: str = param(
        "mean", "NLL scale: mean over sites or the literal sum of Eq. 13", choices=("mean", "sum")
    )
    val_freq: int = param(10, "validate every N epochs", low=1, high=_MAX)
    selection: str = param(
        "paper",
        "checkpoint rule: paper (App. C.2), code (official nll - lam*bpr), tradeoff (best valid "
        "BPR within nll_tolerance of the run's best valid NLL) or last",
        choices=("paper", "code", "tradeoff", "last"),
    )
    nll_tolerance: float = param(
        0.01, "relative valid-NLL slack of selection tradeoff", low=0, high=100
    )
    max_epochs: int | None = param(
        None,
        "while the chosen checkpoint is the last of the budget, double epochs up to this (none: "
        "the budget is epochs)",
        low=1,
        high=_MAX,
        none="none",
    )
    site_slopes: bool | None = param(
        None,
        "NegBin: learn the per-site random slopes on time (Eq. 15), or hold them at 0 (None: off "
        "with the history features, on with raw)",
        flag=False,  # the CLI's --site-slopes/--no-site-slopes, unset by default
    )
    dispersion: str = param(
        "global",
        "NegBin dispersion q: one global (Eq. 15) or one per site at the same mean (ours)",
        choices=("global", "site"),
    )
    start: str | None = param(
        None,
        "NegBin start: official (N(0,1) draws) or mean (every site at the average count) (auto: "
        "mean with the history features, official with raw)",
        choices=("official", "mean"),
        none="auto",
    )
    pg_h: float = param(
        1.0, "step h of the PG loss's backward difference (objective pg)", low=0, low_open=True,
        high=_BIG,
    )  # fmt: skip
    search: bool = param(
        False,
        "grid search over search_lr x search_sigma x search_eps, the trial chosen on the "
        "validation split only (App. C.2 rule of the objective)",
    )
    search_lr: tuple[float, ...] | None = param(
        None, "learning rates of search (auto: lr/3, lr, 3·lr)", low=0, low_open=True, high=10,
        none="auto",
    )  # fmt: skip
    search_sigma: tuple[float, ...] | None = param(
        None,
        "σ values of search (auto: σ and 5σ for daml and bpr; only σ for nll, spo+ and pg)",
        low=0,
        low_open=True,
        high=100,
        none="auto",
    )
    search_eps: tuple[float, ...] | None = param(
        None, "ε values of search for objective daml (auto: ε and 0.9ε)", low=0, low_open=True,
        high=1, none="auto",
    )  # fmt: skip
    early_stopping: str = param(
        "off",
        "stop when the valid BPR (bpr) or valid NLL (nll) has not improved for patience "
        "validations and restore the best checkpoint on it; replaces selection",
        choices=("off", "bpr", "nll"),
    )
    patience: int = param(
        5, "validations without improvement before early stopping", low=1, high=_MAX
    )
    reference_bpr: float | None = param(
        None,
        "ML valid BPR for the DAML selection rule (auto: the init checkpoint's)",
        low=0,
        high=1,
        none="auto",
    )
    init: str | Path | None = param(
        None, "warm start from a model.pt, e.g. the NLL-only run's", path="file", none="none"
    )
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        _check(self)


@dataclass(kw_only=True)
class RankConfig(DataConfig):
    """``bpr-topk rank``: rank the sites of one split from a saved model."""

    checkpoint: str | Path = param(REQUIRED, "model.pt written by train", path="file")
    rule: str = param("ratio", "ranking rule: ratio (Eq. 7) or mean", choices=("ratio", "mean"))
    samples: int = param(1000, "forecast samples for the ratio rule", low=1, high=_MAX)
    denominator_offset: float = param(
        1.0, "c in the ratio rating y/(c + 1·y); 0 is the literal Eq. 7", low=0, high=_BIG
    )
    split: str = param("test", "split to rank", choices=SPLIT_NAMES)

    def __post_init__(self) -> None:
        _check(self)


@dataclass(kw_only=True)
class EvaluateConfig(EvalFields, DataConfig):
    """``bpr-topk evaluate``: saved models beside the heuristics on one split."""

    checkpoints: tuple[str | Path, ...] | None = param(
        None, "model.pt files to evaluate (none: only the heuristics)", path="file", none="none",
        flag=False,  # the CLI's --checkpoints A B ...
    )  # fmt: skip

    def __post_init__(self) -> None:
        _check(self)


@dataclass(kw_only=True)
class DemoConfig:
    """``bpr-topk demo``: NLL-only vs DAML vs BPR-only beside the heuristics on generated data."""

    dataset: str = param(
        "hotspots",
        "generated data: hotspots (S=500, K=25) or synthetic7 (paper Sec. 5.1, S=7, K=5)",
        choices=DEMO_DATASETS,
    )
    quick: bool = param(False, "one seed and a small evaluation (well under 2 min on one core)")
    seeds: int | None = param(
        None, "number of seeds, from seed on (auto: 1 with quick, 3 otherwise)", low=1, high=1000,
        none="auto",
    )  # fmt: skip
    seed: int = param(0, "first random seed", low=0, high=_SEED)

    def __post_init__(self) -> None:
        check_config(self)


@dataclass(kw_only=True)
class BaselineConfig(DataConfig):
    """``bpr-topk baseline``: the non-learned heuristics of Table C.2 and their family."""

    rule: str = param(
        "all",
        "heuristic: last, avg, mean, zero, or all (the family: avg over 2, 3, 5, 10 and window)",
        choices=("all", *HEURISTIC_NAMES),
    )
    window: int = param(
        5, "W, the steps averaged by rule avg (the paper uses 10 for cranes)", low=1, high=10_000
    )
    split: str = param("test", "split to score", choices=SPLIT_NAMES)

    def __post_init__(self) -> None:
        _check(self)


@dataclass(kw_only=True)
class ToyConfig:
    """``bpr-topk toy``: the App. B.2 toy (exact; no settings)."""
