"""Networks: the SAFER tri-stream transformer f_θ, the refinement head f_φ, the outcome model and
the recurrent / linear baselines.

Shapes (B = batch, T = input steps = seq_len - 1, d = ``d_model``)::

    vitals [B, T, 45], prev_meds [B, T, 4], notes [B, T, D_note], demo [B, 4]
    SAFERNet(...) -> (logits [B, 25], h [B, d])      (h [B, 3d] with fusion="concat")
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "CrossAttentionBlock",
    "LogisticBaseline",
    "MortalityModel",
    "RNNBaseline",
    "RefineHead",
    "SAFERConfig",
    "SAFERNet",
    "SelfAttentionBlock",
    "causal_mask",
    "sinusoidal_encoding",
]


@dataclass
class SAFERConfig:
    """Architecture of :class:`SAFERNet` (defaults: the official code, paper Sec. 4.1 and 6.1).

    Parameters
    ----------
    d_model, n_heads, n_layers, d_ff, dropout : 128, 8, 2, 128, 0.2
    n_vitals, n_meds, note_dim, n_demo, n_actions : 45, 4, 384, 4, 25
    tabular_stream : ``"merged"`` (vitals and previous doses as one 49-feature tabular stream, the
        paper's two modalities) or ``"official"`` (a separate medication stream that is attended in
        every layer but never reaches the output, as in the official code).
    attn_residual : residual connection around self-attention (standard; the official block has none).
    use_notes : False gives SAFER-N (tabular self-attention fused with demographics only).
    cross_causal : mask the cross-attention causally (the official code leaves it unmasked).
    fusion : ``"code"`` (h = fuse2([fuse1([v_T; n_T]); demo]) ∈ R^d) or ``"concat"``
        (h = [v_T; n_T; demo] ∈ R^{3d}, the paper's Eq. 4 reading).
    init : ``"torch"`` (PyTorch's default initialisation; default here) or ``"official"``
        (Kaiming-normal fan_out for every Linear, which multiplies the activation variance by about
        4 per 2d→d layer and gave initial logits with std ≈ 25 and much slower training here).
    """

    d_model: int = 128
    n_heads: int = 8
    n_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.2
    n_vitals: int = 45
    n_meds: int = 4
    note_dim: int = 384
    n_demo: int = 4
    n_actions: int = 25
    tabular_stream: str = "merged"
    attn_residual: bool = True
    use_notes: bool = True
    cross_causal: bool = False
    fusion: str = "code"
    init: str = "torch"
    max_len: int = 64

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "n_layers", "d_ff", "n_vitals", "note_dim", "n_demo"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"SAFERConfig.{name} must be an integer >= 1, got {value!r}")
        if self.n_meds < 1 or self.n_actions < 2 or self.max_len < 1:
            raise ValueError("SAFERConfig: n_meds >= 1, n_actions >= 2 and max_len >= 1 required")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"SAFERConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.d_model % 4:
            raise ValueError(f"SAFERConfig.d_model must be a multiple of 4, got {self.d_model}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"SAFERConfig.dropout must be in [0, 1), got {self.dropout}")
        if self.tabular_stream not in ("merged", "official"):
            raise ValueError(
                f"SAFERConfig.tabular_stream must be 'merged' or 'official', got {self.tabular_stream!r}"
            )
        if self.init not in ("official", "torch"):
            raise ValueError(f"SAFERConfig.init must be 'official' or 'torch', got {self.init!r}")
        if self.fusion not in ("code", "concat"):
            raise ValueError(f"SAFERConfig.fusion must be 'code' or 'concat', got {self.fusion!r}")

    @property
    def h_dim(self) -> int:
        """Size of the patient embedding h."""
        if self.fusion == "concat":
            return self.d_model * (3 if self.use_notes else 2)
        return self.d_model

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SAFERConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown SAFERConfig field(s): {', '.join(unknown)}")
        return cls(**data)


def sinusoidal_encoding(length: int, d: int) -> Tensor:
    """PE[t, 2k] = sin(t / 10000^{2k/d}), PE[t, 2k+1] = cos(t / 10000^{2k/d}) (paper Eq. 2)."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(length, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)[:, : d // 2]
    return pe


def causal_mask(length: int, device: Any = None) -> Tensor:
    """Boolean [T, T] mask, True where attention is forbidden (position t sees only <= t)."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool, device=device), diagonal=1)


def _proj(d_in: int, d_mid: int, d_out: int) -> nn.Sequential:
    """Two Linear layers with no activation in between (as the official stream projections)."""
    return nn.Sequential(nn.Linear(d_in, d_mid), nn.Linear(d_mid, d_out))


def _ffn(d: int, d_ff: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_ff, d))


class SelfAttentionBlock(nn.Module):
    """Causal self-attention block: ``x <- LN1(x + MHA(x, x, x))`` (``LN1(MHA(...))`` with
    ``residual=False``, the official block), then ``x <- LN2(x + FFN(x))`` (paper Eq. 3)."""

    def __init__(self, d: int, heads: int, d_ff: int, dropout: float, residual: bool = True):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn = _ffn(d, d_ff, dropout)
        self.residual = residual

    def forward(self, x: Tensor) -> Tensor:
        a, _ = self.attn(x, x, x, attn_mask=causal_mask(x.shape[1], x.device), need_weights=False)
        x = self.ln1(x + a if self.residual else a)
        return self.ln2(x + self.ffn(x))


class CrossAttentionBlock(nn.Module):
    """``out = LN1(q + Dropout(MHA(q, k, v)))``, then ``LN2(out + Dropout(FFN(out)))`` (paper Eq. 4)."""

    def __init__(self, d: int, heads: int, d_ff: int, dropout: float, causal: bool = False):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn = _ffn(d, d_ff, dropout)
        self.drop = nn.Dropout(dropout)
        self.causal = causal

    def forward(self, q: Tensor, kv: Tensor) -> Tensor:
        mask = causal_mask(q.shape[1], q.device) if self.causal else None
        a, _ = self.attn(q, kv, kv, attn_mask=mask, need_weights=False)
        out = self.ln1(q + self.drop(a))
        return self.ln2(out + self.drop(self.ffn(out)))


class _Layer(nn.Module):
    def __init__(self, cfg: SAFERConfig):
        super().__init__()
        d, h, f, p = cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout
        self.tab = SelfAttentionBlock(d, h, f, p, cfg.attn_residual)
        self.meds = (
            SelfAttentionBlock(d, h, f, p, cfg.attn_residual)
            if cfg.tabular_stream == "official"
            else None
        )
        if cfg.use_notes:
            self.notes = SelfAttentionBlock(d, h, f, p, cfg.attn_residual)
            self.notes_from_tab = CrossAttentionBlock(d, h, f, p, cfg.cross_causal)
            self.tab_from_notes = CrossAttentionBlock(d, h, f, p, cfg.cross_causal)
            self.merge_notes = nn.Linear(2 * d, d)
            self.merge_tab = nn.Linear(2 * d, d)

    def forward(
        self, tab: Tensor, notes: Tensor | None, meds: Tensor | None
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        tab = self.tab(tab)
        if self.meds is not None and meds is not None:
            meds = self.meds(meds)  # attended, never read out (official code)
        if notes is not None:
            notes = self.notes(notes)
            n_v = self.notes_from_tab(notes, tab)  # query notes, key/value vitals
            v_n = self.tab_from_notes(tab, notes)  # query vitals, key/value notes
            notes = self.merge_notes(torch.cat([n_v, notes], -1))
            tab = self.merge_tab(torch.cat([v_n, tab], -1))
        return tab, notes, meds


class SAFERNet(nn.Module):
    """The SAFER predictor f_θ: tabular and note streams with causal self-attention, notes↔vitals
    cross-attention, demographic fusion and a 25-way action head (paper Sec. 4.1, Eq. 2-4).

    ``forward(vitals, prev_meds, notes, demo) -> (logits, h)``; ``h`` is the patient embedding used by
    the refinement head and the κ̂ regressor.
    """

    def __init__(self, config: SAFERConfig | None = None) -> None:
        super().__init__()
        cfg = config or SAFERConfig()
        self.config = cfg
        d = cfg.d_model
        n_tab = cfg.n_vitals + (cfg.n_meds if cfg.tabular_stream == "merged" else 0)
        self.tab_proj = _proj(n_tab, d // 2, d)
        self.meds_proj = _proj(cfg.n_meds, d // 2, d) if cfg.tabular_stream == "official" else None
        self.notes_proj = _proj(cfg.note_dim, 2 * d, d) if cfg.use_notes else None
        self.demo_proj = _proj(cfg.n_demo, d // 2, d)
        self.register_buffer("pe", sinusoidal_encoding(cfg.max_len, d), persistent=False)
        self.layers = nn.ModuleList(_Layer(cfg) for _ in range(cfg.n_layers))
        if cfg.fusion == "code":
            self.fuse1 = nn.Linear(2 * d if cfg.use_notes else d, d)
            self.fuse2 = nn.Linear(2 * d, d)
        self.classifier = nn.Sequential(
            nn.Linear(cfg.h_dim, cfg.h_dim // 2),
            nn.GELU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.h_dim // 2, cfg.n_actions),
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Linear: Kaiming-normal (fan_out, ReLU gain), bias 0; MHA in-projection: Xavier-uniform,
        bias 0; LayerNorm: 1 / 0 (the official initialisation). With ``init="torch"`` every module
        keeps PyTorch's default initialisation instead."""
        if self.config.init == "torch":
            for m in self.modules():
                reset = getattr(m, "reset_parameters", None)
                if m is not self and callable(reset):
                    reset()
            return
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.MultiheadAttention):
                nn.init.xavier_uniform_(m.in_proj_weight)
                nn.init.zeros_(m.in_proj_bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _check(self, vitals: Tensor, prev_meds: Tensor, notes: Tensor, demo: Tensor) -> None:
        cfg = self.config
        if vitals.ndim != 3 or vitals.shape[-1] != cfg.n_vitals:
            raise ValueError(f"vitals must be [B, T, {cfg.n_vitals}], got {list(vitals.shape)}")
        b, t = vitals.shape[:2]
        if t > cfg.max_len:
            raise ValueError(f"sequence length {t} exceeds max_len {cfg.max_len}")
        if tuple(prev_meds.shape) != (b, t, cfg.n_meds):
            raise ValueError(
                f"prev_meds must be [{b}, {t}, {cfg.n_meds}], got {list(prev_meds.shape)}"
            )
        if cfg.use_notes and tuple(notes.shape) != (b, t, cfg.note_dim):
            raise ValueError(
                f"notes must be [{b}, {t}, {cfg.note_dim}] (note_dim = the encoder's dimension), "
                f"got {list(notes.shape)}"
            )
        if tuple(demo.shape) != (b, cfg.n_demo):
            raise ValueError(f"demo must be [{b}, {cfg.n_demo}], got {list(demo.shape)}")

    def encode(
        self, vitals: Tensor, prev_meds: Tensor, notes: Tensor, demo: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        """Per-step states of the tabular and note streams after the last layer: [B, T, d] each."""
        self._check(vitals, prev_meds, notes, demo)
        cfg = self.config
        t = vitals.shape[1]
        pe_all: Tensor = self.pe  # type: ignore[assignment]
        pe = pe_all[:t]
        meds: Tensor | None = None
        if cfg.tabular_stream == "merged":
            tab = self.tab_proj(torch.cat([vitals, prev_meds], -1)) + pe
        else:
            tab = self.tab_proj(vitals) + pe
            assert self.meds_proj is not None
            meds = self.meds_proj(prev_meds) + pe
        note_s = self.notes_proj(notes) + pe if self.notes_proj is not None else None
        for layer in self.layers:
            tab, note_s, meds = layer(tab, note_s, meds)
        return tab, note_s

    def forward(
        self, vitals: Tensor, prev_meds: Tensor, notes: Tensor, demo: Tensor
    ) -> tuple[Tensor, Tensor]:
        tab, note_s = self.encode(vitals, prev_meds, notes, demo)
        dem = self.demo_proj(demo)
        last = [tab[:, -1]] + ([note_s[:, -1]] if note_s is not None else [])
        if self.config.fusion == "concat":
            h = torch.cat([*last, dem], -1)
        else:
            h = self.fuse2(torch.cat([self.fuse1(torch.cat(last, -1)), dem], -1))
        return self.classifier(h), h


class RefineHead(nn.Module):
    """f_φ: Linear(d, d/2) → ReLU → Linear(d/2, d/4) → ReLU → Linear(d/4, 25) on h (paper Sec. 4.2)."""

    def __init__(self, h_dim: int, n_actions: int = 25) -> None:
        super().__init__()
        if h_dim < 4:
            raise ValueError(f"h_dim must be >= 4, got {h_dim}")
        self.net = nn.Sequential(
            nn.Linear(h_dim, h_dim // 2),
            nn.ReLU(),
            nn.Linear(h_dim // 2, h_dim // 4),
            nn.ReLU(),
            nn.Linear(h_dim // 4, n_actions),
        )

    def forward(self, h: Tensor) -> Tensor:
        return self.net(h)


class MortalityModel(nn.Module):
    """Outcome model m(x, a) → logit P(death) (paper App. B): per-stream projections of the tabular
    and note sequences, one-layer LSTMs, last hidden states, a demographic MLP and a treatment MLP
    (25 → 2d_h → d_h) concatenated (4 d_h) into an MLP."""

    def __init__(
        self, n_tab: int = 49, note_dim: int = 384, n_demo: int = 4, hidden: int = 128,
        n_actions: int = 25, use_notes: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.use_notes = use_notes
        self.tab_proj = nn.Linear(n_tab, hidden)
        self.tab_rnn = nn.LSTM(hidden, hidden, batch_first=True)
        self.note_proj = nn.Linear(note_dim, hidden)
        self.note_rnn = nn.LSTM(hidden, hidden, batch_first=True)
        self.demo = nn.Sequential(nn.Linear(n_demo, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.treat = nn.Sequential(
            nn.Linear(n_actions, 2 * hidden), nn.ReLU(), nn.Linear(2 * hidden, hidden)
        )
        self.head = nn.Sequential(nn.Linear(4 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.n_actions = n_actions

    def forward(
        self, vitals: Tensor, prev_meds: Tensor, notes: Tensor, demo: Tensor, action: Tensor
    ) -> Tensor:
        """``action``: class indices [B] or a distribution / one-hot [B, 25]. Returns logits [B]."""
        if action.ndim == 1:
            action = nn.functional.one_hot(action.long(), self.n_actions).float()
        _, (ht, _) = self.tab_rnn(self.tab_proj(torch.cat([vitals, prev_meds], -1)))
        if self.use_notes:
            _, (hn, _) = self.note_rnn(self.note_proj(notes))
            note_h = hn[-1]
        else:
            note_h = torch.zeros_like(ht[-1])
        z = torch.cat([ht[-1], note_h, self.demo(demo), self.treat(action)], -1)
        return self.head(z).squeeze(-1)


class RNNBaseline(nn.Module):
    """LSTM / GRU baseline: per-step concatenation of tabular features and the note embedding →
    one recurrent layer → MLP with the demographics → 25 logits."""

    def __init__(
        self, n_tab: int = 49, note_dim: int = 384, n_demo: int = 4, hidden: int = 128,
        n_actions: int = 25, cell: str = "lstm", use_notes: bool = True, dropout: float = 0.2,
    ) -> None:  # fmt: skip
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        self.use_notes = use_notes
        n_in = n_tab + (note_dim if use_notes else 0)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(n_in, hidden, batch_first=True)
        self.head = nn.Sequential(
            nn.Linear(hidden + n_demo, hidden), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(hidden, n_actions),
        )  # fmt: skip

    def forward(
        self, vitals: Tensor, prev_meds: Tensor, notes: Tensor, demo: Tensor
    ) -> tuple[Tensor, Tensor]:
        parts = [vitals, prev_meds] + ([notes] if self.use_notes else [])
        out, _ = self.rnn(torch.cat(parts, -1))
        h = out[:, -1]
        return self.head(torch.cat([h, demo], -1)), h


class LogisticBaseline(nn.Module):
    """Multinomial logistic regression on the flattened tabular sequence, the mean note embedding
    and the demographics (trained with weight decay as the L2 penalty)."""

    def __init__(
        self, n_steps: int, n_tab: int = 49, note_dim: int = 384, n_demo: int = 4,
        n_actions: int = 25, use_notes: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.use_notes = use_notes
        self.n_steps = n_steps
        self.linear = nn.Linear(
            n_steps * n_tab + (note_dim if use_notes else 0) + n_demo, n_actions
        )

    def forward(
        self, vitals: Tensor, prev_meds: Tensor, notes: Tensor, demo: Tensor
    ) -> tuple[Tensor, Tensor]:
        x = [torch.cat([vitals, prev_meds], -1).flatten(1)]
        if self.use_notes:
            x.append(notes.mean(1))
        z = torch.cat([*x, demo], -1)
        return self.linear(z), z
