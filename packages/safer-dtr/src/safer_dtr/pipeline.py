"""The SAFER pipeline: cohort preparation, the three training stages, baselines, evaluation.

Stages (paper Sec. 4, Alg. 1):

1. f_θ (:class:`~safer_dtr.models.SAFERNet`) by cross-entropy on all training patients (Sec. 4.1);
2. the refinement head f_φ on the training *survivors* with θ frozen (Sec. 4.2), giving κ (Eq. 5) and
   its min-max constants on the training split;
3. risk-aware fine-tuning of f_θ with f_φ frozen (Eq. 7);

then conformal selection of the test patients whose normalised κ is certified below c (Sec. 5, Eq. 8,
:mod:`safer_dtr.conformal`) and counterfactual mortality through an outcome model (App. B).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._contract import ConfigError
from .conformal import ConformalSelector, repeated_selection, selection_metrics
from .data import CohortTensors, Preprocessor, Sequences, stratified_split
from .encoders import embed_note_rows
from .metrics import recommendation_metrics
from .models import (
    LogisticBaseline,
    MortalityModel,
    RefineHead,
    RNNBaseline,
    SAFERConfig,
    SAFERNet,
)
from .synthetic import FLUID_EDGES, VASO_EDGES, SyntheticSepsisCohort, dose_to_level
from .uncertainty import KappaScaler, risk_aware_loss, uncertainty_kl

__all__ = [
    "SAFER",
    "PreparedCohort",
    "TrainConfig",
    "evaluate_predictions",
    "fit_mortality_model",
    "kappa_summary",
    "oracle_counterfactual",
    "predict_logits",
    "prepare_cohort",
    "rule_baselines",
    "selection_summary",
    "train_baseline",
]

Progress = Callable[[int], None] | None


@dataclass
class TrainConfig:
    """Hyperparameters of the three stages (defaults: paper Sec. 6.1 / official code; γ = 0.2, the
    paper's best in Fig. 10)."""

    d_model: int = 128
    n_heads: int = 8
    n_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.2
    epochs_stage1: int = 30
    epochs_refine: int = 30
    epochs_finetune: int = 30
    lr_stage1: float = 1e-4
    lr_refine: float = 1e-4
    lr_finetune: float = 1e-5
    batch_size: int = 16
    gamma: float = 0.2
    risk_mode: str = "paper"
    weight_full_above: float | None = None
    kappa_norm: str = "paper"
    tabular_stream: str = "merged"
    attn_residual: bool = True
    cross_causal: bool = False
    fusion: str = "code"
    init: str = "torch"
    use_notes: bool = True
    survivors_only_stage1: bool = False  # SAFER-U

    def __post_init__(self) -> None:
        for name in ("epochs_stage1", "epochs_refine", "epochs_finetune"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0")
        if self.batch_size < 1:
            raise ValueError("TrainConfig.batch_size must be >= 1")
        for name in ("lr_stage1", "lr_refine", "lr_finetune"):
            if not getattr(self, name) > 0:
                raise ValueError(f"TrainConfig.{name} must be > 0")
        if self.risk_mode not in ("paper", "official"):
            raise ValueError(f"risk_mode must be 'paper' or 'official', got {self.risk_mode!r}")
        if self.kappa_norm not in ("paper", "official"):
            raise ValueError(f"kappa_norm must be 'paper' or 'official', got {self.kappa_norm!r}")
        if self.gamma < 0:
            raise ValueError(f"gamma must be >= 0, got {self.gamma}")

    @classmethod
    def quick(cls, **overrides: Any) -> TrainConfig:
        """The quick setting: d_model 64, epochs 10 / 10 / 5."""
        base: dict[str, Any] = {
            "d_model": 64,
            "epochs_stage1": 10,
            "epochs_refine": 10,
            "epochs_finetune": 5,
        }
        return cls(**{**base, **overrides})

    def net_config(self, note_dim: int) -> SAFERConfig:
        return SAFERConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            dropout=self.dropout,
            note_dim=note_dim,
            tabular_stream=self.tabular_stream,
            attn_residual=self.attn_residual,
            use_notes=self.use_notes,
            cross_causal=self.cross_causal,
            fusion=self.fusion,
            init=self.init,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _check_trained(losses: list[float], stage: str, lr_field: str) -> None:
    """Training that never happened must not report numbers: a non-finite epoch loss (every batch
    diverged) raises :class:`ConfigError` naming the stage's learning rate."""
    bad = [i for i, v in enumerate(losses) if not math.isfinite(v)]
    if bad:
        raise ConfigError(lr_field, f"the {stage} loss became non-finite at epoch {bad[0] + 1} "
                          f"(training diverged): lower --{lr_field.replace('_', '-')}")  # fmt: skip


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch inside the block without changing the caller's global RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


# ------------------------------------------------------------------------------------------- data


@dataclass
class PreparedCohort:
    """Model tensors of a cohort with its split and fitted preprocessing."""

    tensors: CohortTensors
    split: dict[str, np.ndarray]
    preprocessor: Preprocessor
    sequences: Sequences
    encoder_name: str

    @property
    def note_dim(self) -> int:
        return int(self.tensors.notes.shape[-1])


def prepare_cohort(
    seq: Sequences,
    encoder: Any,
    *,
    split_seed: int = 0,
    action_layout: str = "safer",
    preprocessor: Preprocessor | None = None,
    split: dict[str, np.ndarray] | None = None,
) -> PreparedCohort:
    """Split (80/10/10 by patient, stratified by death), fit the preprocessing on the training stays
    (unless ``preprocessor`` is given, e.g. from a checkpoint), transform, and embed the notes."""
    if split is None:
        split = stratified_split(seq.died, split_seed)
    if preprocessor is None:
        preprocessor = Preprocessor(action_layout).fit(seq, split["train"])
    arrays = preprocessor.transform(seq)
    notes = embed_note_rows(seq.note_text, encoder)
    tensors = CohortTensors(
        vitals=arrays["vitals"],
        prev_meds=arrays["prev_meds"],
        notes=notes,
        demo=arrays["demo"],
        y=arrays["y"],
        died=arrays["died"],
        prev_class=arrays["prev_class"],
        stay_ids=seq.stay_ids,
        target_doses=arrays["target_doses"],
    )
    return PreparedCohort(tensors, split, preprocessor, seq, getattr(encoder, "name", "?"))


def _torch_inputs(data: CohortTensors, device: Any) -> dict[str, torch.Tensor]:
    return data.batch(None, device)


def _batches(idx: np.ndarray, batch_size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    perm = rng.permutation(idx)
    for start in range(0, len(perm), batch_size):
        yield perm[start : start + batch_size]


def _call(
    model: nn.Module, X: dict[str, torch.Tensor], b: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    out = model(X["vitals"][b], X["prev_meds"][b], X["notes"][b], X["demo"][b])
    return out[0], out[1]


def predict_logits(
    model: nn.Module, data: CohortTensors, idx: np.ndarray | None = None, device: Any = "cpu",
    batch_size: int = 512,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Logits [N, 25] and embeddings of ``model`` on stays ``idx`` (eval mode, no gradient)."""
    X = _torch_inputs(data, device)
    idx = np.arange(len(data)) if idx is None else np.asarray(idx)
    was = model.training
    model.eval()
    logits, hs = [], []
    with torch.no_grad():
        for start in range(0, len(idx), batch_size):
            b = torch.as_tensor(idx[start : start + batch_size], device=X["y"].device)
            lo, h = _call(model, X, b)
            logits.append(lo)
            hs.append(h)
    model.train(was)
    if not logits:
        return torch.zeros(0, 25), torch.zeros(0, 1)
    return torch.cat(logits), torch.cat(hs)


def _fit_ce(
    model: nn.Module, X: dict[str, torch.Tensor], idx: np.ndarray, *, epochs: int, lr: float,
    batch_size: int, rng: np.random.Generator, weight_decay: float = 0.0, tick: Progress = None,
) -> list[float]:  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    losses = []
    dev = X["y"].device
    for _ in range(epochs):
        total, count = 0.0, 0
        for b in _batches(idx, batch_size, rng):
            bt = torch.as_tensor(b, device=dev)
            logits, _ = _call(model, X, bt)
            loss = F.cross_entropy(logits, X["y"][bt])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
            count += len(b)
        losses.append(total / max(count, 1))
        if tick is not None:
            tick(1)
    return losses


# ------------------------------------------------------------------------------------------ SAFER


class SAFER:
    """The full method: stage-1 f_θ, survivor-trained f_φ, κ, risk-aware fine-tuning.

    ``fit(cohort, seed)`` trains all stages on the cohort's training split; ``predict`` returns logits,
    h, κ and normalised κ̂; ``state_dict``/``load_state_dict`` round-trip everything (tensors and
    plain values only: safe for ``torch.load(weights_only=True)``).
    """

    def __init__(self, config: TrainConfig | None = None, note_dim: int = 384, device: Any = "cpu"):
        self.config = config or TrainConfig()
        self.device = torch.device(device)
        with torch.random.fork_rng(devices=[]):  # placeholders; fit() builds the seeded networks
            self.net = SAFERNet(self.config.net_config(note_dim)).to(self.device)
            self.refiner = RefineHead(self.net.config.h_dim).to(self.device)
        self.scaler = KappaScaler(self.config.kappa_norm)
        self.stage1_state: dict[str, torch.Tensor] | None = None
        self.history: dict[str, list[float]] = {}

    # --------------------------------------------------------------------------------- training

    def fit(self, cohort: PreparedCohort, seed: int = 0, tick: Progress = None) -> SAFER:
        cfg = self.config
        data = cohort.tensors
        train = cohort.split["train"]
        survivors = train[data.died[train] == 0]
        if survivors.size == 0:
            raise ValueError(
                "the training split holds no survivors: the refinement head needs them"
            )
        if cfg.epochs_stage1 < 1:
            raise ConfigError("epochs_stage1", "stage 1 needs at least one epoch: with 0 the model "
                              "would be untrained")  # fmt: skip
        X = _torch_inputs(data, self.device)
        rng = np.random.default_rng(seed)
        with seeded(seed):
            self.net = SAFERNet(self.config.net_config(cohort.note_dim)).to(self.device)
            self.refiner = RefineHead(self.net.config.h_dim).to(self.device)
            stage1_idx = survivors if cfg.survivors_only_stage1 else train
            self.history["stage1"] = _fit_ce(
                self.net,
                X,
                stage1_idx,
                epochs=cfg.epochs_stage1,
                lr=cfg.lr_stage1,
                batch_size=cfg.batch_size,
                rng=rng,
                tick=tick,
            )
            _check_trained(self.history["stage1"], "stage-1", "lr_stage1")
            self.stage1_state = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
            self._fit_refiner(data, survivors, rng, tick)
            _check_trained(self.history["refine"], "refinement", "lr_refine")
            kappa_train = self.predict(data, train)["kappa"]
            self.scaler = KappaScaler(cfg.kappa_norm).fit(kappa_train)
            self._finetune(X, train, rng, tick)
            _check_trained(self.history["finetune"], "fine-tuning", "lr_finetune")
        return self

    def _fit_refiner(
        self, data: CohortTensors, survivors: np.ndarray, rng: np.random.Generator, tick: Progress
    ) -> None:
        cfg = self.config
        _, h = predict_logits(self.net, data, survivors, self.device)  # θ frozen, no gradient
        y = torch.as_tensor(data.y[survivors], device=self.device)
        opt = torch.optim.Adam(self.refiner.parameters(), lr=cfg.lr_refine)
        self.refiner.train()
        losses = []
        local = np.arange(len(survivors))
        for _ in range(cfg.epochs_refine):
            total = 0.0
            for b in _batches(local, cfg.batch_size, rng):
                bt = torch.as_tensor(b, device=self.device)
                loss = F.cross_entropy(self.refiner(h[bt]), y[bt])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(b)
            losses.append(total / len(local))
            if tick is not None:
                tick(1)
        self.history["refine"] = losses
        self.history["refine_trained_on"] = [float(len(survivors))]

    def _finetune(
        self,
        X: dict[str, torch.Tensor],
        train: np.ndarray,
        rng: np.random.Generator,
        tick: Progress,
    ) -> None:
        cfg = self.config
        for p in self.refiner.parameters():
            p.requires_grad_(False)
        self.refiner.eval()
        opt = torch.optim.Adam(self.net.parameters(), lr=cfg.lr_finetune)
        self.net.train()
        losses = []
        for _ in range(cfg.epochs_finetune):
            total = 0.0
            for b in _batches(train, cfg.batch_size, rng):
                bt = torch.as_tensor(b, device=self.device)
                logits, h = _call(self.net, X, bt)
                kappa = uncertainty_kl(logits, self.refiner(h))
                kappa_hat = self.scaler(kappa)
                loss = risk_aware_loss(
                    logits,
                    X["y"][bt],
                    kappa,
                    kappa_hat,
                    cfg.gamma,
                    cfg.risk_mode,
                    cfg.weight_full_above,
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(b)
            losses.append(total / len(train))
            if tick is not None:
                tick(1)
        self.history["finetune"] = losses

    # ------------------------------------------------------------------------------- prediction

    def predict(
        self, data: CohortTensors, idx: np.ndarray | None = None
    ) -> dict[str, torch.Tensor]:
        """``logits`` [N, 25], ``h`` [N, d], ``kappa`` [N] (nats) and ``kappa_norm`` [N] (once fitted)."""
        logits, h = predict_logits(self.net, data, idx, self.device)
        self.refiner.eval()
        with torch.no_grad():
            kappa = uncertainty_kl(logits, self.refiner(h))
        out = {"logits": logits, "h": h, "kappa": kappa}
        if self.scaler.kappa_min is not None:
            out["kappa_norm"] = self.scaler(kappa)
        return out

    def stage1_net(self) -> SAFERNet:
        """SAFER-F: the network after stage 1 (before fine-tuning)."""
        if self.stage1_state is None:
            raise RuntimeError("SAFER is not fitted")
        net = SAFERNet(self.net.config).to(self.device)
        net.load_state_dict(self.stage1_state)
        return net

    # ------------------------------------------------------------------------------ persistence

    def state_dict(self) -> dict[str, Any]:
        return {
            "train_config": self.config.to_dict(),
            "net_config": self.net.config.to_dict(),
            "net": self.net.state_dict(),
            "refiner": self.refiner.state_dict(),
            "stage1": self.stage1_state,
            "kappa_scaler": {
                "mode": self.scaler.mode,
                "kappa_min": self.scaler.kappa_min,
                "kappa_max": self.scaler.kappa_max,
            },
            "history": self.history,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any], device: Any = "cpu") -> SAFER:
        missing = [k for k in ("train_config", "net_config", "net", "refiner", "kappa_scaler")
                   if k not in state]  # fmt: skip
        if missing:
            raise ValueError(f"not a SAFER checkpoint: missing {', '.join(missing)}")
        net_cfg = SAFERConfig.from_dict(state["net_config"])
        model = cls(TrainConfig.from_dict(state["train_config"]), net_cfg.note_dim, device)
        model.net = SAFERNet(net_cfg).to(model.device)
        model.net.load_state_dict(state["net"])
        model.refiner = RefineHead(net_cfg.h_dim).to(model.device)
        model.refiner.load_state_dict(state["refiner"])
        ks = state["kappa_scaler"]
        model.scaler = KappaScaler(ks["mode"], ks["kappa_min"], ks["kappa_max"])
        model.stage1_state = state.get("stage1")
        model.history = dict(state.get("history") or {})
        return model


# -------------------------------------------------------------------------------------- baselines


def train_baseline(
    kind: str, cohort: PreparedCohort, *, epochs: int, lr: float = 1e-3, batch_size: int = 16,
    hidden: int = 128, seed: int = 0, device: Any = "cpu", tick: Progress = None,
) -> nn.Module:  # fmt: skip
    """Train ``lstm``, ``gru``, ``logreg`` (+ ``-tab`` suffix: without notes) by cross-entropy on the
    training split."""
    data = cohort.tensors
    use_notes = not kind.endswith("-tab")
    base = kind.removesuffix("-tab")
    t = data.vitals.shape[1]
    with seeded(seed):
        model: nn.Module
        if base in ("lstm", "gru"):
            model = RNNBaseline(
                note_dim=cohort.note_dim, hidden=hidden, cell=base, use_notes=use_notes
            )
        elif base == "logreg":
            model = LogisticBaseline(t, note_dim=cohort.note_dim, use_notes=use_notes)
        else:
            raise ValueError(f"unknown baseline {kind!r}; expected lstm, gru or logreg")
        model.to(device)
        _fit_ce(
            model,
            _torch_inputs(data, device),
            cohort.split["train"],
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            rng=np.random.default_rng(seed),
            weight_decay=1e-4 if base == "logreg" else 0.0,
            tick=tick,
        )
    return model


def rule_baselines(cohort: PreparedCohort, idx: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """Scores [N, 25] of the naive rules: majority class (training marginal as scores, the same for
    every patient), carry-forward of the previous bloc's class (one-hot, ties broken by the marginal),
    and random scores."""
    data = cohort.tensors
    marginal = np.bincount(data.y[cohort.split["train"]], minlength=25) / len(cohort.split["train"])
    n = len(idx)
    carry = np.tile(1e-3 * marginal, (n, 1))
    carry[np.arange(n), data.prev_class[idx]] += 1.0
    return {
        "majority class": np.tile(marginal, (n, 1)),
        "carry-forward": carry,
        "random": np.random.default_rng(seed).random((n, 25)),
    }


# ------------------------------------------------------------------------------------- evaluation


def evaluate_predictions(
    probs: np.ndarray, cohort: PreparedCohort, idx: np.ndarray, k: int = 3
) -> dict[str, dict[str, float]]:
    """Recommendation metrics on survivors (the paper's headline), all and deceased patients of
    ``idx``; ``probs`` is aligned with ``idx``."""
    y = cohort.tensors.y[idx]
    died = cohort.tensors.died[idx]
    return {
        "survivors": recommendation_metrics(y[died == 0], probs[died == 0], k),
        "all": recommendation_metrics(y, probs, k),
        "deceased": recommendation_metrics(y[died == 1], probs[died == 1], k),
    }


def kappa_summary(
    kappa: np.ndarray, died: np.ndarray, seed: int = 0, boot: int = 1000
) -> dict[str, Any]:
    """Mean κ of survivors and deceased, their difference and a bootstrap 95 % CI of it."""
    kappa = np.asarray(kappa, dtype=float)
    died = np.asarray(died)
    s, d = kappa[died == 0], kappa[died == 1]
    out: dict[str, Any] = {
        "mean_survivors": float(s.mean()) if s.size else float("nan"),
        "mean_deceased": float(d.mean()) if d.size else float("nan"),
        "n_survivors": int(s.size),
        "n_deceased": int(d.size),
    }
    out["difference"] = out["mean_deceased"] - out["mean_survivors"]
    if s.size and d.size:
        rng = np.random.default_rng(seed)
        diffs = [rng.choice(d, d.size).mean() - rng.choice(s, s.size).mean() for _ in range(boot)]
        out["difference_ci95"] = [
            float(np.quantile(diffs, 0.025)),
            float(np.quantile(diffs, 0.975)),
        ]
    return out


def fit_mortality_model(
    cohort: PreparedCohort, *, epochs: int = 30, lr: float = 1e-4, batch_size: int = 16,
    hidden: int = 128, seed: int = 0, device: Any = "cpu", tick: Progress = None,
) -> MortalityModel:  # fmt: skip
    """Train m(x, a) on the training split with the one-hot *observed* target action (App. B)."""
    data = cohort.tensors
    X = _torch_inputs(data, device)
    train = cohort.split["train"]
    rng = np.random.default_rng(seed)
    with seeded(seed):
        model = MortalityModel(
            n_tab=data.vitals.shape[-1] + data.prev_meds.shape[-1],
            note_dim=cohort.note_dim,
            hidden=hidden,
        ).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        for _ in range(epochs):
            for b in _batches(train, batch_size, rng):
                bt = torch.as_tensor(b, device=X["y"].device)
                logit = model(
                    X["vitals"][bt], X["prev_meds"][bt], X["notes"][bt], X["demo"][bt], X["y"][bt]
                )
                loss = F.binary_cross_entropy_with_logits(logit, X["died"][bt])
                opt.zero_grad()
                loss.backward()
                opt.step()
            if tick is not None:
                tick(1)
    model.eval()
    return model


def mortality_estimates(
    model: MortalityModel, cohort: PreparedCohort, idx: np.ndarray, actions: np.ndarray,
    device: Any = "cpu",
) -> np.ndarray:  # fmt: skip
    """Estimated P(death) of stays ``idx`` under one-hot ``actions`` (aligned with ``idx``)."""
    X = cohort.tensors.batch(idx, device)
    with torch.no_grad():
        logit = model(
            X["vitals"],
            X["prev_meds"],
            X["notes"],
            X["demo"],
            torch.as_tensor(actions, device=X["y"].device),
        )
    return torch.sigmoid(logit).cpu().numpy()


def oracle_counterfactual(
    oracle: SyntheticSepsisCohort, cohort: PreparedCohort, idx: np.ndarray, actions: np.ndarray
) -> np.ndarray:
    """Ground-truth P(death) on the synthetic cohort when the target bloc's action is ``actions``:
    classes → representative doses of their bins (fitted bin medians) → the generator's levels."""
    fluid, vaso = cohort.preprocessor.bin_doses(actions)
    stays = cohort.tensors.stay_ids[idx] - 1
    row = cohort.sequences.seq_len - 1
    return oracle.oracle_mortality(
        stays, row, dose_to_level(fluid, FLUID_EDGES), dose_to_level(vaso, VASO_EDGES)
    )


def selection_summary(res: dict[str, Any]) -> dict[str, Any]:
    """Mean / 5 % / 95 % of FDR and power per α from :func:`repeated_selection`."""

    def stats(a: np.ndarray) -> dict[str, list[float]]:
        return {
            "mean": a.mean(0).tolist(),
            "se": (a.std(0, ddof=1) / math.sqrt(len(a))).tolist()
            if len(a) > 1
            else [0.0] * a.shape[1],
            "p05": np.quantile(a, 0.05, axis=0).tolist(),
            "p95": np.quantile(a, 0.95, axis=0).tolist(),
        }

    return {
        "alphas": res["alphas"],
        "c": res["c"],
        "reps": res["reps"],
        "protocol": res["protocol"],
        "fdr": stats(res["fdp"]),
        "power": stats(res["power"]),
        "n_selected_mean": res["n_sel"].mean(0).tolist(),
        "random_fdr_mean": res["rand_fdp"].mean(0).tolist(),
        "random_power_mean": res["rand_power"].mean(0).tolist(),
        "plugin_fdr_mean": float(res["plugin_fdp"].mean()),
        "plugin_power_mean": float(res["plugin_power"].mean()),
        "null_fraction_mean": float(res["null_fraction"].mean()),
        "reps_without_null_calibration": res["reps_without_null_calibration"],
        "fdr_le_alpha_all": bool(np.all(res["fdp"].mean(0) <= np.asarray(res["alphas"]) + 1e-12)),
    }


def deploy_selection(
    H_cal: np.ndarray, kappa_cal: np.ndarray, H_test: np.ndarray, *, alpha: float, c: float,
    regressor: str = "ridge", ridge_alpha: float = 1.0, fit_frac: float = 0.7, seed: int = 0,
) -> tuple[ConformalSelector, np.ndarray]:  # fmt: skip
    """One deployment: split the calibration patients ``fit_frac`` / rest into κ̂-fit and conformal
    calibration (official ``logistic_regression.py``), then BH-select among the test patients."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(kappa_cal))
    n_fit = round(fit_frac * len(perm))
    fit_idx, cal_idx = perm[:n_fit], perm[n_fit:]
    if len(cal_idx) == 0 or len(fit_idx) < 2:
        raise ValueError(f"the calibration split ({len(perm)} stays) is too small to split")
    X_cal = kappa_cal if regressor == "identity" else H_cal
    sel = ConformalSelector(
        alpha=alpha, c=c, regressor=regressor, ridge_alpha=ridge_alpha, random_state=rng
    )
    sel.fit(X_cal[fit_idx], kappa_cal[fit_idx]).calibrate(X_cal[cal_idx], kappa_cal[cal_idx])
    return sel, sel.select(H_test)


def run_selection_grid(
    H: np.ndarray, kappa: np.ndarray, *, cs: Sequence[float], alphas: Sequence[float], reps: int,
    seed: int, test: np.ndarray | None = None, regressor: str = "ridge", ridge_alpha: float = 1.0,
    fit_frac: float = 0.7,
) -> dict[str, Any]:  # fmt: skip
    """:func:`repeated_selection` summarised per c."""
    return {
        f"{c:g}": selection_summary(
            repeated_selection(
                H,
                kappa,
                c=c,
                alphas=alphas,
                reps=reps,
                seed=seed + i,
                test=test,
                regressor=regressor,
                ridge_alpha=ridge_alpha,
                fit_frac=fit_frac,
            )
        )
        for i, c in enumerate(cs)
    }


__all__ += ["deploy_selection", "mortality_estimates", "run_selection_grid", "selection_metrics"]
