"""DP-SGD on local training with Opacus (extra ``fedgmt[dp]``).

Opacus' ``DPOptimizer`` overwrites ``p.grad`` with the noised sum of clipped per-sample gradients,
so a parameter-only loss term would be silently dropped (pytorch/opacus#249). The core adds the
dual ``h_i / beta``, prox and SCAFFOLD terms in a step pre-hook of the *original* torch optimiser,
which ``DPOptimizer.step`` calls after clipping and noising: the dual reaches the update.
These terms depend only on past private outputs and public state (post-processing).

The RDP accountant history is restored from and saved to the client state (``context.state["dp"]``
in Flower) every round, so ``dp-epsilon`` is cumulative over the client's participations.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .config import FedConfig

__all__ = ["DPContext", "make_private", "require_opacus"]


def require_opacus() -> Any:
    try:
        import opacus
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("differential privacy needs Opacus: pip install 'fedgmt[dp]'") from err
    return opacus


@dataclass
class DPContext:
    """Private module/optimiser/loader of one local training run plus its accountant."""

    module: nn.Module
    optimizer: torch.optim.Optimizer
    loader: Any
    engine: Any
    epochs: int
    delta: float
    client_state: dict[str, Any]

    def batches(self) -> Iterator[tuple[Tensor, Tensor]]:
        for _ in range(self.epochs):
            yield from self.loader

    def finish(self) -> float:
        """Save the accountant history; detach Opacus hooks; return the cumulative epsilon."""
        hist = self.engine.accountant.history
        self.client_state["dp"] = {
            "noise": [float(h[0]) for h in hist],
            "rate": [float(h[1]) for h in hist],
            "steps": [int(h[2]) for h in hist],
            "mechanism": self.engine.accountant.mechanism(),
        }
        eps = float(self.engine.accountant.get_epsilon(self.delta)) if hist else 0.0
        self.close()
        return eps

    def close(self) -> None:
        """Detach Opacus' hooks from the (reused) model."""
        close = getattr(self.module, "_close", None)
        if callable(close):
            close()
        for p in self.module.parameters():
            if hasattr(p, "grad_sample"):
                p.grad_sample = None


def make_private(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    x: Tensor,
    y: Tensor,
    cfg: FedConfig,
    client_state: dict[str, Any],
    generator: torch.Generator,
) -> DPContext:
    """Wrap ``model``/``optimizer`` with ``PrivacyEngine(accountant="rdp").make_private``
    (Poisson sampling), after restoring the accountant history from ``client_state["dp"]``."""
    require_opacus()
    from opacus import PrivacyEngine
    from opacus.validators import ModuleValidator

    errors = ModuleValidator.validate(model, strict=False)
    if errors:
        raise ValueError(f"dp: model not supported by Opacus: {errors[0]}")
    n = len(y)
    if not cfg.dp_delta < 1.0 / n:
        raise ValueError(f"invalid dp_delta={cfg.dp_delta}: must be < 1/n_i = {1.0 / n:.3g}")
    engine = PrivacyEngine(accountant="rdp")
    saved = client_state.get("dp")
    if saved:
        engine.accountant.history = [
            (float(a), float(b), int(c))
            for a, b, c in zip(saved["noise"], saved["rate"], saved["steps"])
        ]
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=cfg.batch_size, generator=generator
    )
    module, dp_opt, dp_loader = engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=cfg.dp_noise,
        max_grad_norm=cfg.dp_clip,
        poisson_sampling=True,
        noise_generator=generator,
    )
    return DPContext(
        module, dp_opt, dp_loader, engine, cfg.local_epochs, cfg.dp_delta, client_state
    )
