"""Op-count energy model: spiking Sorbet vs the full-precision BERT it came from.

The paper's per-operation energies are not public with it; the defaults are the 45 nm CMOS figures
(Horowitz, ISSCC 2014) that SNN papers commonly use, and every constant is configurable. Counts are
per inference over the real (non-padding) tokens unless ``count_padding``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

from .configuration_sorbet import SorbetConfig
from .modeling import SorbetForSequenceClassification, reset_spike_state

__all__ = ["EnergyConstants", "ann_macs", "convention_energy", "energy_report"]


@dataclass(frozen=True)
class EnergyConstants:
    """Energy per operation in pJ (defaults: 45 nm, Horowitz 2014; the shift cost is an assumption,
    set equal to a 32-bit integer add)."""

    e_mac_fp32: float = 4.6
    e_ac: float = 0.9
    e_add_fp32: float = 0.9
    e_mult_fp32: float = 3.7
    e_add_int: float = 0.1
    e_shift: float = 0.1

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not value >= 0:
                raise ValueError(f"EnergyConstants.{name} must be >= 0, got {value}")

    def scaled(self, factor: float) -> EnergyConstants:
        return EnergyConstants(**{k: v * factor for k, v in asdict(self).items()})


@dataclass
class _Ops:
    ac: float = 0.0
    shift: float = 0.0
    add_int: float = 0.0
    mac_fp: float = 0.0
    add_fp: float = 0.0
    mult_fp: float = 0.0

    def energy(self, c: EnergyConstants) -> float:
        return (
            c.e_ac * self.ac
            + c.e_shift * self.shift
            + c.e_add_int * self.add_int
            + c.e_mac_fp32 * self.mac_fp
            + c.e_add_fp32 * self.add_fp
            + c.e_mult_fp32 * self.mult_fp
        )


@dataclass
class _Components:
    parts: dict[str, _Ops] = field(default_factory=dict)

    def __getitem__(self, key: str) -> _Ops:
        return self.parts.setdefault(key, _Ops())


def ann_macs(config: Any, lengths: Tensor, num_labels: int | None = None) -> dict[str, float]:
    """MACs of the full-precision BERT per inference, averaged over samples of the given lengths:
    Q, K, V, O ``4 L H^2``; ``QK^T`` and ``PV`` ``L^2 H`` each; FFN ``2 L H I`` per layer; pooler
    ``H^2``; classifier ``H C``."""
    h, i, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    c = num_labels or config.num_labels
    lens = lengths.to(torch.float64)
    per_layer = {
        "linear": float((4 * lens * h * h + 2 * lens * h * i).mean()),
        "attention": float((2 * lens * lens * h).mean()),
    }
    return {
        "encoder_linear": n * per_layer["linear"],
        "encoder_attention": n * per_layer["attention"],
        "pooler": float(h * h),
        "classifier": float(h * c),
    }


def energy_report(
    snn: SorbetForSequenceClassification,
    batches: Any,
    constants: EnergyConstants | None = None,
    *,
    count_padding: bool = False,
) -> dict[str, Any]:
    """Run ``snn`` (from :func:`~sorbet_snn.to_snn`) on ``batches`` (an iterable of dicts with
    ``input_ids``, ``attention_mask``, ``token_type_ids``), record its spikes and return per-component
    op counts and energies (pJ per inference), firing rates, E_ANN, E_SNN and their ratio, and under
    ``"convention"`` the same spikes counted by the SNN literature's convention
    (:func:`convention_energy`)."""
    constants = constants or EnergyConstants()
    recorder = getattr(snn, "spike_recorder", None)
    if recorder is None:
        raise ValueError("energy_report needs a spiking model: call to_snn(model) first")
    cfg: SorbetConfig = snn.config
    reset_spike_state(snn)
    lengths: list[Tensor] = []
    device = next((p.device for p in snn.parameters()), torch.device("cpu"))
    with torch.no_grad():
        for batch in batches:
            batch = {k: v.to(device) for k, v in batch.items()}
            mask = batch["attention_mask"]
            if count_padding:
                mask = torch.ones_like(mask)
            snn(batch["input_ids"], mask, batch.get("token_type_ids"))
            lengths.append(mask.sum(dim=1))
    if not lengths:
        raise ValueError("energy_report got no batches")
    lens = torch.cat(lengths).to(torch.float64)
    samples = float(lens.numel())
    h, i, n = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    a, g = cfg.num_attention_heads, cfg.groups_resolved
    tokens = float(lens.sum()) / samples  # mean real tokens per inference
    rows_sq = float((lens * lens).sum()) / samples  # mean L^2
    comp = _Components()
    weight_scale = "shift" if cfg.pot_weight_scale else "mult_fp"
    for r in recorder.records:
        if r["kind"] == "linear":
            ops = comp["linear_acs"]
            ops.ac += r["acs"] / samples
            resc = comp["rescale"]
            outputs = r["outputs"] / samples
            resc.add_int += outputs  # offset fold (and bias) per output
            resc.shift += outputs  # PoT activation step
            if weight_scale == "shift":
                resc.shift += outputs
            else:
                resc.mult_fp += outputs  # the non-PoT BWN scale m
        elif r["kind"] == "qk":
            comp["attention_acs"].ac += r["acs"] / samples
        elif r["kind"] == "pv":
            comp["attention_acs"].ac += r["acs"] / samples
    # offset row sums of K (the signed Q encoding): A L d adds per layer
    comp["attention_acs"].add_int += n * tokens * h
    # softmax / normalisation
    if cfg.softmax == "ptsoftmax":
        ops = comp["ptsoftmax"]
        # per row of length L: L adds (ceil), L-1 compares, L shifts, L-1 adds, 1 NPoT, L shifts
        ops.add_int += n * a * (3 * rows_sq - tokens)
        ops.shift += n * a * 2 * rows_sq
    else:
        ops = comp["softmax_fp"]
        ops.mult_fp += n * a * rows_sq * 2  # exp (counted as 1 mult) + divide per element
        ops.add_fp += n * a * rows_sq
    if cfg.norm == "bspn":
        ops = comp["bspn"]
        per_token = 2 * n * tokens
        ops.add_int += per_token * (
            4 * h + g
        )  # residual, group |x| sums, beta, output PoT, group PoT
        ops.shift += per_token * 2 * h  # group scaling, PoT k
    else:
        ops = comp["layernorm_fp"]
        ops.mac_fp += 2 * n * tokens * h
        ops.add_fp += 2 * n * tokens * 5 * h  # residual + 4H (mean, var, centre, beta)
    if cfg.ffn_act == "relu":
        comp["relu"].add_int += n * tokens * i
    emb = comp["embedding_classifier_fp"]
    emb.add_fp += tokens * 2 * h
    if cfg.embedding_norm == "layernorm":
        emb.mac_fp += tokens * h
        emb.add_fp += tokens * 4 * h
    else:
        emb.add_int += tokens * (4 * h + g)
        emb.shift += tokens * 2 * h
    emb.mac_fp += h * int(cfg.num_labels or 1)
    components = {
        name: {**asdict(ops), "energy_pJ": ops.energy(constants)}
        for name, ops in comp.parts.items()
    }
    e_snn = sum(c["energy_pJ"] for c in components.values())
    macs = ann_macs(cfg, lens)
    total_macs = sum(macs.values())
    e_ann = constants.e_mac_fp32 * total_macs
    spikes = sum(r["spikes"] for r in recorder.records)
    neurons = sum(r["neurons"] for r in recorder.records)
    rates = recorder.rates()
    spike_settings: Any = snn.spike_settings
    report = {
        "samples": int(samples),
        "mean_tokens": tokens,
        "time_steps": spike_settings.time_steps,
        "signed_encoding": spike_settings.signed_encoding,
        "constants_pJ": asdict(constants),
        "constants_source": "45 nm CMOS (Horowitz, ISSCC 2014); e_shift assumed = e_add_int",
        "firing_rate": spikes / neurons if neurons else 0.0,
        "firing_rates": rates,
        "components": components,
        "ann_macs": macs,
        "ann_macs_total": total_macs,
        "e_ann_pJ": e_ann,
        "e_snn_pJ": e_snn,
        "energy_ratio": e_ann / e_snn if e_snn else float("inf"),
    }
    report["convention"] = convention_energy(report, constants)
    return report


def convention_energy(
    report: dict[str, Any], constants: EnergyConstants | None = None
) -> dict[str, Any]:
    """The synaptic-operation convention of SNN energy estimates (Spikformer/SpikeLM style, the
    convention the ``e_ac`` constant comes from), recomputed from an :func:`energy_report`.

    The paper's own formula and constants are not public with it; this is the usual one:

    - ``E_ANN = e_mac * MACs`` (Linear and attention products only, as in ours);
    - ``E_SNN = e_ac * SOPs + e_mac * FP MACs``, where ``SOPs = sum_l fr_l * T * MACs_l`` over the
      spiking products (fr_l = spikes / (T * neurons), measured), which is exactly the spike-triggered
      accumulates ``spikes x fan-out`` that :func:`energy_report` counts; only the classifier's
      FP MACs are added. Nothing else counts: no rescale, softmax, normalisation, embedding add,
      offset fold or membrane update (all counted in ours).

    Also returned: ``acs_per_mac`` (spike-triggered accumulates per MAC they replace, i.e. the mean
    number of spikes an input element fires, fr * T) and the break-even ``e_mac / e_ac`` (the SNN
    costs less than the ANN under this convention iff ``acs_per_mac`` is below it);
    ``energy_ratio_one_step`` is the same ratio if the firing rate were applied to one time step
    instead of T (a reading of "firing rate x MACs" sometimes used; not established for this paper).
    """
    c = constants or EnergyConstants(**report["constants_pJ"])
    comp = report["components"]
    acs = comp.get("linear_acs", {}).get("ac", 0.0) + comp.get("attention_acs", {}).get("ac", 0.0)
    macs = report["ann_macs"]
    classifier = float(macs["classifier"])
    spiking_macs = report["ann_macs_total"] - classifier
    e_ann = c.e_mac_fp32 * report["ann_macs_total"]
    e_snn = c.e_ac * acs + c.e_mac_fp32 * classifier
    big_t = report["time_steps"]
    e_one = c.e_ac * acs / big_t + c.e_mac_fp32 * classifier
    return {
        "convention": "E_ANN = e_mac * MACs; E_SNN = e_ac * SOPs (+ classifier FP MACs), "
        "SOPs = sum_l fr_l * T * MACs_l",
        "constants_pJ": {"e_mac_fp32": c.e_mac_fp32, "e_ac": c.e_ac},
        "sops": acs,
        "spiking_macs": spiking_macs,
        "acs_per_mac": acs / spiking_macs if spiking_macs else 0.0,
        "break_even_acs_per_mac": c.e_mac_fp32 / c.e_ac if c.e_ac else float("inf"),
        "e_ann_pJ": e_ann,
        "e_snn_pJ": e_snn,
        "energy_ratio": e_ann / e_snn if e_snn else float("inf"),
        "energy_ratio_one_step": e_ann / e_one if e_one else float("inf"),
    }
