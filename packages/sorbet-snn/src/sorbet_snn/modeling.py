"""The Sorbet student: a BERT encoder whose layers can be binarised, quantised, PTsoftmax'ed, BSPN'ed
and finally run as a spiking network (``to_snn``).

Parameter names follow ``transformers.BertModel`` (``bert.encoder.layer.0.attention.self.query``...),
so a teacher's state dict maps onto the student one to one (:func:`convert_teacher`).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput

from .configuration_sorbet import SorbetConfig, stage_config
from .neuron import IFNeuron, if_counts, threshold
from .ops import BSPN, LSQQuantizer, binarize, ptsoftmax, relu_or_gelu

__all__ = [
    "ConversionReport",
    "SorbetForSequenceClassification",
    "SorbetModel",
    "SorbetPreTrainedModel",
    "SpikeRecorder",
    "SpikeSettings",
    "convert_teacher",
    "reset_spike_state",
    "to_snn",
]

MASK_VALUE = -10000.0  # the additive attention mask of BERT and of the official code


# ------------------------------------------------------------------------------------ spiking


@dataclass
class SpikeSettings:
    """How a quantised model runs as an SNN: T steps, the IF threshold, the signed encoding and the
    engine (``"closed_form"`` counts ``N(T)`` directly; ``"simulate"`` runs the IF neuron step by step
    and accumulates the binary weights at every step)."""

    time_steps: int
    theta: Fraction
    signed_encoding: str = "offset"
    engine: str = "closed_form"

    def __post_init__(self) -> None:
        if self.engine not in ("closed_form", "simulate"):
            raise ValueError(f"engine must be 'closed_form' or 'simulate', got {self.engine!r}")
        if self.signed_encoding not in ("offset", "bipolar"):
            raise ValueError(
                f"signed_encoding must be 'offset' or 'bipolar', got {self.signed_encoding!r}"
            )


@dataclass
class SpikeRecorder:
    """Spike counts per spiking tensor, filled by every spiking forward (for firing rates and energy).

    Each record: ``name``, ``kind`` (``linear``, ``qk``, ``pv``), ``spikes`` (over real tokens),
    ``neurons`` (real neurons x T), ``acs`` (accumulate operations), ``outputs`` (output elements
    over real tokens, for the per-output rescale ops). :meth:`reset` clears them.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    token_mask: Tensor | None = None

    def reset(self) -> None:
        self.records.clear()
        self.token_mask = None

    def add(self, **record: Any) -> None:
        self.records.append(record)

    def rates(self) -> dict[str, float]:
        """Firing rate per tensor name over everything recorded (spikes / (T x neurons))."""
        totals: dict[str, list[float]] = {}
        for r in self.records:
            acc = totals.setdefault(r["name"], [0.0, 0.0])
            acc[0] += r["spikes"]
            acc[1] += r["neurons"]
        return {k: (v[0] / v[1] if v[1] else 0.0) for k, v in totals.items()}


class _Spiking:
    """What every spiking-capable module holds after :func:`to_snn` (a plain attribute, not a module)."""

    def __init__(self, settings: SpikeSettings, recorder: SpikeRecorder) -> None:
        self.settings = settings
        self.recorder = recorder


