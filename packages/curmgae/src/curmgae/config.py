"""One configuration dataclass holding every Cur-MGAE hyperparameter and where its value comes from."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._contract import ConfigError, check_config, param

ENCODERS = ("gcn", "sage", "gin")
DECODERS = ("cross", "inner_product")
MASKINGS = ("curriculum", "random", "path", "none")
LOSSES = ("bce", "sampled_softmax", "full_softmax")
NEGATIVES = ("uniform", "exclude_edges")
PENALTIES = ("l1", "squared")
RESIDUALS = ("abs", "squared")
S_SOLVERS = ("closed_form", "adam")
LAMBDA_PACES = ("additive", "rcl_inverse", "rcl_inverse_full", "linear", "quantile")
#: growth of the quantile target rho_t under ``lambda_pace="quantile"`` (competence-based curricula)
PACINGS = ("linear", "root", "geometric")
RANDOM_POOLS = ("remaining", "curriculum")
#: order among edges of equal S in the difficulty part (with gamma = 0 every edge of C_t has S = 1)
TIE_BREAKS = ("residual", "random")
MASK_UNITS = ("undirected", "directed")
#: difficulty measurer: residuals with every training edge visible (``full``, Algorithm 1 line 7) or
#: with each edge hidden from message passing while it is scored (``held_out``, k random folds)
DIFFICULTIES = ("full", "held_out")

#: method name -> overrides of the Cur-MGAE config (same backbone, same loop): the paper's ablations
#: "w/o Curri." (s2gae), "w/o CC Dec." (ip_decoder), "w/o CC Dec. & Curri." (ip_random), the split ratio
#: extremes (split0, split1), MaskGAE-style path masking, PyG's GAE, and a diagnostic anti-curriculum.
METHODS: dict[str, dict[str, Any]] = {
    "curmgae": {"masking": "curriculum"},
    "s2gae": {"masking": "random"},  # random-mask backbone = the paper's "w/o Curri."
    "path": {"masking": "path"},  # MaskGAE-style path masking on the same backbone
    "split0": {"masking": "curriculum", "split_ratio": 0.0},
    "split1": {"masking": "curriculum", "split_ratio": 1.0},
    "ip_decoder": {"masking": "curriculum", "decoder": "inner_product"},
    "ip_random": {"masking": "random", "decoder": "inner_product"},
    "anti_curriculum": {"masking": "curriculum", "anti_curriculum": True},
    "gae": {"masking": "none", "decoder": "inner_product"},  # PyG GAE
}
PROTOCOLS = ("svm", "linear_probe")
#: dataset names the loaders and the CLI accept (besides .npz/.pt graph files)
DATASET_NAMES = (
    "synthetic",
    "Cora",
    "CiteSeer",
    "PubMed",
    "coauthor:CS",
    "coauthor:Physics",
    "amazon:Computers",
    "amazon:Photo",
)
#: planted difficulty levels of the synthetic graph (``edge_difficulty`` 0, 1, 2)
DIFFICULTY_NAMES = ("easy", "medium", "hard")

#: Where each default comes from: "paper" (its equation or algorithm), "code:<repo>" (S2GAE, RCL or
#: MaskGAE, the paper's ancestors), or "inferred" (our reconstruction; the paper's appendix with the
#: hyperparameter tables, App. D, was not available). The README's Deviations section explains each.
SOURCES: dict[str, str] = {
    "encoder": "code:S2GAE (gcn default)",
    "num_layers": "code:S2GAE",
    "hidden": "code:S2GAE",
    "dropout": "code:S2GAE",
    "decoder": "paper Eq. 2 (cross-layer); inner_product = ablation 'w/o CC Dec.'",
    "decode_layers": "code:S2GAE (small LP)",
    "decode_channels": "code:S2GAE",
    "lr": "code:S2GAE (small LP)",
    "weight_decay": "inferred",
    "epochs": "code:S2GAE (small LP)",
    "batch_size": "code:S2GAE small LP (one full-batch step per epoch; the NC script uses 1024)",
    "masking": "paper (curriculum); random = 'w/o Curri.'",
    "mask_ratio": "code:S2GAE (LP)",
    "split_ratio": "inferred (midpoint)",
    "beta": "paper (value inferred)",
    "gamma": "paper (value inferred)",
    "penalty": "code:RCL (linear term)",
    "residual": "paper (L2 norm of a scalar)",
    "difficulty": "paper (Algorithm 1 line 7: residuals on the unmasked graph); held_out (each "
    "edge scored while hidden) lost to it on Cora validation edges (benchmarks/paired.py)",
    "held_out_folds": "inferred (2 folds: one extra encoder pass per S-step)",
    "select_after_curriculum": "inferred: model selection and early stopping start when the "
    "curriculum has reached the full mask schedule (epoch floor(ramp_frac*epochs))",
    "s_solver": "inferred (exact closed form); adam = code:RCL",
    "lambda_pace": "code:RCL (--increase 1), chosen on validation edges among the pacing rules "
    "(benchmarks/select_pacing.py); 0.2.0 used additive",
    "pacing": "inferred (linear/root/geometric pacing functions of competence-based curricula)",
    "pace_end": "inferred (quantile target at the end of the ramp; None = mask_ratio)",
    "tie_break": "inferred (Algorithm 1 takes the highest S; ties are not specified)",
    "lambda_init": "inferred (auto-calibration when None)",
    "mu": "inferred (auto-calibration when None)",
    "base_lambda": "code:RCL",
    "start_lambda": "code:RCL",
    "init_mask_ratio": "inferred",
    "ramp_frac": "code:RCL (2T/3)",
    "min_mask_ratio": "inferred (guard, not in the paper)",
    "random_pool": "inferred",
    "update_every": "paper (Algorithm 1 alternates every iteration)",
    "loss": "code:S2GAE (bce); paper Eq. 3 = full_softmax",
    "num_negatives": "inferred (sampled_softmax k)",
    "negatives": "code:S2GAE (uniform)",
    "softmax_on_probabilities": "paper Eq. 3 literal form when True",
    "grad_clip": "code:S2GAE",
    "symmetric_score": "inferred",
    "mask_unit": "inferred (S2GAE uses directed copies)",
    "anti_curriculum": "diagnostic, not in the paper",
    "path_root_ratio": "code:MaskGAE MaskPath",
    "walk_length": "code:MaskGAE MaskPath",
    "eval_every": "code:S2GAE (eval_steps 1)",
    "patience": "code:S2GAE (patience 50; None = no early stopping)",
}


_MAX = 10**9  # "as many as you like" for counts that only need to be positive
_BIG = 1e5  # upper bound of the positive scales (lambda, beta, gradient norm): far beyond any use
_SEED = 2**32 - 1  # numpy's seeds


@dataclass
class CurMGAEConfig:
    """Hyperparameters of Cur-MGAE (Eq. 1-4, Algorithm 1). ``SOURCES`` records where each default comes from.

    ``masking`` selects the edge-masking strategy of the same training loop: ``curriculum`` (Cur-MGAE,
    Algorithm 1), ``random`` (S2GAE / "w/o Curri."), ``path`` (MaskGAE-style random-walk masking) or
    ``none`` (reconstruct every training edge while it stays visible, GAE-style). Every field is checked
    when the config is built (:class:`ConfigError` names the field); ``curmgae pretrain`` makes one flag
    per field (``masking``, ``decoder`` and ``anti_curriculum`` are chosen by ``--method``).
    """

    # backbone (paper Eq. 1-2)
    encoder: str = param("gcn", "GNN encoder of Eq. 1", choices=ENCODERS)
    num_layers: int = param(2, "encoder depth K", low=1, high=64)
    hidden: int = param(128, "embedding width d", low=1, high=65536)
    dropout: float = param(0.5, "encoder dropout", low=0, high=1, high_open=True)
    decoder: str = param(
        "cross", "edge decoder (cross-layer Eq. 2, or inner product)", choices=DECODERS, flag=False
    )
    decode_layers: int = param(2, "layers of the decoder MLP", low=2, high=64)
    decode_channels: int = param(256, "width of the decoder MLP", low=1, high=65536)
    # optimisation
    lr: float = param(1e-2, "Adam learning rate", low=0, low_open=True, high=10)
    weight_decay: float = param(0.0, "Adam weight decay", low=0, high=10)
    epochs: int = param(200, "training epochs", low=1, high=100_000)
    batch_size: int | None = param(
        None, "positives per step (all: every masked edge, one step per epoch, as S2GAE)",
        low=1, high=_MAX, none="all",
    )  # fmt: skip
    grad_clip: float = param(1.0, "gradient-norm clip", low=0, low_open=True, high=_BIG)
    # masking and curriculum (paper Eq. 4, Algorithm 1)
    masking: str = param("curriculum", "edge-masking strategy", choices=MASKINGS, flag=False)
    mask_ratio: float = param(
        0.7, "largest masked fraction of the edges", low=0, low_open=True, high=1
    )
    split_ratio: float = param(
        0.5, "fraction of the masked set chosen by difficulty", low=0, high=1
    )
    beta: float = param(
        1.0, "scale beta of the pace threshold (Eq. 4)", low=0, low_open=True, high=_BIG
    )
    gamma: float = param(0.0, "weight gamma of the penalty on S (Eq. 4)", low=0, high=_BIG)
    penalty: str = param("l1", "penalty on the selection S (Eq. 4)", choices=PENALTIES)
    residual: str = param("abs", "residual of an edge (difficulty)", choices=RESIDUALS)
    difficulty: str = param(
        "full", "difficulty measurer: residuals on the full training graph, or each edge hidden "
        "while it is scored", choices=DIFFICULTIES,
    )  # fmt: skip
    held_out_folds: int = param(2, "folds of the held_out difficulty measurer", low=2, high=1000)
    s_solver: str = param("closed_form", "solver of the S-step of Eq. 4", choices=S_SOLVERS)
    lambda_pace: str = param("rcl_inverse", "lambda growth rule", choices=LAMBDA_PACES)
    pacing: str = param(
        "linear", "growth of the masked-fraction target under lambda_pace quantile", choices=PACINGS
    )
    pace_end: float | None = param(
        None, "quantile target at the end of the ramp under lambda_pace quantile (auto: the mask "
        "ratio)", low=0, low_open=True, high=1, none="auto",
    )  # fmt: skip
    tie_break: str = param(
        "residual", "which edges of the curriculum set form the difficulty part", choices=TIE_BREAKS
    )
    lambda_init: float | None = param(
        None, "initial lambda (auto: calibrated on the first residuals)", low=0, high=_BIG,
        none="auto",
    )  # fmt: skip
    mu: float | None = param(
        None, "lambda increment per S-step (auto: calibrated)", low=0, high=_BIG, none="auto"
    )
    base_lambda: float = param(1.0, "base of the RCL lambda paces", low=0, high=_BIG)
    start_lambda: float = param(1e-3, "start of the RCL lambda paces", low=0, high=_BIG)
    init_mask_ratio: float = param(0.1, "masked fraction at the first S-step", low=0, high=1)
    ramp_frac: float = param(
        2.0 / 3.0, "fraction of the epochs after which the curriculum has finished; model "
        "selection and early stopping start there", low=0, low_open=True, high=1,
    )  # fmt: skip
    min_mask_ratio: float = param(0.05, "smallest masked fraction (a guard)", low=0, high=1)
    random_pool: str = param(
        "remaining", "pool of the randomly chosen part of the mask", choices=RANDOM_POOLS
    )
    update_every: int = param(1, "epochs between S-steps (residuals, lambda, mask)", low=1,
                              high=100_000)  # fmt: skip
    mask_unit: str = param("undirected", "what a masked edge is", choices=MASK_UNITS)
    anti_curriculum: bool = param(False, "mask the hardest edges first (diagnostic)", flag=False)
    path_root_ratio: float = param(
        0.7, "fraction of nodes starting a walk (path masking)", low=0, low_open=True, high=1
    )
    walk_length: int = param(3, "random-walk length (path masking)", low=1, high=1000)
    # loss (paper Eq. 3)
    loss: str = param("bce", "reconstruction loss (full_softmax is Eq. 3)", choices=LOSSES)
    num_negatives: int = param(32, "negatives per positive (sampled_softmax)", low=1, high=100_000)
    negatives: str = param("uniform", "negative sampler", choices=NEGATIVES)
    softmax_on_probabilities: bool = param(False, "Eq. 3 literally: softmax over probabilities")
    symmetric_score: bool = param(True, "score an edge as the mean of both directions")
    # model selection (S2GAE: validation AUC every epoch, early stopping after 50 checks without gain)
    eval_every: int = param(1, "epochs between validation checks", low=1, high=100_000)
    patience: int | None = param(
        50, "stop after this many validation checks without a gain (off: never)", low=1,
        high=100_000, none="off",
    )  # fmt: skip
    select_after_curriculum: bool = param(
        True, "model selection and early stopping start when the curriculum has finished"
    )
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_config(self)
        if self.pacing == "geometric" and self.init_mask_ratio <= 0:
            raise ConfigError(
                "pacing",
                f"pacing='geometric' needs init_mask_ratio > 0; got {self.init_mask_ratio!r}",
            )
        if self.pace_end is not None and not self.init_mask_ratio <= self.pace_end <= 1.0:
            raise ConfigError(
                "pace_end",
                f"pace_end={self.pace_end!r} is outside the accepted range "
                f"[init_mask_ratio={self.init_mask_ratio!r}, 1]",
            )
        if self.min_mask_ratio > self.mask_ratio:
            raise ConfigError(
                "mask_ratio",
                f"min_mask_ratio={self.min_mask_ratio!r} must not exceed mask_ratio={self.mask_ratio!r}",
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CurMGAEConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError("config", f"unknown config keys {unknown}; accepted: {sorted(names)}")
        return cls(**d)


# ------------------------------------------------------------------- the command line's three jobs

TASKS = ("link", "node", "both")
EVAL_PROTOCOLS = (*PROTOCOLS, "both")
FEATURES = ("concat", "last")
_DATASET = (
    "one of the names (no download: Cora/CiteSeer/PubMed are read from root), or a graph file: .npz "
    "with x [N, F], edge_index [2, E] and optional y [N], or .pt holding a PyG Data"
)
_ROOT = (
    "folder holding <name>/raw for Cora/CiteSeer/PubMed or coauthor/amazon; read-only is fine "
    "(auto: $ICML25_DATA/planetoid, $ICML25_DATA/coauthor or $ICML25_DATA/amazon)"
)
_RELOAD = (
    "rebuild the processed-data cache ($CURMGAE_CACHE, default ~/.cache/curmgae) even when its key "
    "(the raw files' SHA-256 and the reader) matches"
)
_THREADS = "torch CPU threads (these graphs are small)"


@dataclass
class PretrainConfig:
    """``curmgae pretrain``: fit ``method`` on a graph; ``model`` holds the hyperparameters (None: the
    defaults), to which the method's preset (``METHODS``) is applied."""

    dataset: str | Path = param("synthetic", _DATASET, path="file", names=DATASET_NAMES)
    root: Path | None = param(None, _ROOT, path="dir", none="auto")
    force_reload: bool = param(False, _RELOAD)
    quick: bool = param(False, "small synthetic graph: 1,000 nodes, 5,000 edges (else 5,000 nodes)")
    method: str = param(
        "curmgae", "curmgae, or a baseline on the same loop", choices=tuple(METHODS)
    )
    split_seed: int = param(234, "seed of the 85/5/10 edge split", low=0, high=_SEED)
    threads: int = param(1, _THREADS, low=1, high=1024)
    seed: int = param(0, "random seed of the training run", low=0, high=_SEED)
    device: str = param("cpu", "torch device (CPU only in this version)", choices=("cpu",),
                        flag=False)  # fmt: skip
    model: CurMGAEConfig | None = None

    def __post_init__(self) -> None:
        check_config(self)
        if self.model is not None and not isinstance(self.model, CurMGAEConfig):
            raise ConfigError("model", f"model={self.model!r}: expected a CurMGAEConfig or None")

    def model_config(self) -> CurMGAEConfig:
        """``model`` with the method's preset applied; a field set against the preset is refused."""
        model = self.model if self.model is not None else CurMGAEConfig()
        default = CurMGAEConfig()
        preset = METHODS[self.method]
        for name, value in preset.items():
            given = getattr(model, name)
            if given != getattr(default, name) and given != value:
                raise ConfigError(
                    name,
                    f"{name}={given!r} conflicts with method={self.method!r}, which sets "
                    f"{name}={value!r}; leave {name} at its default or choose another method",
                )
        if self.method == "gae" and model.loss != default.loss:
            raise ConfigError(
                "loss", "the gae baseline trains with PyG's GAE.recon_loss; loss does not apply"
            )
        return dataclasses.replace(model, **preset)


