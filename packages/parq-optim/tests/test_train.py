"""TrainConfig validation, the divergence guard and checkpoints (``parq_optim.train``)."""

import hashlib
from dataclasses import replace

import pytest
import torch
from parq_optim.data import Split, make_synthetic
from parq_optim.train import (
    ConfigError,
    Diverged,
    TrainConfig,
    build,
    load_checkpoint,
    save_checkpoint,
    train,
)


def small_data():
    return make_synthetic(seed=0, n_train=128, n_test=32)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("method", "magic"),
        ("model", "resnet"),
        ("optimizer", "lbfgs"),
        ("quantizer", "nope"),
        ("bits", -1),
        ("bits", 99),
        ("bits", 1.5),
        ("hidden", 0),
        ("epochs", 0),
        ("batch_size", 0),
        ("quant_period", 0),
        ("warmup_steps", -1),
        ("block_size", 0),
        ("lr", -1.0),
        ("lr", float("nan")),
        ("weight_decay", -1e-4),
        ("momentum", 1.0),
        ("steepness", 0.0),
        ("anneal_end_frac", 0.0),
        ("anneal_end_frac", 1.5),
    ],
)
def test_validate_names_the_field(field, value):
    cfg = replace(TrainConfig(), **{field: value})
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert err.value.field == field and field in str(err.value)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"quantizer": "unif", "bits": 0}, "bits"),
        ({"quantizer": "maxunif", "bits": 1}, "bits"),
        ({"quantizer": "ternary", "bits": 2}, "bits"),
        ({"quantizer": "lsbq-optimal", "bits": 3}, "bits"),
        ({"block_size": 4}, "block_size"),
    ],
)
def test_validate_rejects_combinations(changes, field):
    with pytest.raises(ConfigError) as err:
        replace(TrainConfig(), **changes).validate()
    assert err.value.field == field


def test_check_data_rejects_cnn_on_flat_features_and_bad_blocks():
    flat = Split(
        torch.zeros(4, 6), torch.zeros(4).long(), torch.zeros(2, 6), torch.zeros(2).long(), 2
    )
    with pytest.raises(ConfigError, match="needs image data") as err:
        TrainConfig(model="cnn").check_data(flat)
    assert err.value.field == "model"
    with pytest.raises(ConfigError, match="n_features = 6") as err:
        TrainConfig(block_size=4, per_channel=True, hidden=16).check_data(flat)
    assert err.value.field == "block_size"
    TrainConfig(block_size=2, per_channel=True, hidden=16).check_data(flat)  # 2 divides 6 and 16


def test_a_diverging_run_raises_instead_of_returning_nan_weights():
    with pytest.raises(Diverged, match="loss nan") as err:
        train(TrainConfig(lr=1e6, epochs=3, hidden=16), make_synthetic(n_train=512, n_test=32))
    assert err.value.epoch >= 1 and err.value.step >= 1


def trained(tmp_path, **changes):
    cfg = TrainConfig(hidden=8, epochs=1, **changes)
    data = small_data()
    r = train(cfg, data)
    path = save_checkpoint(tmp_path / "ckpt.pt", cfg, data, r["model"], r["optimizer"])
    return cfg, data, r, path


def test_checkpoint_round_trip(tmp_path):
    cfg, _, r, path = trained(tmp_path, bits=2)
    cfg2, stub, model, opt = load_checkpoint(path)
    assert cfg2 == cfg and stub.n_features == 64 and stub.image_shape == (1, 8, 8)
    for a, b in zip(r["model"].state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)
    assert opt.num_steps == r["optimizer"].num_steps


def test_non_finite_weights_are_never_written_and_the_old_file_stays(tmp_path):
    cfg, data, _, path = trained(tmp_path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    model, opt, _ = build(cfg, data, 1)
    with torch.no_grad():
        model[0].weight[0, 0] = float("inf")
    with pytest.raises(ValueError, match=r"model.0.weight holds NaN or inf"):
        save_checkpoint(path, cfg, data, model, opt)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left


def test_load_checkpoint_rejects_bad_files(tmp_path):
    _, _, _, path = trained(tmp_path)
    blob = torch.load(path, weights_only=True)
    blob["model"]["2.weight"][0, 0] = float("nan")
    torch.save(blob, tmp_path / "nan.pt")
    with pytest.raises(ValueError, match=r"nan.pt: model.2.weight holds NaN or inf"):
        load_checkpoint(tmp_path / "nan.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a parq-optim train checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    blob = torch.load(path, weights_only=True)
    del blob["config"]["lr"]
    torch.save(blob, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="config lacks lr"):
        load_checkpoint(tmp_path / "old.pt")
