import cft_calibration as C
import pytest
import torch

pytest.importorskip("transformers")
from cft_calibration.tiny import tiny_causal_lm, tiny_mc_model


def items(n=6, k=4):
    words = ["apple", "dog", "red", "iron", "piano", "car"]
    return [
        C.MCItem(
            f"q{i}", f"Which word is number {i} ?", [words[(i + j) % 6] for j in range(k)], i % k
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny_lm():
    texts = [it.question + " " + " ".join(it.choices) for it in items()]
    return tiny_causal_lm(texts, seed=0)


def test_letters_resolve_to_distinct_single_tokens(tiny_lm):
    model, tok = tiny_lm
    s = C.LetterScorer(model, tok)
    assert len(set(s.letter_ids)) == 4
    assert tok.convert_ids_to_tokens(s.letter_ids) == ["A", "B", "C", "D"]


def test_left_and_right_padding_give_identical_probabilities(tiny_lm):
    model, tok = tiny_lm
    long = C.MCItem(
        "long",
        "Which word is the longest question of all of them here ?",
        ["dog", "car", "red", "iron"],
        1,
    )
    data = [*items(6), long]
    probs = {}
    for side in ("left", "right"):
        s = C.LetterScorer(model, tok, padding_side=side)
        z, _, _ = C.predict(s, data, batch_size=7)
        probs[side] = torch.softmax(z, -1)
    assert torch.allclose(probs["left"], probs["right"], atol=1e-5)
    # and equal to scoring each item alone (no padding at all)
    s = C.LetterScorer(model, tok)
    alone = torch.cat([torch.softmax(C.predict(s, [it], 1)[0], -1) for it in data])
    assert torch.allclose(alone, probs["right"], atol=1e-5)


def test_scoring_picks_the_letter_with_the_highest_logit(tiny_lm):
    model, tok = tiny_lm
    model = __import__("copy").deepcopy(model)
    head = torch.nn.Linear(model.lm_head.in_features, model.lm_head.out_features, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
    model.lm_head = head
    s = C.LetterScorer(model, tok)
    with torch.no_grad():
        head.bias[s.letter_ids[2]] = 5.0  # C
        head.bias[s.letter_ids[1]] = 3.0  # B
        head.bias[tok.convert_tokens_to_ids("dog")] = (
            50.0  # a non-letter token: outside the restriction
        )
    z, _, _ = C.predict(s, items(4), 4)
    p = torch.softmax(z, -1)
    expected = torch.softmax(torch.tensor([0.0, 3.0, 5.0, 0.0]), -1)
    assert torch.equal(p.argmax(1), torch.full((4,), 2))
    assert torch.allclose(p, expected.expand(4, 4), atol=1e-6)


def test_completion_only_labels_mask_the_prompt_tokens():
    ids = torch.tensor([[5, 6, 7, 8, 0, 0], [0, 9, 9, 9, 9, 4]])
    attn = torch.tensor([[1, 1, 1, 1, 0, 0], [0, 1, 1, 1, 1, 1]])
    plen = torch.tensor([3, 4])
    labels = C.completion_only_labels(ids, attn, plen)
    assert labels.tolist() == [[-100, -100, -100, 8, -100, -100], [-100, -100, -100, -100, -100, 4]]


def test_lm_loss_is_the_full_vocabulary_ce_of_the_gold_letter(tiny_lm):
    model, tok = tiny_lm
    s = C.LetterScorer(model, tok, padding_side="left")
    data = items(5)
    with torch.no_grad():
        out = s(s.batch(data, range(5), with_answer=True))
    # the same from a plain forward of each prompt: -log softmax(full vocab)[letter of the answer]
    manual = []
    for it in data:
        ids = torch.tensor([s._ids(s.prompt(it))])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, -1]
        manual.append(-torch.log_softmax(logits, -1)[s.letter_ids[it.answer]])
    assert float(out.lm_loss) == pytest.approx(float(torch.stack(manual).mean()), abs=1e-5)
    # the option logits come from the same forward (one pass)
    plain = C.predict(s, data, 5)[0]
    assert torch.allclose(out.logits.detach(), plain, atol=1e-5)


class CharTokenizer:
    """A tokenizer that spells one letter as two pieces (to test the error)."""

    pad_token_id = 0
    eos_token_id = 0
    unk_token_id = None
    padding_side = "right"

    def __call__(self, text, add_special_tokens=True):
        ids = [ord(c) for c in text]
        if text.endswith("B"):
            ids = [*ids[:-1], 66, 1000]
        return {"input_ids": ids}

    def convert_ids_to_tokens(self, ids):
        return [chr(i) if i < 1000 else "<x>" for i in ids]


def test_multi_token_or_missing_letters_raise_naming_the_letter(tiny_lm):
    with pytest.raises(ValueError, match="letter 'B' is 2 tokens"):
        C.LetterScorer(torch.nn.Linear(1, 1), CharTokenizer())
    model, _ = tiny_lm
    with pytest.raises(ValueError, match=r"letter 'F' is not in the tokenizer's vocabulary"):
        # A-J are in the word vocabulary, so make F unknown by a tokenizer without it
        from cft_calibration.tiny import word_tokenizer

        t2 = word_tokenizer(["x"])
        vocab = t2.get_vocab()
        assert "F" in vocab
        C.LetterScorer(model, _without(t2, "F"), k=6)


def _without(tok, letter):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for w, i in tok.get_vocab().items() if w != letter}
    vocab = {w: j for j, (w, _) in enumerate(sorted(vocab.items(), key=lambda kv: kv[1]))}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=t, pad_token="[PAD]", unk_token="[UNK]")


