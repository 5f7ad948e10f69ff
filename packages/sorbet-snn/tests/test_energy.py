import math

import pytest
import torch
from sorbet_snn import SorbetConfig
from sorbet_snn.energy import EnergyConstants, ann_macs
from sorbet_snn.modeling import QuantLinear, SpikeRecorder, SpikeSettings, _Spiking
from sorbet_snn.neuron import threshold
from transformers import BertConfig


def spiking_layer(levels):
    cfg = SorbetConfig(hidden_size=4, num_attention_heads=1, act_bits=2)
    layer = QuantLinear(4, 3, cfg, signed=False).eval()
    with torch.no_grad():
        layer.act_quant.alpha.fill_(1.0)
        layer.act_quant.initialized.fill_(True)
    rec = SpikeRecorder()
    layer.spiking = _Spiking(SpikeSettings(4, threshold(4)), rec)
    out = layer(levels)
    return layer, rec, out


def test_four_to_three_layer_counts_18_acs():
    _, rec, _ = spiking_layer(torch.tensor([[0.0, 1.0, 2.0, 3.0]]))
    (r,) = rec.records
    assert r["spikes"] == 6 and r["acs"] == 18 and r["outputs"] == 3
    c = EnergyConstants()
    rescale = 3 * (c.e_add_int + c.e_shift + c.e_mult_fp32)
    energy = r["acs"] * c.e_ac + rescale
    assert abs(energy - (18 * 0.9 + 3 * (0.1 + 0.1 + 3.7))) < 1e-12


def test_ann_reference_layer_is_12_macs():
    cfg = BertConfig(hidden_size=4, intermediate_size=3, num_hidden_layers=1, num_labels=2)
    macs = ann_macs(cfg, torch.tensor([1.0]))
    # one token: Q, K, V, O are 4 x 16 MACs, the 4 -> 3 FFN-in and 3 -> 4 FFN-out layers 12 each
    assert macs["encoder_linear"] == 4 * 16 + 12 + 12
    assert macs["classifier"] == 8 and macs["pooler"] == 16


def test_bert_base_mac_identity():
    cfg = BertConfig()  # H 768, I 3072, N 12
    macs = ann_macs(cfg, torch.tensor([128.0]))
    assert macs["encoder_linear"] + macs["encoder_attention"] == 11_173_625_856


def test_all_zero_unsigned_input_has_no_spikes():
    _, rec, _ = spiking_layer(torch.zeros(2, 4))
    (r,) = rec.records
    assert r["spikes"] == 0 and r["acs"] == 0 and r["outputs"] == 6


def test_constants_scale_energies_and_keep_ratio(tiny_snn_report):
    base, doubled = tiny_snn_report
    assert abs(doubled["e_snn_pJ"] - 2 * base["e_snn_pJ"]) < 1e-6 * base["e_snn_pJ"]
    assert abs(doubled["e_ann_pJ"] - 2 * base["e_ann_pJ"]) < 1e-6 * base["e_ann_pJ"]
    assert abs(doubled["energy_ratio"] - base["energy_ratio"]) < 1e-9
    assert base["e_snn_pJ"] > 0 and 0 < base["firing_rate"] < 1


@pytest.mark.reference
def test_linear_macs_within_thop_total():
    thop = pytest.importorskip("thop")
    from transformers import BertModel

    cfg = BertConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, vocab_size=50)  # fmt: skip
    model = BertModel(cfg).eval()
    ids = torch.randint(1, 50, (1, 10))
    macs, _ = thop.profile(model, inputs=(ids,), verbose=False)
    ours = ann_macs(cfg, torch.tensor([10.0]))
    linear = ours["encoder_linear"] + ours["pooler"]
    assert linear <= macs  # thop also counts the attention products and norms it knows


def _hand_report(acs: float, attention_acs: float, time_steps: int = 4) -> dict:
    return {
        "constants_pJ": {
            "e_mac_fp32": 4.6,
            "e_ac": 0.9,
            "e_add_fp32": 0.9,
            "e_mult_fp32": 3.7,
            "e_add_int": 0.1,
            "e_shift": 0.1,
        },
        "components": {"linear_acs": {"ac": acs}, "attention_acs": {"ac": attention_acs}},
        "ann_macs": {
            "encoder_linear": 12.0,
            "encoder_attention": 0.0,
            "pooler": 0.0,
            "classifier": 8.0,
        },
        "ann_macs_total": 20.0,
        "time_steps": time_steps,
    }


def test_convention_energy_closed_form():
    from sorbet_snn.energy import convention_energy

    # the 4 -> 3 layer fed levels [0, 1, 2, 3] at T = 4: 6 spikes x 3 outputs = 18 SOPs for 12 MACs
    conv = convention_energy(_hand_report(18.0, 0.0))
    assert conv["sops"] == 18 and conv["spiking_macs"] == 12 and conv["acs_per_mac"] == 1.5
    assert math.isclose(conv["e_snn_pJ"], 0.9 * 18 + 4.6 * 8)  # SOPs + the FP classifier
    assert math.isclose(conv["e_ann_pJ"], 4.6 * 20)
    assert math.isclose(conv["energy_ratio"], 4.6 * 20 / (0.9 * 18 + 4.6 * 8))
    assert math.isclose(conv["energy_ratio_one_step"], 4.6 * 20 / (0.9 * 18 / 4 + 4.6 * 8))
    assert math.isclose(conv["break_even_acs_per_mac"], 4.6 / 0.9)
    # without a classifier the ratio is e_mac / (e_ac * spikes per input element)
    bare = _hand_report(18.0, 0.0)
    bare["ann_macs"]["classifier"], bare["ann_macs_total"] = 0.0, 12.0
    assert math.isclose(convention_energy(bare)["energy_ratio"], 4.6 / (0.9 * 1.5))


def test_convention_counts_a_subset_of_ours(tiny_snn_report):
    from sorbet_snn.energy import convention_energy

    base, _ = tiny_snn_report
    conv = convention_energy(base)
    acs = base["components"]["linear_acs"]["ac"] + base["components"]["attention_acs"]["ac"]
    assert conv["sops"] == acs and conv["e_ann_pJ"] == base["e_ann_pJ"]
    assert conv["e_snn_pJ"] < base["e_snn_pJ"]  # ours adds rescales, norms, softmax, offsets
    assert conv["energy_ratio"] > base["energy_ratio"]
    assert conv["energy_ratio_one_step"] > conv["energy_ratio"]
