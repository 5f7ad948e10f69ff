import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from parq_optim import (
    LSBQuantizer,
    ProxHardQuant,
    ProxPARQ,
    QuantOptimizer,
    UnifQuantizer,
    load_quantized,
    quant_param_groups,
    save_quantized,
)
from parq_optim.export import pack_codes, unpack_codes
from torch import nn


def trained(bits=2, per_channel=False, prox=None, steps=6):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    opt = QuantOptimizer(
        torch.optim.SGD(quant_param_groups(m, bits), lr=0.05, momentum=0.9),
        UnifQuantizer() if bits else LSBQuantizer(),
        prox or ProxHardQuant(),
        quant_per_channel=per_channel,
    )
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(5, 1, 8, 8, generator=g), torch.randint(0, 3, (5,), generator=g)
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return m, opt


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 8), st.integers(0, 300), st.integers(0, 99))
def test_pack_unpack_roundtrip(nbits, n, seed):
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 2**nbits, (n,), generator=g)
    packed = pack_codes(codes, nbits)
    assert packed.numel() == (n * nbits + 7) // 8
    assert torch.equal(unpack_codes(packed, nbits, n), codes)


@pytest.mark.parametrize(("bits", "per_channel"), [(1, False), (2, True), (0, False), (4, True)])
def test_save_load_rebuilds_weights_and_keeps_latent(tmp_path, bits, per_channel):
    m, opt = trained(bits, per_channel)
    latents = {
        p: opt.state[p]["latent"].clone()
        for g in opt.regularized_param_groups()
        for p in g["params"]
    }
    entries = opt.export_quantized(m)
    assert set(entries) == {"0.weight", "2.weight"}
    m_levels = opt.quantizer.get_quant_size(bits)
    for e in entries.values():
        assert e["codes"].dtype == torch.uint8 and e["levels"].size(-1) == m_levels
    report = save_quantized(m, opt, tmp_path / "m.pt")
    for p, u in latents.items():
        assert torch.equal(opt.state[p]["latent"], u)  # latent weights unchanged by export
    m2 = trained(bits, per_channel, steps=0)[0]
    sd = load_quantized(tmp_path / "m.pt", m2)
    for (k, a), b in zip(m.state_dict().items(), m2.state_dict().values()):
        assert torch.equal(a, b), k
        assert torch.equal(sd[k], a)
    nbits = max(1, (m_levels - 1).bit_length())
    assert report["bits_per_weight"] >= nbits
    assert report["bits_per_weight"] < nbits + 1 if not per_channel else True
    assert report["file_bytes"] == (tmp_path / "m.pt").stat().st_size


def test_export_after_hard_quantize_distinct_equals_levels():
    m, opt = trained(2, prox=ProxPARQ(0, 1000), steps=4)
    assert m[2].weight.unique().numel() > 4
    opt.hard_quantize_()
    assert m[2].weight.unique().numel() == 4
    e = opt.export_quantized(m)["2.weight"]
    assert e["codes"].unique().numel() == 4


def test_load_rejects_foreign_file(tmp_path):
    torch.save({"a": 1}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="not a parq-optim quantized model"):
        load_quantized(tmp_path / "x.pt")


def test_torchao_convert_without_torchao_names_the_extra(monkeypatch):
    import sys

    from parq_optim import torchao_convert

    monkeypatch.setitem(sys.modules, "torchao.quantization.quantize_.workflows", None)
    m, opt = trained(steps=1)
    with pytest.raises(ImportError, match=r"parq-optim\[reference\]"):
        torchao_convert(m, opt)
