"""Diagnosis of benchmark (e)'s Cook County miss: is NLL-only's valid gap to avg over 5 a
convergence gap? Fits NLL-only as benchmarks/history.py does (seed 0), then continues at a 10x
smaller learning rate, and prints valid NLL and valid BPR@100 (ratio and mean ranking) of both.

Usage (from packages/bpr-topk): python benchmarks/history_diagnose.py [--data DIR]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import bpr_topk as B
import torch
from bpr_topk.experiment import TrainConfig, train_one
from bpr_topk.train import evaluate_model
from history import DEFAULT_DATA


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Cook County folder")
    args = p.parse_args()
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = B.load_topk_folder(args.data)
    data = B.with_site_history_features(raw)
    k = 100
    common = {"link": "exp", "early_stopping": "nll", "patience": 20, "site_slopes": False}
    cfg = TrainConfig(epochs=200, max_epochs=3200, init="mean", lr=0.03, **common)
    model, res = train_one(data, "negbin", k, "nll", 0.0, 0, cfg)

    def show(tag: str, m: B.ForecastModel) -> None:
        v = evaluate_model(m, data.valid, k, "ratio", 10, 1000)
        vm = evaluate_model(m, data.valid, k, "mean")
        print(f"{tag}: valid NLL {v['nll']:.4f}, valid BPR@100 ratio {v['bpr']:.4f}, "
              f"mean ranking {vm['bpr']:.4f}")  # fmt: skip

    show(f"NLL-only, Adam 0.03 (best epoch {res.best_epoch})", model)
    cfg2 = TrainConfig(
        epochs=400, max_epochs=3200, finetune_lr=0.003, finetune_epochs=400, **common
    )
    model2, res2 = train_one(data, "negbin", k, "nll", 0.0, 0, cfg2, None, False, res.best_state)
    show(f"continued at Adam 0.003 (best epoch {res2.best_epoch})", model2)
    best = B.best_heuristic(raw, k)  # the heuristics read the lag columns of the raw data
    print(f"best heuristic on valid: {best['method']} {best['valid_bpr']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
