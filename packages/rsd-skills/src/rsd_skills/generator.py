"""RSD's skill generator π_θ2, its population ("DistWindow"), the mixture sampler and the regret estimate.

* :class:`SkillGenerator` is a diagonal TanhNormal over skills in (−1, 1)^d with pre-tanh mean μ and a
  log-std clamped to [log 0.1, log 0.5]. The official module is a 1024×2 MLP on an all-zero input token;
  with zero-initialised biases only its output biases receive gradient (ReLU′(0) = 0), so it is exactly
  this free-parameter distribution. ``arch="mlp_zero_token"`` builds the MLP form for parity checks.
* :func:`regret` estimates ``Reg(z) = V_k(s0|z) − V_{k−1}(s0|z)`` from the current agent and a frozen
  snapshot (``V_{k−1} ≡ 0`` before the first snapshot), ``V(s0|z) = mean_M [min Q(s0,z,a) − α log π(a|s0,z)]``.
* :func:`generator_loss` is the generator objective: REINFORCE towards high regret, the
  population-weighted novelty term and the confidence (reachability) term.
* :class:`Population` holds frozen members, the add (novelty) and remove (lowest regret) rules, the
  learning-progress mixture weights and the mixture sampler.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .base import normalize
from .config import Config
from .networks import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    QNetwork,
    TanhGaussianPolicy,
    mlp,
    mlp_forward,
    tanh_log_det,
)
from .sac import SAC, clip_and_step

EPS = 1e-6
LOG_2PI = math.log(2 * math.pi)


def atanh(x: torch.Tensor) -> torch.Tensor:
    """``½·log((1+ε+x)/(1+ε−x))``, finite at ±1 (the official TanhNormal's form, ε = 1e−6)."""
    return 0.5 * torch.log((1 + EPS + x) / (1 + EPS - x))


def gaussian_log_prob(x: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Diagonal normal log-density, summed over the last axis (broadcasting)."""
    t = (x - loc) / scale
    return (-0.5 * t.pow(2) - torch.log(scale) - 0.5 * LOG_2PI).sum(-1)


def tanh_normal_log_prob(x: torch.Tensor, mu: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``log q(x)`` of ``x = tanh(u)``, ``u ~ N(μ, diag std²)``: change of variables with ``log(1 − x² + ε)``."""
    return gaussian_log_prob(atanh(x), mu, std) - torch.log(1 - x.pow(2) + EPS).sum(-1)


def gmm_log_prob(
    z: torch.Tensor, locs: torch.Tensor, scales: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """``log Σ_j w_j N(z; loc_j, diag scale_j²)`` for ``z`` (n, d), ``locs``/``scales`` (W, d)."""
    comp = gaussian_log_prob(z[:, None, :], locs[None], scales[None])
    return torch.logsumexp(comp + torch.log(weights)[None], dim=1)


def standardize(x: torch.Tensor) -> torch.Tensor:
    """``(x − mean) / (std + 1e−6)`` with the unbiased std (zero for a single value)."""
    centred = x - x.mean()
    if x.numel() < 2:
        return centred
    return centred / (x.std(correction=1) + EPS)


# ----------------------------------------------------------------------------------------- generator


class SkillGenerator(nn.Module):
    """The skill generator q(z) = TanhNormal(μ, diag σ²), σ = exp(clamp(ℓ, log σ_min, log σ_max))."""

    def __init__(
        self,
        dim: int,
        std_init: float = 0.3,
        std_min: float = 0.1,
        std_max: float = 0.5,
        arch: str = "free",
        n_tokens: int = 8,
        hidden: int = 256,
        depth: int = 2,
    ) -> None:
        super().__init__()
        if arch not in ("free", "mlp_zero_token"):
            raise ValueError(f"arch must be 'free' or 'mlp_zero_token', got {arch!r}")
        self.dim = dim
        self.arch = arch
        self.n_tokens = n_tokens
        self.log_std_min = math.log(std_min)
        self.log_std_max = math.log(std_max)
        if arch == "free":
            self.mean = nn.Parameter(torch.zeros(dim))
            self.log_std = nn.Parameter(torch.full((dim,), math.log(std_init)))
        else:
            self.mean_net = mlp(n_tokens, dim, hidden, depth)
            self.std_net = mlp(n_tokens, dim, hidden, depth)
            for net, bias in ((self.mean_net, 0.0), (self.std_net, math.log(std_init))):
                linears = [m for m in net if isinstance(m, nn.Linear)]
                for layer in linears:
                    nn.init.zeros_(layer.bias)
                nn.init.constant_(linears[-1].bias, bias)
        self._initial = copy.deepcopy(self.state_dict())

    def reset(self) -> None:
        """Restore the parameters this generator was built with (start of every round)."""
        self.load_state_dict(self._initial)

    def params(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-tanh mean μ (d,) and std σ (d,) (log-std clamped in the forward pass)."""
        if self.arch == "free":
            mean, log_std = self.mean, self.log_std
        else:
            token = torch.zeros(self.n_tokens, self.n_tokens)
            mean, log_std = self.mean_net(token)[0], self.std_net(token)[0]
        return mean, log_std.clamp(self.log_std_min, self.log_std_max).exp()

    def rsample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` pathwise samples ``tanh(μ + σ ε)`` in (−1, 1)^d."""
        mu, std = self.params()
        return torch.tanh(mu + std * torch.randn(n, self.dim, generator=generator))

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        mu, std = self.params()
        return tanh_normal_log_prob(x, mu, std)


def confidence(x: torch.Tensor, mu: torch.Tensor, std: torch.Tensor, n_chunks: int) -> torch.Tensor:
    """The reachability term: split reached Ψ states into ``n_chunks`` equal chunks (remainder dropped), take
    ``max log q`` in each, clamp at ≤ 0 and average; fewer points than chunks: ``min(0, max log q)``; none: 0."""
    if len(x) == 0:
        return torch.zeros(())
    lp = tanh_normal_log_prob(x, mu, std)
    if len(x) < n_chunks:
        return torch.clamp(lp.max(), max=0.0)
    k = len(x) // n_chunks
    best = lp[: n_chunks * k].reshape(n_chunks, k).max(dim=1).values
    return torch.clamp(best, max=0.0).mean()


def generator_loss(
    gen: SkillGenerator,
    regret_fn: Callable[[torch.Tensor], torch.Tensor],
    pop_locs: torch.Tensor,
    pop_scales: torch.Tensor,
    pop_weights: torch.Tensor,
    reached: torch.Tensor,
    n: int,
    w2: float,
    w3: float,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``mean(−log q(sg z)·standardize(Reg(z)) − w2·p_pop(z)(log p_pop(z) − log q(sg z))) − w3·confidence``."""
    mu, std = gen.params()
    z = torch.tanh(mu + std * torch.randn(n, gen.dim, generator=generator))  # pathwise
    log_q = tanh_normal_log_prob(z.detach(), mu, std)  # score-function form
    with torch.no_grad():
        reg = regret_fn(z.detach())
        adv = standardize(reg)
    log_p = gmm_log_prob(z, pop_locs, pop_scales, pop_weights)
    kl_win = log_p.exp() * (log_p - log_q)
    conf = confidence(reached, mu, std, n)
    loss = (-log_q * adv - w2 * kl_win).mean() - w3 * conf
    logs = {"regret": reg.mean().item(), "kl_win": kl_win.mean().item(), "confidence": conf.item()}
    return loss, logs


def train_generator(
    gen: SkillGenerator,
    regret_fn: Callable[[torch.Tensor], torch.Tensor],
    population: Population,
    reached: torch.Tensor,
    cfg: Config,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """One round's generator training: reset, fresh Adam, ``gen_steps`` clipped steps (uniform population
    weights in the novelty term)."""
    gen.reset()
    opt = torch.optim.Adam(gen.parameters(), lr=cfg.gen_lr)
    params = list(gen.parameters())
    locs, scales = population.locs(), population.scales()
    weights = torch.full((len(population),), 1.0 / len(population))
    logs: dict[str, float] = {}
    for _ in range(cfg.gen_steps):
        loss, logs = generator_loss(
            gen, regret_fn, locs, scales, weights, reached, cfg.n_traj, cfg.w2, cfg.w3, generator
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        clip_and_step(opt, params, cfg.gen_grad_clip)
    return logs


# ----------------------------------------------------------------------------------------- regret


class AgentSnapshot(nn.Module):
    """Frozen copies (π_{k−1}, Q1_{k−1}, Q2_{k−1}, α_{k−1}) taken at the end of a generator round."""

    def __init__(self, in_dim: int, act_dim: int, hidden: int, depth: int) -> None:
        super().__init__()
        self.policy = TanhGaussianPolicy(in_dim, act_dim, hidden, depth)
        self.q1 = QNetwork(in_dim, act_dim, hidden, depth)
        self.q2 = QNetwork(in_dim, act_dim, hidden, depth)
        self.log_alpha = nn.Parameter(torch.zeros(()))
        self.requires_grad_(False)

    @torch.no_grad()
    def copy_from(self, agent: SAC) -> None:
        for name in ("policy", "q1", "q2"):
            getattr(self, name).load_state_dict(getattr(agent, name).state_dict())
        self.log_alpha.copy_(agent.log_alpha)


@torch.no_grad()
def estimate_value(
    agent: SAC | AgentSnapshot, s0: torch.Tensor, z: torch.Tensor, noise: torch.Tensor
) -> torch.Tensor:
    """``V(s0|z) = mean_m [min(Q1, Q2)(s0, z, a_m) − α log π(a_m|s0, z)]`` with ``a_m`` from ``noise[m]``.

    ``s0`` (obs_dim,), ``z`` (n, d), ``noise`` ``(M, n, |A|)`` standard normal; returns (n,)."""
    m, n = noise.shape[0], len(z)
    return _value(agent, *_value_inputs(s0, z, noise), m, n)


def _value_inputs(
    s0: torch.Tensor, z: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The M action samples in one batched pass: rows (m, i) of x repeat [s0, z_i] for every m."""
    m, n = noise.shape[0], len(z)
    return torch.cat([s0.expand(n, -1), z], dim=-1).repeat(m, 1), noise.reshape(m * n, -1)


def _value(
    agent: SAC | AgentSnapshot, x: torch.Tensor, eps: torch.Tensor, m: int, n: int
) -> torch.Tensor:
    if type(agent.policy) is TanhGaussianPolicy:
        # agent.policy.sample without the module call machinery (the same arithmetic)
        mean, log_std = mlp_forward(agent.policy.net, x).chunk(2, dim=-1)
        log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        u = mean + log_std.exp() * eps
        logp = (-0.5 * eps.pow(2) - log_std - 0.5 * LOG_2PI).sum(-1) - tanh_log_det(u)
        a = torch.tanh(u)
    else:
        a, logp = agent.policy.sample(x, eps)
    q = torch.min(_q_value(agent.q1, x, a), _q_value(agent.q2, x, a))
    values = q - agent.log_alpha.exp() * logp
    return values.reshape(m, n).mean(0)


def _q_value(q: nn.Module, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``q(x, a)``; a :class:`QNetwork` without the module call machinery (the same arithmetic)."""
    if type(q) is QNetwork:
        return mlp_forward(q.net, torch.cat([x, a], dim=-1)).squeeze(-1)
    return q(x, a)


@torch.no_grad()
def regret(
    agent: SAC,
    snapshot: AgentSnapshot | None,
    s0: torch.Tensor,
    z: torch.Tensor,
    samples: int = 3,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``Reg(z) = V_k(s0|z) − V_{k−1}(s0|z)``, both with the same action noise; ``V_{k−1} ≡ 0`` without a snapshot."""
    noise = torch.randn(samples, len(z), agent.act_dim, generator=generator)
    x, eps = _value_inputs(s0, z, noise)  # built once for both value estimates (the same inputs)
    value = _value(agent, x, eps, samples, len(z))
    if snapshot is None:
        return value
    return value - _value(snapshot, x, eps, samples, len(z))


# ----------------------------------------------------------------------------------------- population


@dataclass
class Member:
    """A frozen generator: pre-tanh mean μ and std σ. Its mixture component is N(tanh μ, diag σ²)."""

    mu: torch.Tensor
    std: torch.Tensor


class Population:
    """The "DistWindow": at most ``window`` frozen generators, starting with the untrained one (μ = 0)."""

    def __init__(self, dim: int, window: int, std_init: float = 0.3) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.dim = dim
        self.window = window
        self.members: list[Member] = [Member(torch.zeros(dim), torch.full((dim,), std_init))]

    def __len__(self) -> int:
        return len(self.members)

    def locs(self) -> torch.Tensor:
        """Component locations in post-tanh space, tanh(μ_j) (W, d)."""
        return torch.tanh(torch.stack([m.mu for m in self.members]))

    def scales(self) -> torch.Tensor:
        """Component scales: the members' pre-tanh stds σ_j (W, d), as in the official code."""
        return torch.stack([m.std for m in self.members])

    def is_novel(self, mu: torch.Tensor, distance: float) -> bool:
        """True when ``||tanh μ − tanh μ_j||₂ ≥ distance`` for every member j."""
        gaps = torch.linalg.vector_norm(self.locs() - torch.tanh(mu)[None], dim=-1)
        return bool((gaps >= distance).all())

    def add(self, mu: torch.Tensor, std: torch.Tensor, distance: float) -> bool:
        """Append a trained generator if it is novel; returns whether it was added."""
        if len(self) >= self.window:
            raise ValueError(f"population is full ({self.window}); remove a member first")
        if not self.is_novel(mu, distance):
            return False
        self.members.append(Member(mu.detach().clone(), std.detach().clone()))
        return True

    def remove_lowest(self, mean_regrets: torch.Tensor) -> int:
        """Remove the member with the lowest mean regret; returns its index."""
        if len(mean_regrets) != len(self):
            raise ValueError(
                f"need one mean regret per member ({len(self)}), got {len(mean_regrets)}"
            )
        index = int(torch.argmin(mean_regrets))
        del self.members[index]
        return index

    def member_samples(
        self, index: int, n: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        m = self.members[index]
        return torch.tanh(m.mu + m.std * torch.randn(n, self.dim, generator=generator))

    def mixture_weights(
        self, x_new: torch.Tensor, x_old: torch.Tensor, floor: float | None = None
    ) -> torch.Tensor:
        """``softmax_j(max_{x∈X_new} log N_j(x) − max_{x∈X_old} log N_j(x))``, floored at ``0.1/window`` and
        renormalised; uniform when either set is empty."""
        floor = 0.1 / self.window if floor is None else floor
        w_count = len(self)
        if len(x_new) == 0 or len(x_old) == 0:
            weights = torch.full((w_count,), 1.0 / w_count)
        else:
            locs, scales = self.locs()[None], self.scales()[None]
            best_new = gaussian_log_prob(x_new[:, None], locs, scales).max(dim=0).values
            best_old = gaussian_log_prob(x_old[:, None], locs, scales).max(dim=0).values
            weights = torch.softmax(best_new - best_old, dim=0)
        weights = torch.clamp(weights, min=floor)
        return weights / weights.sum()

    def sample(
        self,
        n: int,
        weights: torch.Tensor,
        generator: torch.Generator | None = None,
        unit: bool = False,
    ) -> torch.Tensor:
        """``n`` skills from ``GMM(weights, N(tanh μ_j, σ_j))``, clamped to [−1, 1]^d (or unit length)."""
        comp = torch.multinomial(weights, n, replacement=True, generator=generator)
        z = self.locs()[comp] + self.scales()[comp] * torch.randn(n, self.dim, generator=generator)
        return normalize(z) if unit else z.clamp(-1.0, 1.0)

    def mean_pairwise_distance(self) -> float:
        """Mean L2 distance between members' tanh means (a population-diversity summary)."""
        if len(self) < 2:
            return 0.0
        d = torch.cdist(self.locs(), self.locs())
        return float(d.sum() / (len(self) * (len(self) - 1)))

    def state(self) -> dict[str, torch.Tensor | int]:
        return {
            "mu": torch.stack([m.mu for m in self.members]),
            "std": torch.stack([m.std for m in self.members]),
            "window": self.window,
        }

    def load_state(self, state: dict[str, torch.Tensor | int]) -> None:
        mu, std = state["mu"], state["std"]
        assert isinstance(mu, torch.Tensor) and isinstance(std, torch.Tensor)
        self.members = [Member(m.clone(), s.clone()) for m, s in zip(mu, std)]
