"""The reweighting mechanism on the synthetic concept shift (robust; accuracy gains are not asserted)."""

import tar_gnn as T
import torch


def test_tar_puts_more_mass_on_minority_nodes_than_their_base_rate():
    cfg = T.TrainConfig(epochs=30, hidden=32, layers=2, lr=1e-2)  # an early ERM checkpoint
    by_steps = {0: [], 5: [], 20: []}
    for seed in range(3):
        data = T.make_csbm_ood(1000, seed=seed)
        erm = T.train_node_classifier(data, T.ERM(), cfg, seed=seed)
        erm.model.eval()
        with torch.no_grad():
            out = erm.model(data.x, data.edge_index)
        loss = T.per_node_loss(out[data.train_mask], data.y[data.train_mask])
        flagged = data.minority[data.train_mask]
        share = float(flagged.double().mean())
        for steps in by_steps:
            for edge_rule in ("cap", "limit"):
                q = T.TARWeighter(data, steps=steps, on_exceed=edge_rule)(loss)
                d = T.weight_diagnostics(q, loss, flagged)
                if steps == 20:
                    assert d["flagged_mass"] > share  # hard nodes get more than their base rate
                    assert d["corr_q_loss"] > 0
                if edge_rule == "cap":
                    by_steps[steps].append(d["flagged_mass"])
    means = [sum(v) / len(v) for v in by_steps.values()]
    assert means[0] <= means[1] <= means[2]  # non-decreasing in T_in
