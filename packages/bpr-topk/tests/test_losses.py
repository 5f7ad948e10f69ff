import pytest
import torch
from bpr_topk import BPRLoss, DAMLLoss, TruncNormMixture, fit, make_synthetic7, nll_term


@pytest.fixture
def small():
    data = make_synthetic7(0, num_train=30, num_valid=10, num_test=10)
    return data


def _grads(model, loss, split, seed=0):
    torch.manual_seed(seed)
    model.zero_grad()
    out = loss(model, split.y, split.X, split.time)
    out.loss.backward()
    return [p.grad.clone() for p in model.parameters()], out


def test_daml_eps_zero_and_lambda_zero_give_nll_gradient(small):
    m = TruncNormMixture.official_init(0)
    ref, _ = _grads(m, DAMLLoss(5, objective="nll"), small.train)
    for loss in (DAMLLoss(5, eps=0.0), DAMLLoss(5, lam=0.0)):
        g, _ = _grads(m, loss, small.train)
        for a, b in zip(g, ref):
            assert torch.allclose(a, b, atol=1e-6)
    g, out = _grads(m, DAMLLoss(5, eps=0.0), small.train)
    assert torch.equal(out.hinge, torch.zeros_like(out.hinge))


def test_bpr_only_has_no_nll_term(small):
    m = TruncNormMixture.official_init(0)
    loss = BPRLoss(5, num_score_samples=10, num_perturb_samples=10)
    assert loss.nll_weight == 0.0 and loss.objective == "bpr"
    _, out = _grads(m, loss, small.train)
    bp = out.bpr[~out.bpr.isnan()]
    assert torch.allclose(out.loss, -bp.sum())  # hard forward: loss = −Σ_t BPR_t
    assert out.decision.sum(-1).eq(5).all()


def test_nll_term_reductions(small):
    m = TruncNormMixture.official_init(0)
    s = small.train
    mean = nll_term(m, s.y, s.X, s.time, "mean")
    total = nll_term(m, s.y, s.X, s.time, "sum")
    assert torch.allclose(mean * 7, total)


def test_fit_is_deterministic(small):
    def run():
        torch.manual_seed(0)
        m = TruncNormMixture.official_init(0)
        loss = DAMLLoss(
            5,
            num_score_samples=10,
            num_perturb_samples=10,
            generator=torch.Generator().manual_seed(0),
        )
        res = fit(
            m,
            small.train,
            small.valid,
            loss,
            epochs=6,
            lr=0.1,
            val_freq=3,
            val_samples=20,
            progress=False,
        )
        return res, m

    r1, m1 = run()
    r2, m2 = run()
    assert r1.history == r2.history
    for a, b in zip(m1.parameters(), m2.parameters()):
        assert torch.equal(a, b)


def _fit_history(small, objective):
    torch.manual_seed(0)
    m = TruncNormMixture.official_init(0)
    loss = DAMLLoss(
        5,
        objective=objective,
        num_score_samples=10,
        num_perturb_samples=10,
        denominator_offset=0.0,
        generator=torch.Generator().manual_seed(0),
    )
    res = fit(
        m,
        small.train,
        small.valid,
        loss,
        epochs=30,
        lr=0.1,
        val_freq=5,
        val_samples=50,
        progress=False,
        selection="last",
    )
    return res.history


def test_fit_improves_valid_nll_and_daml_improves_valid_bpr(small):
    """30 epochs from the official initialisation: NLL-only cuts the valid NLL (71 -> 31 here);
    DAML raises the valid BPR@5 (0.79 -> 0.88) above NLL-only's while its NLL also falls."""
    nll = _fit_history(small, "nll")
    assert nll[-1]["epoch"] == 30
    assert nll[-1]["valid_nll"] < 0.6 * nll[0]["valid_nll"]
    assert nll[-1]["loss"] < nll[1]["loss"]  # the training objective went down too
    daml = _fit_history(small, "daml")
    assert daml[-1]["valid_bpr"] > daml[0]["valid_bpr"] + 0.05
    assert daml[-1]["valid_bpr"] > nll[-1]["valid_bpr"]
    assert daml[-1]["valid_nll"] < daml[0]["valid_nll"]  # DAML keeps the likelihood term


def test_bad_loss_args():
    with pytest.raises(ValueError, match="objective must be"):
        DAMLLoss(5, objective="mse")
    with pytest.raises(ValueError, match="eps must be"):
        DAMLLoss(5, eps=1.5)
    with pytest.raises(ValueError, match=r"y must have shape \[T, S\]"):
        DAMLLoss(5)(TruncNormMixture(7), torch.zeros(7))


def test_synthetic7_direction_bpr_only_vs_nll_only():
    """Robust direction only (paper Sec. 5.1, Fig. 2): BPR-only reaches higher test BPR, NLL-only better NLL."""
    from bpr_topk.experiment import EvalConfig, TrainConfig, compare

    data = make_synthetic7(0, num_train=60, num_valid=20, num_test=60)
    cfg = TrainConfig(epochs=40, lr=0.1, num_score_samples=10, num_perturb_samples=20,
                      denominator_offset=0.0, val_samples=50)  # fmt: skip
    rows = compare(data, "truncnorm", 5, ["NLL-only", "BPR-only"], [0], cfg,
                   EvalConfig(trials=2, num_samples=200))  # fmt: skip
    by = {r["method"]: r for r in rows}
    assert by["BPR-only"]["bpr"] >= by["NLL-only"]["bpr"]
    assert by["NLL-only"]["nll"] < by["BPR-only"]["nll"]


@pytest.mark.parametrize("name", ["objective", "nll_weight", "eps", "lam"])
def test_bpr_loss_raises_on_arguments_it_would_ignore(name):
    value = {"objective": "daml", "nll_weight": 1.0, "eps": 0.9, "lam": 30.0}[name]
    with pytest.raises(TypeError, match=rf"BPRLoss does not use {name}: it is the BPR-only"):
        BPRLoss(5, **{name: value})
    BPRLoss(5, sigma=0.05, num_score_samples=3)  # the arguments it uses are passed through


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 0}, r"k must be an integer >= 1 \(the budget K\); got 0"),
        ({"k": 2.5}, "k must be an integer >= 1"),
        ({"k": True}, "k must be an integer >= 1"),
        ({"sigma": 0.0}, r"sigma must be a finite number > 0 \(noise std\); got 0.0"),
        ({"sigma": -0.1}, "sigma must be a finite number > 0"),
        ({"sigma": float("nan")}, "sigma must be a finite number > 0"),
        ({"noise": "uniform"}, "noise must be 'normal' or 'gumbel'; got 'uniform'"),
        ({"num_perturb_samples": 0}, "num_perturb_samples must be >= 1"),
        ({"score": "joint_site"}, "score must be 'joint' or 'per_site'"),
        ({"baseline": "mean"}, "baseline must be None or 'loo'"),
        ({"forward": "soft"}, "forward must be 'hard' or 'smoothed'"),
        ({"denominator_offset": -1.0}, "denominator_offset must be >= 0"),
    ],
)
def test_daml_loss_validates_its_arguments_when_built(kwargs, match):
    kwargs = {"k": 5, **kwargs}
    with pytest.raises(ValueError, match=match):
        DAMLLoss(**kwargs)
