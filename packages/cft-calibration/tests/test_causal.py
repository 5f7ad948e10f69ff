"""The causal-LM path end to end on a tiny decoder: base SFT -> real DPO -> TS / CFT / long SFT /
RCFT with LoRA (run_causal_lm)."""

import json
import math

import pytest
import torch

pytest.importorskip("peft")
from cft_calibration.causal import CAUSAL_METHODS, CausalLMConfig, run_causal_lm

TINY = dict(
    data="synthetic-category", max_questions=60, max_test=24, layers=1, hidden=16, heads=2,
    base_epochs=1, dpo_steps=2, cft_epochs=1, long_epochs=1, batch_size=16, lora_r=2,
    lora_alpha=4,
)  # fmt: skip


def test_smoke_every_stage_runs_on_a_tiny_decoder():
    res = run_causal_lm(CausalLMConfig(**TINY))
    assert tuple(res.methods) == CAUSAL_METHODS
    assert res.data["name"] == "synthetic-category" and res.data["sizes"]["test"] == 24
    m = res.methods
    assert all(0 <= m[k]["conf_ece"] <= 1 and m[k]["n"] == 24 for k in m)
    assert m["ts"]["accuracy"] == m["aligned"]["accuracy"]  # TS never changes a prediction
    # DPO starts at the reference: loss ln 2, margin 0 (dropout off in the policy)
    assert res.dpo["first"][0]["loss"] == pytest.approx(math.log(2), abs=1e-6)
    # CFT / long SFT / RCFT train LoRA adapters only, on top of the aligned weights
    for name in ("cft", "long_sft", "rcft"):
        model = res.scorers[name].model
        trainable = [n for n, p in model.named_parameters() if p.requires_grad]
        assert trainable and all("lora_" in n for n in trainable), name
    aligned = dict(res.scorers["aligned"].model.named_parameters())
    frozen = {
        n.replace("base_model.model.", "").replace(".base_layer", ""): p
        for n, p in res.scorers["rcft"].model.named_parameters()
        if not p.requires_grad
    }
    assert set(frozen) == set(aligned)
    assert all(torch.equal(frozen[n], aligned[n]) for n in aligned)
    json.dumps(res.as_dict())  # the result is plain data
    torch.manual_seed(123)  # a seed gives the same run, whatever the global RNG holds
    again = run_causal_lm(CausalLMConfig(**TINY))
    assert again.methods == res.methods


def test_bad_data_is_refused_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.delenv("ICML25_DATA", raising=False)
    from cft_calibration import ConfigError

    with pytest.raises(ConfigError, match="openbookqa") as err:
        run_causal_lm(CausalLMConfig(**{**TINY, "data": "openbookqa"}))
    assert err.value.field == "data"
    with pytest.raises(ConfigError) as err:
        run_causal_lm(CausalLMConfig(**{**TINY, "data": str(tmp_path)}))
    assert err.value.field == "data"
    with pytest.raises(ConfigError) as err:
        CausalLMConfig(max_questions=5)
    assert err.value.field == "max_questions"


@pytest.mark.slow
def test_dpo_makes_the_decoder_overconfident_and_ts_cft_rcft_bring_ece_down():
    """Mechanics and direction only: this decoder, trained from scratch on 160 questions, stays near
    chance accuracy (it carries no knowledge), so only calibration can move."""
    cfg = CausalLMConfig(
        **{**TINY, "max_questions": 400, "max_test": 200, "hidden": 32, "dpo_steps": 60,
           "base_epochs": 2, "cft_epochs": 3, "long_epochs": 3, "lr": 1e-2, "lora_r": 4,
           "lora_alpha": 8}
    )  # fmt: skip
    res = run_causal_lm(cfg)
    m = res.methods
    assert m["aligned"]["mean_confidence"] > m["base"]["mean_confidence"] + 0.05
    assert m["aligned"]["conf_ece"] > m["base"]["conf_ece"]
    assert res.dpo["last"][0]["margin"] > 0
    for name in ("ts", "cft", "rcft"):
        assert m[name]["conf_ece"] < m["aligned"]["conf_ece"], name
