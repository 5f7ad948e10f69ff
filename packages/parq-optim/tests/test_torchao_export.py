"""Export to torchao's quantized tensor subclasses (parq_optim.torchao_convert): the converted
model computes exactly what the dequantized model (the package's own format, loaded back) does."""

import copy
import warnings

import pytest
import torch
from parq_optim import (
    LSBQuantizer,
    MaxUnifQuantizer,
    ProxHardQuant,
    ProxPARQ,
    QuantOptimizer,
    TernaryUnifQuantizer,
    UnifQuantizer,
    load_quantized,
    quant_param_groups,
    save_quantized,
    torchao_convert,
)
from parq_optim.export import affine_grid
from torch import nn

pytestmark = pytest.mark.reference

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    pytest.importorskip("torchao.quantization.quantize_.workflows")
    pytest.importorskip("torchao.prototype.quantization.codebook_coreml.codebook_quantized_tensor")

CASES = [  # quantizer, bits, per-channel, block size, expected format
    (UnifQuantizer(), 2, True, None, "intx"),
    (UnifQuantizer(), 3, False, None, "intx"),
    (UnifQuantizer(), 4, True, 8, "intx"),
    (UnifQuantizer(), 1, True, None, "intx"),
    (MaxUnifQuantizer(), 3, True, None, "intx"),
    (TernaryUnifQuantizer(), 0, False, None, "intx"),
    (LSBQuantizer(), 2, True, None, "codebook"),
    (LSBQuantizer(), 3, False, None, "codebook"),
    (LSBQuantizer(), 3, True, 4, "codebook"),
    (LSBQuantizer(), 0, True, None, "intx"),  # simple ternary levels (-v, 0, v): a grid
]


def trained(quantizer, bits, per_channel, block, prox=None, steps=4):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 16), nn.Linear(16, 24), nn.GELU(), nn.Linear(24, 5))
    groups = quant_param_groups(model, bits, block_size=block, include=(nn.Linear, nn.Embedding))
    opt = QuantOptimizer(
        torch.optim.AdamW(groups, lr=0.01),
        quantizer,
        prox or ProxHardQuant(),
        quant_per_channel=per_channel,
    )
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randint(0, 10, (4, 3), generator=g)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return model, opt


@pytest.mark.parametrize(("quantizer", "bits", "per_channel", "block", "kind"), CASES, ids=str)
def test_converted_model_outputs_equal_the_dequantized_models(
    tmp_path, quantizer, bits, per_channel, block, kind
):
    model, opt = trained(quantizer, bits, per_channel, block)
    dequantized = copy.deepcopy(model)
    save_quantized(model, opt, tmp_path / "m.pt")
    load_quantized(tmp_path / "m.pt", dequantized)
    report = torchao_convert(model, opt)
    assert report == {"0.weight": kind, "1.weight": kind, "3.weight": kind}
    assert type(model[1].weight).__name__ in ("IntxUnpackedToInt8Tensor", "CodebookQuantizedTensor")
    x = torch.randint(0, 10, (6, 3), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(model(x), dequantized(x))  # bitwise: the same weights Q[code]
        for i in (1, 3):
            assert torch.equal(model[i].weight.dequantize(), dequantized[i].weight)


def test_codebook_format_is_used_on_request_and_also_exact(tmp_path):
    model, opt = trained(UnifQuantizer(), 2, True, None)
    dequantized = copy.deepcopy(model)
    save_quantized(model, opt, tmp_path / "m.pt")
    load_quantized(tmp_path / "m.pt", dequantized)
    assert set(opt.torchao_convert(model, prefer_affine=False).values()) == {"codebook"}
    x = torch.randint(0, 10, (6, 3))
    with torch.no_grad():
        assert torch.equal(model(x), dequantized(x))


def test_mid_anneal_weights_are_converted_at_their_nearest_levels(tmp_path):
    # PARQ stopped inside the anneal window: the export uses nearest(Q, w), as save_quantized does
    model, opt = trained(UnifQuantizer(), 2, True, None, prox=ProxPARQ(0, 100), steps=5)
    assert opt.quantized_fraction() < 1.0
    dequantized = copy.deepcopy(model)
    save_quantized(model, opt, tmp_path / "m.pt")
    load_quantized(tmp_path / "m.pt", dequantized)
    torchao_convert(model, opt)
    x = torch.randint(0, 10, (6, 3))
    with torch.no_grad():
        assert torch.equal(model(x), dequantized(x))


def test_affine_grid_recovers_scale_and_rejects_non_grids():
    s = torch.tensor([0.3, 0.017]).unsqueeze(1)
    Q = torch.arange(-1.5, 2.0).unsqueeze(0) * s  # UnifQuantizer's 2-bit half-integer grid
    scale, zp = affine_grid(Q, 2)
    assert torch.equal(zp, torch.tensor([-0.5, -0.5]))
    k = torch.arange(4) - 2
    assert torch.equal((k - zp.unsqueeze(1)) * scale.unsqueeze(1), Q)
    assert affine_grid(torch.tensor([-1.0, -0.3, 0.3, 1.0]), 2) is None  # LSBQ-like, uneven
    assert affine_grid(torch.tensor([0.5]), 1) is None  # one level: no scale
