"""Small networks shared by every method: MLPs, the tanh-squashed Gaussian policy and the Q network."""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn
from torch.nn import functional as F

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0  # METRA's policy: max_std = e²


def mlp(
    in_dim: int, out_dim: int, hidden: int, depth: int, spectral_norm: bool = False
) -> nn.Sequential:
    """``depth`` hidden ReLU layers of width ``hidden``; ``spectral_norm`` wraps every linear layer (LSD)."""
    layers: list[nn.Module] = []
    dims = [in_dim] + [hidden] * depth
    for a, b in itertools.pairwise(dims):
        layers += [_linear(a, b, spectral_norm), nn.ReLU()]
    layers.append(_linear(dims[-1], out_dim, spectral_norm))
    return nn.Sequential(*layers)


def _linear(a: int, b: int, spectral_norm: bool) -> nn.Module:
    layer = nn.Linear(a, b)
    if spectral_norm:
        return nn.utils.parametrizations.spectral_norm(layer)
    return layer


def tanh_log_det(u: torch.Tensor) -> torch.Tensor:
    """``Σ_i log(1 − tanh(u_i)²)`` in the numerically stable form ``2(log 2 − u − softplus(−2u))``."""
    return (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)


class TanhGaussianPolicy(nn.Module):
    """π(a | x): a diagonal Gaussian squashed by tanh, so actions lie in (−1, 1)^|A|."""

    def __init__(self, in_dim: int, act_dim: int, hidden: int, depth: int) -> None:
        super().__init__()
        self.act_dim = act_dim
        self.net = mlp(in_dim, 2 * act_dim, hidden, depth)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(x).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, x: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action ``tanh(μ + σ·noise)`` and its log-probability (``noise`` ~ N(0, I))."""
        mean, log_std = self(x)
        u = mean + log_std.exp() * noise
        log_normal = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return torch.tanh(u), log_normal - tanh_log_det(u)

    def mean_action(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(x)[0])


class QNetwork(nn.Module):
    """Q(x, a) as an MLP on the concatenation."""

    def __init__(self, in_dim: int, act_dim: int, hidden: int, depth: int) -> None:
        super().__init__()
        self.net = mlp(in_dim + act_dim, 1, hidden, depth)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, a], dim=-1)).squeeze(-1)
