"""``SorbetConfig``: a ``BertConfig`` subclass that also describes the Sorbet replacements (the model
config; the job configs of the command line are in :mod:`sorbet_snn.config`)."""

from __future__ import annotations

from typing import Any

from huggingface_hub.dataclasses import strict
from transformers import BertConfig

__all__ = ["STAGES", "SorbetConfig", "stage_config"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "softmax": ("softmax", "ptsoftmax"),
    "norm": ("layernorm", "bspn"),
    "embedding_norm": ("layernorm", "bspn"),
    "ffn_act": ("gelu", "relu"),
    "pooler_act": ("tanh", "relu"),
    "ptsoftmax_grad": ("ste", "official"),
    "ptsoftmax_partition": ("npot", "exact"),
    "bspn_backward": ("powernorm", "autograd"),
    "zero_sign": ("plus", "zero"),
    "alpha_pot": ("init", "always"),
    "unsigned_offset": ("none", "batch_min_pot"),
    "theta_mode": ("official", "exact"),
    "signed_encoding": ("offset", "bipolar"),
}


@strict
class SorbetConfig(BertConfig):
    r"""Configuration of a Sorbet student: the teacher's BERT architecture plus the Sorbet switches.

    Every ``BertConfig`` field keeps its meaning (N = ``num_hidden_layers``, H = ``hidden_size``,
    A = ``num_attention_heads``, I = ``intermediate_size``). The extra fields (defaults = full Sorbet):

    Args:
        weight_bits (int, default 1): 1 binarises every encoder/pooler Linear and the word embedding
            (BWN); 32 keeps full-precision weights.
        act_bits (int, default 4): activation bits b of every quantiser; 32 switches them off.
        softmax (str, default "ptsoftmax"): ``"softmax"`` or ``"ptsoftmax"`` (paper Algorithm 2).
        norm (str, default "bspn"): the two per-layer norms, ``"layernorm"`` or ``"bspn"`` (Algorithm 1).
        embedding_norm (str, default "layernorm"): the embedding norm (the official code keeps LayerNorm).
        ffn_act / pooler_act (str, default "relu"): FFN (``gelu``/``relu``) and pooler (``tanh``/``relu``).
        ptsoftmax_grad (str, default "ste"): ``"ste"`` or ``"official"`` (zero gradient to the scores).
        ptsoftmax_ceil (bool, default True), ptsoftmax_partition (str, default "npot").
        bspn_groups (int or None, default None = A), bspn_warmup (int, default 1000),
        bspn_mask_padding (bool, default True), bspn_backward (str, default "powernorm"),
        bspn_output_pot_ste (bool, default True; False reproduces the official zero gradient).
        zero_sign (str, default "plus"), pot_weight_scale (bool, default False),
        alpha_pot (str, default "init"), unsigned_offset (str, default "none").
        time_steps (int or None, default None = 2^act_bits), theta_mode (str, default "official"),
        signed_encoding (str, default "offset"): the spiking export's settings.

    Example::

        >>> from sorbet_snn import SorbetConfig, SorbetForSequenceClassification
        >>> cfg = SorbetConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        ...                    intermediate_size=128, vocab_size=100, num_labels=2)
        >>> model = SorbetForSequenceClassification(cfg)
        >>> cfg.time_steps_resolved
        16
    """

    model_type = "sorbet"

    weight_bits: int = 1
    act_bits: int = 4
    softmax: str = "ptsoftmax"
    norm: str = "bspn"
    embedding_norm: str = "layernorm"
    ffn_act: str = "relu"
    pooler_act: str = "relu"
    ptsoftmax_grad: str = "ste"
    ptsoftmax_ceil: bool = True
    ptsoftmax_partition: str = "npot"
    bspn_groups: int | None = None
    bspn_warmup: int = 1000
    bspn_mask_padding: bool = True
    bspn_backward: str = "powernorm"
    bspn_output_pot_ste: bool = True
    zero_sign: str = "plus"
    pot_weight_scale: bool = False
    alpha_pot: str = "init"
    unsigned_offset: str = "none"
    time_steps: int | None = None
    theta_mode: str = "official"
    signed_encoding: str = "offset"

    def validate_sorbet(self) -> None:
        """Reject values the model cannot run, naming the field and what it accepts."""
        for name, accepted in _CHOICES.items():
            value = getattr(self, name)
            if value not in accepted:
                raise ValueError(f"SorbetConfig.{name} must be one of {accepted}, got {value!r}")
        if self.weight_bits not in (1, 32):
            raise ValueError(f"SorbetConfig.weight_bits must be 1 or 32, got {self.weight_bits}")
        if not 1 <= self.act_bits <= 32:
            raise ValueError(f"SorbetConfig.act_bits must be in [1, 32], got {self.act_bits}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}"
            )
        groups = self.bspn_groups or self.num_attention_heads
        if self.hidden_size % groups:
            raise ValueError(
                f"BSPN: hidden_size {self.hidden_size} is not divisible by bspn_groups {groups}"
            )
        if self.bspn_warmup < 0:
            raise ValueError(f"SorbetConfig.bspn_warmup must be >= 0, got {self.bspn_warmup}")
        if self.time_steps is not None and self.time_steps < 1:
            raise ValueError(f"SorbetConfig.time_steps must be >= 1, got {self.time_steps}")

    @property
    def quantized(self) -> bool:
        """True when activations are quantised (the model can be exported as an SNN)."""
        return self.act_bits < 32

    @property
    def time_steps_resolved(self) -> int:
        """T: ``time_steps`` if set, else ``2^act_bits``."""
        return int(self.time_steps or 2 ** min(self.act_bits, 16))

    @property
    def groups_resolved(self) -> int:
        return int(self.bspn_groups or self.num_attention_heads)