@dataclass
class EvaluateConfig:
    """``curmgae evaluate``: score a checkpoint of ``pretrain`` on the same edge split."""

    checkpoint: Path | None = param(
        None, "model.pt written by pretrain (auto: <out>/model.pt)", path="file", none="auto"
    )
    task: str = param(
        "both", "link (AUC, AP), node (classification accuracy) or both", choices=TASKS
    )
    protocol: str = param(
        "both", "node classification protocol: svm (S2GAE's RBF SVM, 5-fold CV), linear_probe "
        "(public split) or both", choices=EVAL_PROTOCOLS,
    )  # fmt: skip
    features: str = param(
        "concat", "node features: all layers concatenated or the last layer", choices=FEATURES
    )
    probe_epochs: int = param(100, "training epochs of the linear probe", low=1, high=100_000)
    dataset: str | Path | None = param(
        None, _DATASET + " (checkpoint: the dataset stored in it)", path="file",
        names=DATASET_NAMES, none="checkpoint",
    )  # fmt: skip
    root: Path | None = param(
        None, _ROOT.replace("(auto:", "(auto: the checkpoint's, else"), path="dir", none="auto"
    )
    force_reload: bool = param(False, _RELOAD)
    threads: int = param(1, _THREADS, low=1, high=1024)
    seed: int = param(0, "seed of the node-classification protocols", low=0, high=_SEED)
    device: str = param("cpu", "torch device (CPU only in this version)", choices=("cpu",),
                        flag=False)  # fmt: skip

    def __post_init__(self) -> None:
        check_config(self)


@dataclass
class DemoConfig:
    """``curmgae demo``: Cur-MGAE vs random masking vs GAE on the embedded synthetic graph."""

    quick: bool = param(False, "1,000 nodes, 30 epochs, hidden 64 (< 1 min on 1 core; else 5,000 "
                        "nodes, 100 epochs)")  # fmt: skip
    epochs: int | None = param(
        None, "training epochs (auto: 30 with quick, else 100)", low=1, high=100_000, none="auto"
    )
    seeds: int = param(
        1, "training seeds seed, seed+1, ...; with 2 or more the table shows mean ± sample std",
        low=1, high=1000,
    )  # fmt: skip
    threads: int = param(1, _THREADS, low=1, high=1024)
    seed: int = param(0, "first training seed and the seed of the graph", low=0, high=_SEED)
    device: str = param("cpu", "torch device (CPU only in this version)", choices=("cpu",),
                        flag=False)  # fmt: skip

    def __post_init__(self) -> None:
        check_config(self)
