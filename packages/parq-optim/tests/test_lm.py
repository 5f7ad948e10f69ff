"""Character-level text data and the language-model QAT protocol (parq_optim.text, .lm)."""

import math
import os
from pathlib import Path

import pytest
import torch
from parq_optim import nearest
from parq_optim.lm import (
    LMConfig,
    LMConfigError,
    build_lm,
    evaluate_lm,
    lm_quant_groups,
    load_lm_checkpoint,
    save_lm_checkpoint,
    storage_report,
    train_lm,
)
from parq_optim.models import CharTransformer
from parq_optim.optim import quant_view
from parq_optim.text import (
    eval_windows,
    load_text,
    make_corpus,
    random_windows,
    unigram_loss,
)

SHARED = Path(
    os.environ.get("ICML25_DATA", Path(__file__).resolve().parents[4] / "shared" / "data")
)
SHAKESPEARE = SHARED / "tinyshakespeare" / "input.txt"


def markov_text(n=6000, seed=0):
    """An order-1 chain over 8 letters: letter i is followed by letter i+1 or i+3 (mod 8) with
    equal probability (entropy rate log 2; every letter equally frequent: unigram loss log 8)."""
    g = torch.Generator().manual_seed(seed)
    draws = torch.randint(0, 2, (n,), generator=g).tolist()
    ids = [0]
    for d in draws[1:]:
        ids.append((ids[-1] + (1 if d == 0 else 3)) % 8)
    return "".join("abcdefgh"[i] for i in ids)


TINY = {"d_model": 16, "n_layers": 1, "n_heads": 2, "context": 16, "batch_size": 16}


def test_splits_are_contiguous_pieces_in_order_and_vocab_is_sorted():
    text = markov_text(2000)
    c = make_corpus(text, val_frac=0.1, test_frac=0.05)
    assert (len(c.train), len(c.val), len(c.test)) == (1700, 200, 100)
    assert c.decode(torch.cat([c.train, c.val, c.test])) == text
    assert c.vocab == "".join(sorted(set(text)))


def test_unigram_loss_matches_the_hand_computed_value():
    text = "ab" * 600 + "aaab" * 50 + "b" * 200  # train is the first 90%
    c = make_corpus(text, val_frac=0.05, test_frac=0.05)
    train = c.decode(c.train)
    na, nb = train.count("a"), train.count("b")
    pa, pb = (na + 1) / (na + nb + 2), (nb + 1) / (na + nb + 2)
    val = c.decode(c.val)
    expected = -(val.count("a") * math.log(pa) + val.count("b") * math.log(pb)) / len(val)
    assert unigram_loss(c, "val") == pytest.approx(expected, rel=1e-12)


def test_windows_hold_next_character_targets():
    ids = torch.arange(100)
    x, y = random_windows(ids, 8, 5, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 8) and torch.equal(y, x + 1)
    x, y = eval_windows(ids, 10)
    assert x.shape == (9, 10) and torch.equal(x[:, 0], torch.arange(0, 90, 10))
    assert torch.equal(y, x + 1)
    assert eval_windows(ids, 10, max_windows=3)[0].shape == (3, 10)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "empty"),
        (b"abc\x00def" * 100, "NUL"),
        (b"caf\xe9 " * 100, "not UTF-8"),
        (b"too short", "too few"),
    ],
)
def test_load_text_rejects_bad_files_naming_them(tmp_path, content, match):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=match) as e:
        load_text(path)
    assert "bad.txt" in str(e.value)


def test_transformer_is_causal():
    torch.manual_seed(0)
    m = CharTransformer(10, context=12, d_model=16, n_layers=2, n_heads=4)
    x = torch.randint(0, 10, (2, 12))
    x2 = x.clone()
    x2[:, 7:] = (x2[:, 7:] + 3) % 10
    with torch.no_grad():
        a, b = m(x), m(x2)
    assert torch.equal(a[:, :7], b[:, :7]) and not torch.allclose(a[:, 7:], b[:, 7:])
    with pytest.raises(ValueError, match="exceeds the context"):
        m(torch.zeros(1, 13, dtype=torch.long))