SORBET_FIELDS: tuple[str, ...] = tuple(
    k for k in SorbetConfig.__annotations__ if not k.startswith("_")
)

STAGES: dict[str, dict[str, Any]] = {
    # full precision, the teacher's own layers: reproduces a BertModel exactly
    "fp": {
        "weight_bits": 32,
        "act_bits": 32,
        "softmax": "softmax",
        "norm": "layernorm",
        "ffn_act": "gelu",
        "pooler_act": "tanh",
    },
    # S1: W1A4 with standard softmax and LayerNorm, ReLU FFN and pooler (BiT-style)
    "S1": {"weight_bits": 1, "softmax": "softmax", "norm": "layernorm"},
    # S2: + PTsoftmax
    "S2": {"weight_bits": 1, "softmax": "ptsoftmax", "norm": "layernorm"},
    # S3: + BSPN in every layer (full Sorbet)
    "S3": {"weight_bits": 1, "softmax": "ptsoftmax", "norm": "bspn"},
}

_BERT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
    "layer_norm_eps",
    "pad_token_id",
    "classifier_dropout",
)


def stage_config(base: Any, stage: str, **overrides: Any) -> SorbetConfig:
    """A :class:`SorbetConfig` for ``stage`` (``fp``, ``S1``, ``S2``, ``S3``) on the architecture of
    ``base`` (a ``BertConfig`` or ``SorbetConfig``); ``overrides`` set any further field.

    A ``SorbetConfig`` base keeps its own Sorbet switches (e.g. ``act_bits``) unless the stage or the
    overrides set them. ``fp`` uses the base's ``hidden_act`` for the FFN, so it matches the teacher.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; accepted: {', '.join(STAGES)}")
    if getattr(base, "position_embedding_type", "absolute") not in (None, "absolute"):
        raise ValueError(
            f"only absolute position embeddings are supported, got {base.position_embedding_type!r}"
        )
    if getattr(base, "is_decoder", False):
        raise ValueError("decoder BERT configs (is_decoder=True) are not supported")
    fields: dict[str, Any] = {k: getattr(base, k) for k in _BERT_FIELDS if hasattr(base, k)}
    if isinstance(base, SorbetConfig):
        fields.update({k: getattr(base, k) for k in SORBET_FIELDS})
    fields["num_labels"] = base.num_labels
    if getattr(base, "id2label", None):
        fields["id2label"] = dict(base.id2label)
        fields["label2id"] = dict(base.label2id)
    stage_fields = dict(STAGES[stage])
    if stage == "fp":
        act = getattr(base, "hidden_act", "gelu")
        if act not in ("gelu", "relu"):
            raise ValueError(f"teacher hidden_act {act!r} is not supported; accepted: gelu, relu")
        stage_fields["ffn_act"] = act
    else:
        stage_fields.setdefault("ffn_act", "relu")
        stage_fields.setdefault("pooler_act", "relu")
        if fields.get("act_bits", 32) >= 32:
            stage_fields.setdefault("act_bits", 4)
    fields.update(stage_fields)
    fields.update(overrides)
    allowed = {*_BERT_FIELDS, *SORBET_FIELDS, "num_labels", "id2label", "label2id"}
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise ValueError(f"unknown SorbetConfig fields: {unknown}")
    return SorbetConfig(**fields)