def _spike_product(
    q: Tensor,
    signed: bool,
    spiking: _Spiking,
    matmul: Any,
    colsum: Tensor,
) -> tuple[Tensor, Tensor]:
    """Accumulate ``matmul(spikes)`` over T steps and decode the level offset.

    Returns ``(acc, spikes)`` with ``acc = matmul(q)`` exactly for integer operands (the offset
    encoding's ``-T/2 * colsum`` already folded in), and the per-element spike counts.
    """
    st = spiking.settings
    big_t = st.time_steps
    levels = q.to(torch.int64)
    if signed and st.signed_encoding == "offset":
        drive, sign = levels + big_t // 2, None
    elif signed:
        drive, sign = levels.abs(), torch.sign(q)
    else:
        drive, sign = levels, None
    if st.engine == "closed_form":
        counts = if_counts(drive, big_t, st.theta).to(q.dtype)
        acc = matmul(counts if sign is None else counts * sign)
    else:  # step by step: one IF update and one accumulation of the weights per time step
        neuron = IFNeuron(st.theta)
        acc = torch.zeros(())
        counts = torch.zeros_like(q)
        for _ in range(big_t):
            s = neuron.step(drive).to(q.dtype)
            counts = counts + s
            acc = acc + matmul(s if sign is None else s * sign)
        neuron.reset()
    if signed and st.signed_encoding == "offset":
        acc = acc - (big_t // 2) * colsum
    return acc, counts


def _record(
    spiking: _Spiking | None,
    name: str,
    kind: str,
    counts: Tensor,
    valid: Tensor | None,
    fanout: Tensor | int,
    outputs: float,
) -> None:
    if spiking is None:
        return
    t = spiking.settings.time_steps
    weighted = counts if valid is None else counts * valid
    spikes = float(weighted.sum())
    neurons = float(counts.numel() if valid is None else (valid.expand_as(counts)).sum()) * t
    if isinstance(fanout, Tensor):
        acs = float((weighted * fanout).sum())
    else:
        acs = spikes * fanout
    spiking.recorder.add(
        name=name, kind=kind, spikes=spikes, neurons=neurons, acs=acs, outputs=outputs
    )


# ------------------------------------------------------------------------------------- layers


class QuantLinear(nn.Linear):
    """Linear layer with binary weights (BWN), a learnable input shift ``move`` and a quantised input.

    ANN forward: ``F.linear(Q(x + move), W_b, b)``. Spiking forward: the input levels drive IF
    neurons and every spike adds one column of ``sign(W - mu)``; the scales (alpha, m) and the offset
    fold ``-(T/2) sum_i W_b[j, i]`` are applied once per output (paper Algorithm 4).
    """

    def __init__(self, in_features: int, out_features: int, config: SorbetConfig, *, signed: bool):
        super().__init__(in_features, out_features)
        self.binary = config.weight_bits == 1
        self.zero_sign = config.zero_sign
        self.pot_weight_scale = config.pot_weight_scale
        self.signed = signed
        self.name = ""
        self.spiking: _Spiking | None = None
        if config.quantized:
            self.move = nn.Parameter(torch.zeros(in_features))
            self.act_quant = LSQQuantizer(
                config.act_bits,
                signed=signed,
                alpha_pot=config.alpha_pot,
                unsigned_offset=config.unsigned_offset,
            )
        else:
            self.register_parameter("move", None)
            self.act_quant = None  # type: ignore[assignment]

    def effective_weight(self) -> Tensor:
        if not self.binary:
            return self.weight
        return binarize(self.weight, zero_sign=self.zero_sign, pot_scale=self.pot_weight_scale)

    def forward(self, x: Tensor, valid: Tensor | None = None) -> Tensor:
        if self.move is not None:
            x = x + self.move
        if self.spiking is not None and self.act_quant is not None:
            return self._spiking_forward(x, valid)
        if self.act_quant is not None and not self.training:
            return self._integer_forward(x)
        if self.act_quant is not None:
            x = self.act_quant(x)
        return F.linear(x, self.effective_weight(), self.bias)

    def _factored_weight(self) -> tuple[Tensor, Tensor]:
        """``(S, m)`` with ``W_b = m S``: S = sign(W - mu) (integers) for binary weights."""
        w = self.effective_weight().detach()
        if self.binary:
            return torch.sign(w), w.abs().amax()
        return w, torch.ones((), dtype=w.dtype, device=w.device)

    def _integer_forward(self, x: Tensor) -> Tensor:
        """Eval-mode quantised forward in the factored form ``(alpha m) (q S^T) + m0 m 1^T S^T + b``:
        the same value as ``F.linear(alpha q + m0, m S, b)``, with the integer product exact in float,
        so the spiking forward (which accumulates the same integers) reproduces it bit for bit."""
        assert self.act_quant is not None
        q, alpha, m0 = self.act_quant.levels(x)
        sign, m = self._factored_weight()
        out = (alpha * m) * F.linear(q, sign)
        if not self.signed:
            out = out + m0 * m * sign.sum(dim=1)
        return out + self.bias

    def _spiking_forward(self, x: Tensor, valid: Tensor | None) -> Tensor:
        assert self.spiking is not None and self.act_quant is not None
        q, alpha, m0 = self.act_quant.levels(x)
        sign, m = self._factored_weight()
        colsum = sign.sum(dim=1)
        acc, counts = _spike_product(
            q, self.signed, self.spiking, lambda s: F.linear(s, sign), colsum
        )
        out = (alpha * m) * acc
        if not self.signed:
            out = out + m0 * m * colsum
        tokens = float(valid.sum()) if valid is not None else float(q.numel() / q.shape[-1])
        _record(
            self.spiking,
            self.name,
            "linear",
            counts,
            valid,
            self.out_features,
            tokens * self.out_features,
        )
        return out + self.bias


class SorbetEmbeddings(nn.Module):
    def __init__(self, config: SorbetConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.binary = config.weight_bits == 1
        self.zero_sign = config.zero_sign
        if config.embedding_norm == "bspn":
            self.LayerNorm: nn.Module = _bspn(config)
        else:
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor, mask: Tensor) -> Tensor:
        weight = self.word_embeddings.weight
        if self.binary:  # BWN with a row-wise scale (one m per token row) and the global mean
            weight = binarize(weight, row_wise=True, zero_sign=self.zero_sign)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = F.embedding(input_ids, weight)
        x = (
            x
            + self.position_embeddings(positions)[None]
            + self.token_type_embeddings(token_type_ids)
        )
        x = _norm(self.LayerNorm, x, mask)
        return self.dropout(x)


def _bspn(config: SorbetConfig) -> BSPN:
    return BSPN(
        config.hidden_size,
        config.groups_resolved,
        warmup=config.bspn_warmup,
        mask_padding=config.bspn_mask_padding,
        backward=config.bspn_backward,
        output_pot_ste=config.bspn_output_pot_ste,
    )


def _norm(module: nn.Module, x: Tensor, mask: Tensor) -> Tensor:
    if isinstance(module, BSPN):
        return module(x, mask)
    out: Tensor = module(x)
    return out


class SorbetSelfAttention(nn.Module):
    def __init__(self, config: SorbetConfig) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        h = config.hidden_size
        self.query = QuantLinear(h, h, config, signed=True)
        self.key = QuantLinear(h, h, config, signed=True)
        self.value = QuantLinear(h, h, config, signed=True)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.softmax = config.softmax
        self.ptsoftmax_options = {
            "ceil": config.ptsoftmax_ceil,
            "partition": config.ptsoftmax_partition,
            "grad": config.ptsoftmax_grad,
        }
        self.name = ""
        self.spiking: _Spiking | None = None
        if config.quantized:
            bits, pot = config.act_bits, config.alpha_pot
            self.q_quant: LSQQuantizer | None = LSQQuantizer(bits, signed=True, alpha_pot=pot)
            self.k_quant: LSQQuantizer | None = LSQQuantizer(bits, signed=True, alpha_pot=pot)
            self.v_quant: LSQQuantizer | None = LSQQuantizer(bits, signed=True, alpha_pot=pot)
            self.p_quant: LSQQuantizer | None = LSQQuantizer(
                bits, signed=False, alpha_pot=pot, unsigned_offset=config.unsigned_offset
            )
        else:
            self.q_quant = self.k_quant = self.v_quant = self.p_quant = None

    def _heads(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.head_dim).transpose(1, 2)

    def forward(
        self, x: Tensor, add_mask: Tensor, mask: Tensor, keep_scores: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        valid = mask[..., None]
        q = self._heads(self.query(x, valid))
        k = self._heads(self.key(x, valid))
        v = self._heads(self.value(x, valid))
        scale = 1.0 / math.sqrt(self.head_dim)
        if self.spiking is not None and self.q_quant is not None:
            return self._spiking_attention(q, k, v, add_mask, mask, scale)
        if self.q_quant is not None and not self.training:
            return self._integer_attention(q, k, v, add_mask, scale, keep_scores)
        if self.q_quant is not None:
            assert self.k_quant is not None and self.v_quant is not None
            q, k, v = self.q_quant(q), self.k_quant(k), self.v_quant(v)
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        probs = self._probs(scores, add_mask)
        probs = self.dropout(probs)
        if self.p_quant is not None:
            probs = self.p_quant(probs)
        ctx = torch.matmul(probs, v)
        return self._merge(ctx), (scores + add_mask if keep_scores else None)

    def _probs(self, scores: Tensor, add_mask: Tensor) -> Tensor:
        if self.softmax == "ptsoftmax":
            return ptsoftmax(scores, add_mask, **self.ptsoftmax_options)  # type: ignore[arg-type]
        return torch.softmax(scores + add_mask, dim=-1)

    def _merge(self, ctx: Tensor) -> Tensor:
        b, _, n, _ = ctx.shape
        return ctx.transpose(1, 2).reshape(b, n, self.heads * self.head_dim)

    def _integer_attention(
        self, q: Tensor, k: Tensor, v: Tensor, add_mask: Tensor, scale: float, keep: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Eval-mode quantised attention on integer levels with the scales factored out (the same
        values as the fake-quantised products; exact integer products, see QuantLinear)."""
        assert self.q_quant and self.k_quant and self.v_quant and self.p_quant
        qq, aq, _ = self.q_quant.levels(q)
        qk, ak, _ = self.k_quant.levels(k)
        qv, av, _ = self.v_quant.levels(v)
        scores = (aq * ak * scale) * torch.matmul(qq, qk.transpose(-1, -2))
        probs = self._probs(scores, add_mask)
        qp, ap, m0 = self.p_quant.levels(probs)
        ctx = (ap * av) * torch.matmul(qp, qv) + (m0 * av) * qv.sum(dim=-2, keepdim=True)
        return self._merge(ctx), (scores + add_mask if keep else None)

    def _spiking_attention(
        self, q: Tensor, k: Tensor, v: Tensor, add_mask: Tensor, mask: Tensor, scale: float
    ) -> tuple[Tensor, Tensor | None]:
        assert self.spiking is not None
        assert self.q_quant and self.k_quant and self.v_quant and self.p_quant
        qq, aq, _ = self.q_quant.levels(q)
        qk, ak, _ = self.k_quant.levels(k)
        qv, av, _ = self.v_quant.levels(v)
        rows = mask[:, None, :, None]  # real query tokens
        keys = mask.sum(dim=1).reshape(-1, 1, 1, 1)  # real keys per sample
        # Q spikes; K decoded to levels: each spike of Q[h, i, e] adds K[h, :, e] to the scores
        acc, counts = _spike_product(
            qq,
            True,
            self.spiking,
            lambda s: torch.matmul(s, qk.transpose(-1, -2)),
            qk.sum(dim=-1)[..., None, :],
        )
        scores = (aq * ak * scale) * acc
        _record(self.spiking, f"{self.name}.q", "qk", counts, rows, keys, 0.0)
        probs = self._probs(scores, add_mask)
        qp, ap, m0 = self.p_quant.levels(probs)
        acc, counts = _spike_product(
            qp, False, self.spiking, lambda s: torch.matmul(s, qv), qv.sum(dim=-2, keepdim=True)
        )
        ctx = (ap * av) * acc + (m0 * av) * qv.sum(dim=-2, keepdim=True)
        _record(self.spiking, f"{self.name}.p", "pv", counts, rows, self.head_dim, 0.0)
        return self._merge(ctx), None


class SorbetLayerOutput(nn.Module):
    """``norm(residual + dropout(dense(x)))`` (BERT post-norm), the norm LayerNorm or BSPN."""

    def __init__(self, in_features: int, config: SorbetConfig, *, signed: bool) -> None:
        super().__init__()
        self.dense = QuantLinear(in_features, config.hidden_size, config, signed=signed)
        if config.norm == "bspn":
            self.LayerNorm: nn.Module = _bspn(config)
        else:
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: Tensor, residual: Tensor, mask: Tensor) -> Tensor:
        h = self.dropout(self.dense(x, mask[..., None]))
        return _norm(self.LayerNorm, h + residual, mask)


class SorbetAttention(nn.Module):
    def __init__(self, config: SorbetConfig) -> None:
        super().__init__()
        self.self = SorbetSelfAttention(config)
        self.output = SorbetLayerOutput(config.hidden_size, config, signed=True)


class SorbetIntermediate(nn.Module):
    def __init__(self, config: SorbetConfig) -> None:
        super().__init__()
        self.dense = QuantLinear(config.hidden_size, config.intermediate_size, config, signed=True)
        self.act = config.ffn_act

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return relu_or_gelu(self.dense(x, mask[..., None]), self.act)


class SorbetLayer(nn.Module):
    def __init__(self, config: SorbetConfig) -> None:
        super().__init__()
        self.attention = SorbetAttention(config)
        self.intermediate = SorbetIntermediate(config)
        # the FFN-out input is ReLU output plus W2's shift: an unsigned quantiser
        self.output = SorbetLayerOutput(config.intermediate_size, config, signed=False)

    def forward(
        self, x: Tensor, add_mask: Tensor, mask: Tensor, keep_scores: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        ctx, scores = self.attention.self(x, add_mask, mask, keep_scores)
        h_att = self.attention.output(ctx, x, mask)
        h_out = self.output(self.intermediate(h_att, mask), h_att, mask)
        return h_out, scores


class SorbetEncoder(nn.Module):
    def __init__(self, config: SorbetConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList([SorbetLayer(config) for _ in range(config.num_hidden_layers)])


class SorbetPooler(nn.Module):
    def __init__(self, config: SorbetConfig) -> None:
        super().__init__()
        self.dense = QuantLinear(config.hidden_size, config.hidden_size, config, signed=True)
        self.act = config.pooler_act

    def forward(self, hidden: Tensor) -> Tensor:
        return relu_or_gelu(self.dense(hidden[:, 0]), self.act)


class SorbetPreTrainedModel(PreTrainedModel):
    """Base class: ``config_class``, ``base_model_prefix`` and weight initialisation (BERT's)."""

    config_class = SorbetConfig
    config: SorbetConfig
    base_model_prefix = "bert"

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.normal_(0.0, std)
            if module.bias is not None:
                module.bias.zero_()
            if isinstance(module, QuantLinear) and module.move is not None:
                module.move.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.normal_(0.0, std)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
        elif isinstance(module, (nn.LayerNorm, BSPN)):
            module.weight.fill_(1.0)
            module.bias.zero_()
            if isinstance(module, BSPN):
                module.running_phi.fill_(1.0)
                module.grad_e.zero_()
                module.iters.zero_()
        elif isinstance(module, LSQQuantizer):
            module.alpha.fill_(1.0)
            module.initialized.fill_(False)


class SorbetModel(SorbetPreTrainedModel):
    """The Sorbet encoder (embeddings, N layers, pooler); outputs as ``transformers.BertModel``."""

    def __init__(self, config: SorbetConfig) -> None:
        super().__init__(config)
        self.embeddings = SorbetEmbeddings(config)
        self.encoder = SorbetEncoder(config)
        self.pooler = SorbetPooler(config)
        _name_modules(self)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = True,
        output_attention_scores: bool = False,
        **_: Any,
    ) -> BaseModelOutputWithPooling:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        mask = attention_mask.to(self.embeddings.word_embeddings.weight.dtype)
        add_mask = (1.0 - mask)[:, None, None, :] * MASK_VALUE
        recorder = _recorder_of(self)
        if recorder is not None:
            recorder.token_mask = mask
        x = self.embeddings(input_ids, token_type_ids, mask)
        hidden = [x]
        scores = []
        for layer in self.encoder.layer:
            x, s = layer(x, add_mask, mask, output_attention_scores)
            hidden.append(x)
            if s is not None:
                scores.append(s)
        pooled = self.pooler(x)
        return BaseModelOutputWithPooling(
            last_hidden_state=x,
            pooler_output=pooled,
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attentions=tuple(scores) if output_attention_scores else None,
        )


class SorbetForSequenceClassification(SorbetPreTrainedModel):
    """Sorbet encoder + full-precision classifier on the pooled [CLS] token (``num_labels`` outputs;
    one output means regression)."""

    def __init__(self, config: SorbetConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = SorbetModel(config)
        drop = config.classifier_dropout
        self.dropout = nn.Dropout(config.hidden_dropout_prob if drop is None else drop)
        self.classifier = nn.Linear(config.hidden_size, int(config.num_labels or 2))
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_hidden_states: bool = True,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids, output_hidden_states, **kwargs)
        logits = self.classifier(self.dropout(out.pooler_output))
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
            else:
                loss = F.cross_entropy(logits, labels)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=out.attentions
        )

    @classmethod
    def from_teacher(
        cls, teacher: nn.Module, stage: str = "S3", **overrides: Any
    ) -> SorbetForSequenceClassification:
        """Convert ``teacher`` into a student for ``stage`` (see :func:`convert_teacher`)."""
        student, _ = convert_teacher(teacher, stage, **overrides)
        return student


def _name_modules(model: nn.Module) -> None:
    for name, module in model.named_modules():
        if isinstance(module, (QuantLinear, SorbetSelfAttention)):
            module.name = name


def _recorder_of(model: nn.Module) -> SpikeRecorder | None:
    for module in model.modules():
        spiking = getattr(module, "spiking", None)
        if isinstance(spiking, _Spiking):
            return spiking.recorder
    return None


# --------------------------------------------------------------------------------- conversion


@dataclass
class ConversionReport:
    """What :func:`convert_teacher` did: ``copied`` (teacher name -> student name), ``new`` (student
    tensors with no teacher counterpart, freshly initialised), ``ignored`` (teacher buffers with no
    meaning in the student, e.g. ``position_ids``)."""

    source: str
    stage: str
    copied: dict[str, str] = field(default_factory=dict)
    new: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for name in self.new:
            kinds[name.rsplit(".", 1)[-1]] = kinds.get(name.rsplit(".", 1)[-1], 0) + 1
        new = ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())) or "none"
        return (
            f"converted {self.source} -> Sorbet {self.stage}: {len(self.copied)} tensors copied, "
            f"{len(self.new)} new ({new}), {len(self.ignored)} teacher buffers ignored"
        )