def test_only_block_linear_weights_are_quantized():
    m = CharTransformer(10, context=8, d_model=16, n_layers=2, n_heads=2)
    groups = lm_quant_groups(m, 2)
    names = {id(p): n for n, p in m.named_parameters()}
    quantized = sorted(names[id(p)] for p in groups[0]["params"])
    assert groups[0]["quant_bits"] == 2
    assert quantized == sorted(
        f"blocks.{i}.{k}.weight" for i in range(2) for k in ("qkv", "proj", "fc", "out")
    )
    assert all("quant_bits" not in g for g in lm_quant_groups(m, None))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("n_heads", 3, "divisor of d_model"),
        ("bits", 9, ">= 0 and <= 8"),
        ("lr", 0.0, "> 0"),
        ("method", "adam", "one of"),
        ("block_size", 5, "per_channel"),
    ],
)
def test_config_errors_name_the_field(field, value, match):
    cfg = LMConfig(**{**TINY, field: value})
    with pytest.raises(LMConfigError, match=match) as e:
        cfg.validate()
    assert e.value.field == field


def test_parq_lm_run_ends_quantized_below_the_unigram_loss(tmp_path):
    corpus = make_corpus(markov_text(), name="markov")
    cfg = LMConfig(method="parq", bits=2, steps=80, lr=1e-2, eval_every=40, **TINY)
    r = train_lm(cfg, corpus)
    opt, model = r["optimizer"], r["model"]
    assert r["quantized_fraction_end"] == 1.0
    for g in opt.regularized_param_groups():
        for p in g["params"]:  # each weight takes at most |Q| = 4 values (after snapping)
            view, dim = quant_view(p.detach(), None, False)
            assert nearest(opt.state[p]["quants"], view, dim).unique().numel() <= 4
    # entropy rate log 2 = 0.69 nats; unigram about log 8 = 2.08
    assert unigram_loss(corpus, "val") > 2.0
    assert r["val_loss"] < unigram_loss(corpus, "val") - 0.5
    assert [h["step"] for h in r["history"]] == [40, 80]
    # exported storage: 2 code bits + one 4-level float32 table per tensor
    st = r["storage"]
    n = st["quantized_params"]
    assert n == sum(p.numel() for g in opt.regularized_param_groups() for p in g["params"])
    assert st["bits_per_weight"] == pytest.approx((2 * n + 32 * 4 * 4) / n)
    assert storage_report(model, opt) == st
    # checkpoint round trip: the same model and optimizer state
    path = save_lm_checkpoint(tmp_path / "lm.pt", cfg, corpus, model, opt)
    cfg2, vocab, model2, opt2 = load_lm_checkpoint(path)
    assert vocab == corpus.vocab and cfg2.steps == cfg.steps
    assert evaluate_lm(model2, corpus.val, 16) == evaluate_lm(model, corpus.val, 16)
    assert opt2.num_steps == opt.num_steps == 80


def test_full_precision_lm_run_is_deterministic_under_a_seed():
    corpus = make_corpus(markov_text(3000), name="markov")
    cfg = LMConfig(method="fp", steps=10, eval_every=10, **TINY)
    a, b = train_lm(cfg, corpus), train_lm(cfg, corpus)
    assert a["val_loss"] == b["val_loss"] and "storage" not in a
    _, opt, _ = build_lm(cfg, corpus.vocab_size)
    assert type(opt).__name__ == "AdamW"


@pytest.mark.dataset
@pytest.mark.skipif(
    not SHAKESPEARE.is_file(), reason=f"tiny Shakespeare not found at {SHAKESPEARE}"
)
def test_tiny_shakespeare_loads_with_its_documented_shape():
    c = load_text(SHAKESPEARE)
    assert c.vocab_size == 65 and len(c.train) + len(c.val) + len(c.test) == 1_115_394
    assert 3.0 < unigram_loss(c, "val") < 3.6  # nats/char; about 4.8 bits