def test_gpt2_letter_scorer_runs():
    texts = [it.question + " " + " ".join(it.choices) for it in items()]
    model, tok = tiny_causal_lm(texts, arch="gpt2", seed=1)
    z, _, _ = C.predict(C.LetterScorer(model, tok), items(), 3)
    assert z.shape == (6, 4) and torch.isfinite(z).all()


def test_mc_scorer_probabilities_sum_to_one_and_absent_options_get_zero():
    data = items(4, k=4) + items(2, k=3)
    texts = [it.question + " " + " ".join(it.choices) for it in data]
    model, tok = tiny_mc_model(texts)
    z, m, y = C.predict(C.MCScorer(model, tok, max_length=32), data, 3)
    p = torch.softmax(z, -1)
    assert p.shape == (6, 4)
    assert torch.allclose(p.sum(1), torch.ones(6), atol=1e-6)
    assert torch.all(p[4:, 3] == 0) and not m[4:, 3].any()
    metrics = C.evaluate_probs(p, y, mask=m)
    assert 0 <= metrics["conf_ece"] <= 1


def test_feature_scorer_shapes_and_mask():
    fs = C.FeatureScorer(8, hidden=16)
    x = torch.randn(5, 4, 8)
    mask = torch.ones(5, 4, dtype=torch.bool)
    mask[0, 3] = False
    out = fs((x, mask, torch.zeros(5, dtype=torch.long)))
    assert out.logits.shape == (5, 4) and out.logits[0, 3] == float("-inf")
    with pytest.raises(ValueError, match="features must be"):
        fs((torch.randn(5, 4, 7), mask, torch.zeros(5, dtype=torch.long)))


def test_pairs_whose_option_alone_is_too_long_fall_back_to_longest_first():
    from cft_calibration.scoring import encode_pairs
    from cft_calibration.tiny import word_tokenizer

    tok = word_tokenizer(["a b c"], pair_template=True)
    enc = encode_pairs(tok, ["a b", "a"], ["c " * 40, "b"], max_length=16)
    assert enc["input_ids"].shape[1] <= 16


def test_save_and_load_round_trip_gives_the_same_letter_logits(tiny_lm, tmp_path):
    from cft_calibration.hf import load_scorer, save_scorer

    model, tok = tiny_lm
    s = C.LetterScorer(model, tok)
    before = C.predict(s, items(), 3)[0]
    save_scorer(s, tmp_path / "m")
    loaded, info = load_scorer(tmp_path / "m")
    assert info["type"] == "causal-lm"
    assert torch.allclose(C.predict(loaded, items(), 3)[0], before, atol=1e-5)