# student tensors a teacher need not have: quantiser steps, input shifts, BSPN buffers, a new head
_NEW_OK = re.compile(
    r"(\.move|\.act_quant\.(alpha|initialized)|\.[qkvp]_quant\.(alpha|initialized)"
    r"|\.running_phi|\.grad_e|\.iters|^classifier\.(weight|bias))$"
)
_IGNORE = re.compile(r"(position_ids|token_type_ids)$")


def convert_teacher(
    teacher: nn.Module, stage: str = "S3", **overrides: Any
) -> tuple[SorbetForSequenceClassification, ConversionReport]:
    """Build a Sorbet student for ``stage`` from a ``BertModel``, ``BertForSequenceClassification`` or
    a previous-stage Sorbet model, copying every teacher tensor by name; the teacher is not modified.

    Returns the student and a :class:`ConversionReport`. Raises ``ValueError`` when a teacher tensor
    has no student counterpart (a layout this converter does not know, e.g. a relative-position BERT),
    when shapes differ, or when the student would have tensors left uninitialised that are not of the
    expected new kinds (quantiser steps, shifts, BSPN buffers, the classifier of a headless teacher).
    """
    config = getattr(teacher, "config", None)
    if config is None:
        raise ValueError(
            f"teacher {type(teacher).__name__} has no .config; expected a HF BERT model"
        )
    student_cfg = stage_config(config, stage, **overrides)
    student = SorbetForSequenceClassification(student_cfg)
    state = teacher.state_dict()
    if not any(k.startswith("bert.") for k in state):  # a bare BertModel / SorbetModel
        state = {f"bert.{k}": v for k, v in state.items()}
    target = student.state_dict()
    report = ConversionReport(type(teacher).__name__, stage)
    unmatched, bad_shape = [], []
    loaded: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if name in target:
            if target[name].shape != tensor.shape:
                bad_shape.append(f"{name}: {tuple(tensor.shape)} vs {tuple(target[name].shape)}")
                continue
            loaded[name] = tensor
            report.copied[name] = name
        elif _IGNORE.search(name):
            report.ignored.append(name)
        else:
            unmatched.append(name)
    if unmatched:
        raise ValueError(
            f"{len(unmatched)} teacher tensors have no counterpart in the Sorbet student "
            f"(first: {unmatched[:5]}); only absolute-position BERT encoders with an optional "
            "sequence-classification head can be converted"
        )
    if bad_shape:
        raise ValueError(f"teacher/student shape mismatch: {bad_shape[:5]}")
    missing = [k for k in target if k not in loaded]
    unexpected = [k for k in missing if not _NEW_OK.search(k)]
    if unexpected:
        raise ValueError(f"student tensors not found in the teacher: {unexpected[:5]}")
    report.new = missing
    student.load_state_dict(loaded, strict=False)
    return student, report


