"""Configurations of the package's five jobs (``train``, ``recommend``, ``evaluate``, ``generate``,
``demo``).

Each field carries its default, a one-line doc and the values it accepts; :func:`check_config` checks
them when the config is built (a :class:`ConfigError` names the field), and the command line makes one
flag per field from the same declaration. Standard library only: building the CLI does not import
torch. The jobs themselves are :mod:`safer_dtr.jobs` (``run_train(TrainRunConfig(...), out)``, ...).

>>> from safer_dtr.config import DemoConfig
>>> from safer_dtr.jobs import run_demo
>>> result = run_demo(DemoConfig(quick=True, n_stays=400))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._contract import ConfigError, check_config, param

__all__ = [
    "ALL_METHODS",
    "PRESET_NAMES",
    "ConfigError",
    "DemoConfig",
    "EvaluateConfig",
    "GenerateConfig",
    "RecommendConfig",
    "TrainRunConfig",
]

PRESET_NAMES = ("mimic3", "mimic4")  # synthetic.PRESETS (a test checks that the two agree)
TRAINED_BASELINE_NAMES = ("LSTM", "GRU", "LogReg")
RULE_NAMES = ("majority class", "carry-forward", "random")
ALL_METHODS = ("SAFER", "SAFER-F", "SAFER-N", "SAFER-U", *TRAINED_BASELINE_NAMES, *RULE_NAMES)
QUICK_METHODS = ("SAFER", "SAFER-F", "SAFER-N", "majority class", "carry-forward", "random")
DEFAULT_ALPHAS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
DEFAULT_CS = (0.1, 0.2, 0.3, 0.4)
_SEED_MAX = 2**32 - 1
_EPOCHS_MAX = 100_000
_LR_MAX = 10.0


# --------------------------------------------------------------------------------- shared fields


@dataclass
class _Cohort:
    """The synthetic cohort (paper Table 3 presets)."""

    n_stays: int | None = param(
        None, "synthetic cohort size (auto: the preset's, 3545 for mimic3; 800 with --quick)",
        low=50, high=100_000, none="auto",
    )  # fmt: skip
    preset: str = param(
        "mimic3", "synthetic preset: size, mortality and stay lengths of paper Table 3",
        choices=PRESET_NAMES,
    )  # fmt: skip
    cohort_seed: int = param(0, "seed of the synthetic cohort", low=0, high=_SEED_MAX)
    note_only_prob: float = param(
        0.8, "probability that a synthetic note states the note-only factors; 0 gives the "
        "notes-ablated cohort", low=0.0, high=1.0,
    )  # fmt: skip


@dataclass
class _Encoding(_Cohort):
    """Sequences and the note encoder."""

    seq_len: int = param(
        8, "rows per stay: seq_len-1 input blocs + the target bloc", low=2, high=64
    )
    note_alignment: str = param(
        "auto", "note per bloc: nearest in time (paper; may look ahead) or latest at or before the "
        "bloc; auto = past for synthetic data, nearest for a folder",
        choices=("auto", "nearest", "past"),
    )  # fmt: skip
    action_layout: str = param(
        "safer", "class = vaso*5 + fluid (safer) or fluid*5 + vaso (aiclinician)",
        choices=("safer", "aiclinician"),
    )  # fmt: skip
    encoder: str = param(
        "auto", "note encoder: all-MiniLM-L6-v2 (needs safer-dtr[text]), signed n-gram hashing, a "
        "local HF folder (--encoder-path), or auto = minilm when installed (hashing with --quick or "
        "without it)", choices=("auto", "minilm", "hashing", "hf"),
    )  # fmt: skip
    encoder_path: str | Path | None = param(
        None, "local Hugging Face model folder for --encoder hf, e.g. Bio_ClinicalBERT",
        path="dir", none="none",
    )  # fmt: skip
    pooling: str = param(
        "cls",
        "pooling of --encoder hf (cls, as the paper's BioClinicalBERT)",
        choices=("cls", "mean"),
    )
    max_length: int = param(512, "token limit of --encoder hf", low=1, high=8192)
    normalize: bool = param(False, "L2-normalise --encoder hf embeddings")
    hash_dim: int = param(384, "buckets of the hashing encoder", low=1, high=1_000_000)
    threads: int = param(
        1, "torch CPU threads; the networks are small, so more threads mostly add overhead",
        low=1, high=1024,
    )  # fmt: skip
    cache_dir: str | None = param(
        None, "folder for the note-embedding cache, one .npz per encoder (auto: the output folder)",
        none="auto",
    )  # fmt: skip


@dataclass
class _Model:
    """Model and training (paper Sec. 6.1; quick: d_model 64, epochs 10/10/5)."""

    quick: bool = param(False, "small and fast setting: d_model 64, epochs 10/10/5, 800 stays")
    d_model: int | None = param(
        None, "model width (auto: 128; 64 with --quick)", low=4, high=4096, none="auto"
    )
    heads: int = param(8, "attention heads", low=1, high=256)
    layers: int = param(2, "transformer layers", low=1, high=64)
    d_ff: int = param(128, "feed-forward width", low=1, high=65536)
    dropout: float = param(0.2, "dropout", low=0.0, high=1.0, high_open=True)
    epochs_stage1: int | None = param(
        None, "stage-1 epochs (auto: 30; 10 with --quick)", low=1, high=_EPOCHS_MAX, none="auto"
    )
    epochs_refine: int | None = param(
        None, "refinement-head epochs (auto: 30; 10 with --quick)", low=1, high=_EPOCHS_MAX,
        none="auto",
    )  # fmt: skip
    epochs_finetune: int | None = param(
        None, "risk-aware fine-tuning epochs, 0 = none (auto: 30; 5 with --quick)", low=0,
        high=_EPOCHS_MAX, none="auto",
    )  # fmt: skip
    lr_stage1: float = param(
        1e-4, "stage-1 Adam learning rate", low=0.0, low_open=True, high=_LR_MAX
    )
    lr_refine: float = param(
        1e-4, "refinement Adam learning rate", low=0.0, low_open=True, high=_LR_MAX
    )
    lr_finetune: float = param(
        1e-5, "fine-tuning Adam learning rate", low=0.0, low_open=True, high=_LR_MAX
    )
    batch_size: int = param(16, "batch size", low=1, high=1_000_000)
    gamma: float = param(0.2, "γ of the κ² penalty in Eq. 7", low=0.0, high=1000.0)
    risk_mode: str = param(
        "paper", "Eq. 7 as written (detached weight, κ² with gradient) or the official code's "
        "no-grad weighting", choices=("paper", "official"),
    )  # fmt: skip
    weight_full_above: float | None = param(
        None, "weights above this become 1 (official: 0.6; off: never)", low=0.0, high=1.0,
        none="off",
    )  # fmt: skip
    kappa_norm: str = param(
        "paper", "κ normalisation (κ-min)/(max-min) or the official precedence bug",
        choices=("paper", "official"),
    )  # fmt: skip
    tabular_stream: str = param(
        "merged", "vitals and doses as one tabular stream, or the official unused medication stream",
        choices=("merged", "official"),
    )  # fmt: skip
    attn_residual: bool = param(
        True, "residual around self-attention (--no-attn-residual: as the official block)"
    )
    cross_causal: bool = param(False, "causal mask in cross-attention")
    fusion: str = param(
        "code", "h = fuse2([fuse1([v;n]); demo]) in R^d (code) or [v; n; demo] in R^3d",
        choices=("code", "concat"),
    )  # fmt: skip
    init: str = param(
        "torch", "PyTorch default initialisation or the official Kaiming fan_out",
        choices=("torch", "official"),
    )  # fmt: skip
    use_notes: bool = param(True, "the notes stream (--no-use-notes: SAFER-N)", flag=False)

    def resolved(self, name: str) -> Any:
        """A model field with ``auto`` resolved (``--quick`` or the paper's default)."""
        value = getattr(self, name)
        if value is not None:
            return value
        full = {"d_model": 128, "epochs_stage1": 30, "epochs_refine": 30, "epochs_finetune": 30}
        quick = {"d_model": 64, "epochs_stage1": 10, "epochs_refine": 10, "epochs_finetune": 5}
        return (quick if self.quick else full)[name]

    def train_kwargs(self) -> dict[str, Any]:
        """The fields of :class:`safer_dtr.pipeline.TrainConfig`."""
        r = self.resolved
        return {
            "d_model": r("d_model"), "n_heads": self.heads, "n_layers": self.layers,
            "d_ff": self.d_ff, "dropout": self.dropout, "epochs_stage1": r("epochs_stage1"),
            "epochs_refine": r("epochs_refine"), "epochs_finetune": r("epochs_finetune"),
            "lr_stage1": self.lr_stage1, "lr_refine": self.lr_refine,
            "lr_finetune": self.lr_finetune, "batch_size": self.batch_size, "gamma": self.gamma,
            "risk_mode": self.risk_mode, "weight_full_above": self.weight_full_above,
            "kappa_norm": self.kappa_norm, "tabular_stream": self.tabular_stream,
            "attn_residual": self.attn_residual, "cross_causal": self.cross_causal,
            "fusion": self.fusion, "init": self.init, "use_notes": self.use_notes,
        }  # fmt: skip

    def check_model(self) -> None:
        d = self.resolved("d_model")
        if d % self.heads:
            raise ConfigError("heads", f"--d-model {d} must be divisible by --heads {self.heads}")
        if d % 4:
            raise ConfigError("d_model", f"expected a multiple of 4, got {d}")


def _check_encoder(cfg: _Encoding) -> None:
    if cfg.encoder == "hf" and cfg.encoder_path is None:
        raise ConfigError(
            "encoder_path", "--encoder hf needs --encoder-path FOLDER (a local model)"
        )


# -------------------------------------------------------------------------------------- the jobs


@dataclass
class TrainRunConfig(_Encoding, _Model):
    """``safer-dtr train``: SAFER's three stages on a cohort's training split, saved as model.pt."""

    data: str | Path = param(
        "synthetic", "cohort folder holding mimictable.csv (AI-Clinician table) and optionally "
        "notes.csv, a table file, or 'synthetic' for the embedded generator",
        path="any", names=("synthetic",),
    )  # fmt: skip
    notes: str | Path | None = param(
        None, "notes CSV (icustayid, charttime, text) (auto: notes.csv beside the table, if any)",
        path="file", none="auto",
    )  # fmt: skip
    seed: int = param(0, "random seed (split and initialisation)", low=0, high=_SEED_MAX)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
        _check_encoder(self)
        self.check_model()


@dataclass
class _Restore:
    """A checkpoint written by ``train`` and the cohort it is applied to."""

    checkpoint: str | Path | None = param(
        None, "model.pt written by train (auto: <--out>/model.pt)", path="file", none="auto"
    )
    data: str | Path | None = param(
        None, "cohort folder (mimictable.csv [+ notes.csv]) or table file, or 'synthetic' (auto: "
        "the cohort the checkpoint was trained on when it was synthetic)",
        path="any", names=("synthetic",), none="auto",
    )  # fmt: skip
    notes: str | Path | None = param(
        None, "notes CSV (icustayid, charttime, text) (auto: notes.csv beside the table, if any)",
        path="file", none="auto",
    )  # fmt: skip
    encoder_path: str | Path | None = param(
        None, "the local HF model folder, when the checkpoint used --encoder hf", path="dir",
        none="none",
    )  # fmt: skip
    threads: int = param(1, "torch CPU threads", low=1, high=1024)
    cache_dir: str | None = param(
        None, "folder for the note-embedding cache (auto: the output folder)", none="auto"
    )
    kappa_hat: str = param("ridge", "regressor κ̂ of κ from h", choices=("ridge", "ols", "identity"))
    ridge_alpha: float = param(1.0, "ridge penalty", low=0.0, high=1e6)
    fit_frac: float = param(
        0.7, "share of the calibration split used to fit κ̂", low=0.0, high=1.0, low_open=True,
        high_open=True,
    )  # fmt: skip
    seed: int = param(0, "random seed", low=0, high=_SEED_MAX)
    device: str = param("cpu", "torch device", flag=False)


@dataclass
class RecommendConfig(_Restore):
    """``safer-dtr recommend``: recommendations released by conformal selection at FDR level α."""

    alpha: float = param(
        0.1, "target false discovery rate α", low=0.0, high=1.0, low_open=True, high_open=True
    )
    c: float = param(
        0.3, "uncertainty threshold on the normalised κ scale; H_j: κ_j >= c", low=0.0, high=1.0
    )

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class _Grid:
    """FDR / power curves over repeated random splits."""

    alphas: tuple[float, ...] = param(
        DEFAULT_ALPHAS, "α grid", low=0.0, high=1.0, low_open=True, high_open=True
    )
    cs: tuple[float, ...] = param(DEFAULT_CS, "c grid on the normalised κ scale", low=0.0, high=1.0)
    reps: int | None = param(
        None, "random splits per (α, c) (auto: 500; 100 with --quick)", low=1, high=100_000,
        none="auto",
    )  # fmt: skip
    mortality_epochs: int | None = param(
        None, "epochs of the outcome model, 0 = skip (auto: 30; 10 with --quick)", low=0,
        high=_EPOCHS_MAX, none="auto",
    )  # fmt: skip


@dataclass
class EvaluateConfig(_Restore, _Grid):
    """``safer-dtr evaluate``: metrics, FDR/power curves and counterfactual mortality of a checkpoint."""

    protocol: str = param(
        "pooled", "redraw calibration and test patients from the held-out stays each repetition "
        "(pooled), or keep the test split and resplit calibration only",
        choices=("pooled", "fixed-test"),
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class GenerateConfig(_Cohort):
    """``safer-dtr generate``: write a synthetic cohort (mimictable.csv, notes.csv, oracle.npz)."""

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class DemoConfig(_Encoding, _Model, _Grid):
    """``safer-dtr demo``: the whole pipeline on the synthetic cohort (offline)."""

    methods: tuple[str, ...] | None = param(
        None, "methods to run (auto: SAFER, SAFER-F, SAFER-N and the rules with --quick; all "
        "otherwise)", choices=ALL_METHODS, none="auto",
    )  # fmt: skip
    alpha: float = param(
        0.1, "α of the single deployment reported", low=0.0, high=1.0, low_open=True,
        high_open=True,
    )  # fmt: skip
    c: float = param(0.3, "c of the single deployment", low=0.0, high=1.0)
    seed: int = param(0, "random seed (split and initialisation)", low=0, high=_SEED_MAX)
    device: str = param("cpu", "torch device", flag=False)

    def __post_init__(self) -> None:
        check_config(self)
        _check_encoder(self)
        self.check_model()
