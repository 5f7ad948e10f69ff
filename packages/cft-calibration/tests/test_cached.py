"""TopLayerScorer: the split model scores like the unsplit one; training touches only the top."""

import copy

import cft_calibration as C
import pytest
import torch
from cft_calibration.cached import HiddenSplit, TopLayerScorer


def _items():
    qs = [
        ("what does a plant need", ["light", "sand", "rock", "metal"], 0),
        ("which is a mammal", ["fish", "whale", "frog"], 1),
        ("the sun is a", ["planet", "moon", "star", "comet"], 2),
        ("water freezes at zero degrees on which scale", ["kelvin", "celsius", "none", "all"], 1),
        ("a magnet attracts", ["wood", "iron", "glass", "paper"], 1),
    ]
    return [C.MCItem(f"q{i}", q, c, a) for i, (q, c, a) in enumerate(qs)]


@pytest.fixture(scope="module")
def tiny_mc():
    from cft_calibration.tiny import tiny_mc_model

    texts = [it.question + " " + " ".join(it.choices) for it in _items()]
    return tiny_mc_model(texts, layers=3, hidden=32, heads=2)


@pytest.mark.parametrize("train_layers", [1, 2, 3])
def test_split_model_gives_the_unsplit_model_logits(tiny_mc, train_layers):
    model, tok = tiny_mc
    full = C.predict(C.MCScorer(model, tok, max_length=32), _items(), 2)
    s = TopLayerScorer(model, tok, train_layers=train_layers, max_length=32)
    cache = s.encode(_items(), batch_size=2)  # batches of different lengths, padded on concat
    assert isinstance(cache, HiddenSplit) and len(cache) == 5
    got = C.predict(s, cache, 3)
    assert torch.equal(got[1], full[1]) and torch.equal(got[2], full[2])
    fin = full[1]
    assert torch.allclose(got[0][fin], full[0][fin], atol=1e-5)
    assert torch.isinf(got[0][1, 3])  # the absent 4th option of the 3-option question


def test_training_moves_only_the_top_and_deepcopy_shares_the_frozen_bottom(tiny_mc):
    model, tok = tiny_mc
    s = TopLayerScorer(model, tok, train_layers=1, max_length=32)
    cache = s.encode(_items())
    names = {n for n, _ in s.named_parameters()}
    assert all(n.split(".")[0] in {"top", "pooler", "classifier", "dropout"} for n in names)
    bottom_before = copy.deepcopy(s._bottom[0].state_dict())
    top_before = copy.deepcopy(s.state_dict())
    twin = copy.deepcopy(s)
    assert twin._bottom[0] is s._bottom[0]
    C.train(s, cache, C.TrainConfig(epochs=2, lr=1e-2, batch_size=2, select="last"))
    after = s._bottom[0].state_dict()
    assert all(torch.equal(bottom_before[k], after[k]) for k in after)
    assert any(not torch.equal(top_before[k], v) for k, v in s.state_dict().items())
    # the twin was copied before training: its top is unchanged
    assert all(torch.equal(top_before[k], v) for k, v in twin.state_dict().items())


def test_half_precision_cache_is_close_and_subset_keeps_rows(tiny_mc):
    model, tok = tiny_mc
    s32 = TopLayerScorer(model, tok, train_layers=1, max_length=32)
    s16 = TopLayerScorer(model, tok, train_layers=1, max_length=32, cache_dtype=torch.float16)
    c32, c16 = s32.encode(_items()), s16.encode(_items())
    assert c16.hidden.dtype == torch.float16
    a, b = C.predict(s32, c32)[0], C.predict(s16, c16)[0]
    fin = torch.isfinite(a)
    assert torch.allclose(a[fin], b[fin], atol=1e-2)
    sub = c32.subset([4, 0])
    assert sub.labels.tolist() == [1, 0]
    assert torch.allclose(C.predict(s32, sub)[0], a[[4, 0]])


def test_bad_arguments_name_themselves(tiny_mc):
    model, tok = tiny_mc
    with pytest.raises(ValueError, match="train_layers must be in"):
        TopLayerScorer(model, tok, train_layers=4)
    with pytest.raises(ValueError, match="BertForMultipleChoice-like"):
        TopLayerScorer(torch.nn.Linear(2, 2), tok)