# ------------------------------------------------------------------------------------- export


def to_snn(
    model: SorbetForSequenceClassification,
    *,
    engine: str = "closed_form",
    signed_encoding: str | None = None,
    theta_mode: str | None = None,
) -> SorbetForSequenceClassification:
    """A copy of a trained quantised model whose forward runs as a spiking network (paper Algorithm 4).

    Every quantised activation that feeds a matrix product is re-encoded as T = 2^b IF spike steps;
    products become accumulations of binary weights (or of K/V levels in attention). The copy is in
    eval mode and records spike counts in ``model.spike_recorder`` (reset it per batch or per dataset:
    :func:`reset_spike_state`). Predictions equal the quantised model's (exactly, up to float
    summation order in the scales).
    """
    cfg = model.config
    if not cfg.quantized:
        raise ValueError(
            "to_snn needs a quantised model (act_bits < 32); this one is full precision"
        )
    if cfg.act_bits < 2:
        raise ValueError(
            f"the spiking export needs act_bits >= 2 (T = 2^b steps), got {cfg.act_bits}"
        )
    big_t = cfg.time_steps_resolved
    if big_t != 2**cfg.act_bits:
        raise ValueError(f"time_steps must be 2^act_bits = {2**cfg.act_bits}, got {big_t}")
    settings = SpikeSettings(
        time_steps=big_t,
        theta=threshold(big_t, theta_mode or cfg.theta_mode),
        signed_encoding=signed_encoding or cfg.signed_encoding,
        engine=engine,
    )
    snn = copy.deepcopy(model).eval()
    recorder = SpikeRecorder()
    spiking = _Spiking(settings, recorder)
    for module in snn.modules():
        if isinstance(module, (QuantLinear, SorbetSelfAttention)):
            module.spiking = spiking
    snn.spike_recorder = recorder  # type: ignore[assignment]
    snn.spike_settings = settings  # type: ignore[assignment]
    return snn


def reset_spike_state(model: nn.Module) -> None:
    """Clear the spike records of a spiking model (the IF neurons themselves hold no state between
    calls: the closed form is stateless and the step simulator resets before and after each input)."""
    recorder = _recorder_of(model)
    if recorder is not None:
        recorder.reset()


def _register_auto_classes() -> None:
    """Make ``AutoConfig`` / ``AutoModel`` / ``AutoModelForSequenceClassification`` know ``sorbet``."""
    from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

    try:
        AutoConfig.register("sorbet", SorbetConfig)
        AutoModel.register(SorbetConfig, SorbetModel)
        AutoModelForSequenceClassification.register(SorbetConfig, SorbetForSequenceClassification)
    except ValueError:  # already registered (a module reload)
        pass


_register_auto_classes()
