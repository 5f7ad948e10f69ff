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
from torch.nn import functional as F

from .base import normalize
from .config import Config
from .networks import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    QNetwork,
    TanhGaussianPolicy,
    mlp,
    tanh_log_det,
)
from .sac import SAC, clip_grads

EPS = 1e-6
LOG_2PI = math.log(2 * math.pi)


def atanh(x: torch.Tensor) -> torch.Tensor:
    """``½·log((1+ε+x)/(1+ε−x))``, finite at ±1 (the official TanhNormal's form, ε = 1e−6)."""
    return 0.5 * torch.log((1 + EPS + x) / (1 + EPS - x))


def gaussian_log_prob(
    x: torch.Tensor,
    loc: torch.Tensor,
    scale: torch.Tensor,
    log_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Diagonal normal log-density, summed over the last axis (broadcasting); ``log_scale``: ``log(scale)``
    precomputed for a scale that stays fixed over many calls (the same values)."""
    t = (x - loc) / scale
    log_scale = torch.log(scale) if log_scale is None else log_scale
    return (-0.5 * t.pow(2) - log_scale - 0.5 * LOG_2PI).sum(-1)


def tanh_terms(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The parts of :func:`tanh_normal_log_prob` that depend on ``x`` alone: ``atanh(x)`` and
    ``Σ log(1 − x² + ε)`` (computed once for points that many log-densities are evaluated at)."""
    return atanh(x), torch.log(1 - x.pow(2) + EPS).sum(-1)


def tanh_normal_log_prob(
    x: torch.Tensor,
    mu: torch.Tensor,
    std: torch.Tensor,
    terms: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``log q(x)`` of ``x = tanh(u)``, ``u ~ N(μ, diag std²)``: change of variables with ``log(1 − x² + ε)``
    (``terms``: :func:`tanh_terms` of ``x``, precomputed)."""
    u, log_det = tanh_terms(x) if terms is None else terms
    return gaussian_log_prob(u, mu, std) - log_det


def gmm_log_prob(
    z: torch.Tensor,
    locs: torch.Tensor,
    scales: torch.Tensor,
    weights: torch.Tensor,
    log_scales: torch.Tensor | None = None,
    log_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log Σ_j w_j N(z; loc_j, diag scale_j²)`` for ``z`` (n, d), ``locs``/``scales`` (W, d)
    (``log_scales``/``log_weights``: their logs, precomputed)."""
    log_scales = torch.log(scales) if log_scales is None else log_scales
    log_weights = torch.log(weights) if log_weights is None else log_weights
    comp = gaussian_log_prob(z[:, None, :], locs[None], scales[None], log_scales[None])
    return torch.logsumexp(comp + log_weights[None], dim=1)


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


def confidence(
    x: torch.Tensor,
    mu: torch.Tensor,
    std: torch.Tensor,
    n_chunks: int,
    terms: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The reachability term: split reached Ψ states into ``n_chunks`` equal chunks (remainder dropped), take
    ``max log q`` in each, clamp at ≤ 0 and average; fewer points than chunks: ``min(0, max log q)``; none: 0.
    ``terms``: :func:`tanh_terms` of ``x``, precomputed."""
    if len(x) == 0:
        return torch.zeros(())
    lp = tanh_normal_log_prob(x, mu, std, terms)
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
    objective = GeneratorObjective(regret_fn, pop_locs, pop_scales, pop_weights, reached, n, w2, w3)
    loss, logs = objective(gen, generator)
    assert logs is not None
    return loss, logs


class GeneratorObjective:
    """:func:`generator_loss` for one round, whose population and reached set stay fixed: what depends on
    them alone (the population's log-scales and log-weights, ``atanh`` and the log-Jacobian of the reached
    states) is computed once, not at every step; the values are the same."""

    def __init__(
        self,
        regret_fn: Callable[[torch.Tensor], torch.Tensor],
        pop_locs: torch.Tensor,
        pop_scales: torch.Tensor,
        pop_weights: torch.Tensor,
        reached: torch.Tensor,
        n: int,
        w2: float,
        w3: float,
    ) -> None:
        self.regret_fn = regret_fn
        self.locs, self.scales, self.weights = pop_locs, pop_scales, pop_weights
        self.log_scales, self.log_weights = torch.log(pop_scales), torch.log(pop_weights)
        self.reached = reached
        self.reached_terms = tanh_terms(reached) if len(reached) else None
        self.n, self.w2, self.w3 = n, w2, w3

    def __call__(
        self, gen: SkillGenerator, generator: torch.Generator | None = None, logs: bool = True
    ) -> tuple[torch.Tensor, dict[str, float] | None]:
        """The loss and (``logs``) its parts: the mean regret, the novelty term and the confidence."""
        mu, std = gen.params()
        z = torch.tanh(mu + std * torch.randn(self.n, gen.dim, generator=generator))  # pathwise
        log_q = tanh_normal_log_prob(z.detach(), mu, std)  # score-function form
        with torch.no_grad():
            reg = self.regret_fn(z.detach())
            adv = standardize(reg)
        log_p = gmm_log_prob(
            z, self.locs, self.scales, self.weights, self.log_scales, self.log_weights
        )
        kl_win = log_p.exp() * (log_p - log_q)
        conf = confidence(self.reached, mu, std, self.n, self.reached_terms)
        loss = (-log_q * adv - self.w2 * kl_win).mean() - self.w3 * conf
        if not logs:
            return loss, None
        parts = {
            "regret": reg.mean().item(),
            "kl_win": kl_win.mean().item(),
            "confidence": conf.item(),
        }
        return loss, parts


class LeanAdam:
    """``torch.optim.Adam`` (default betas, eps, no weight decay) for a few parameters, without the
    optimizer framework around it: the single-tensor update, operation for operation, so the parameters
    come out bit for bit the same. RSD's generator makes a fresh one every round and steps it 100 times on
    two d-vectors, where ``Optimizer.step``'s bookkeeping costs more than the arithmetic."""

    def __init__(
        self,
        params: list[nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = params
        self.lr, self.eps = lr, eps
        self.beta1, self.beta2 = betas
        self.state: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(params)
        self.steps = [0] * len(params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.beta1, self.beta2
        for i, param in enumerate(self.params):
            grad = param.grad
            if grad is None:
                continue
            state = self.state[i]
            if state is None:
                state = self.state[i] = (
                    torch.zeros_like(param, memory_format=torch.preserve_format),
                    torch.zeros_like(param, memory_format=torch.preserve_format),
                )
            exp_avg, exp_avg_sq = state
            self.steps[i] += 1
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = float(self.steps[i])
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = self.lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)


def train_generator(
    gen: SkillGenerator,
    regret_fn: Callable[[torch.Tensor], torch.Tensor],
    population: Population,
    reached: torch.Tensor,
    cfg: Config,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """One round's generator training: reset, fresh Adam, ``gen_steps`` clipped steps (uniform population
    weights in the novelty term); returns the last step's loss parts."""
    gen.reset()
    params = list(gen.parameters())
    opt = LeanAdam(params, lr=cfg.gen_lr)
    weights = torch.full((len(population),), 1.0 / len(population))
    objective = GeneratorObjective(
        regret_fn, population.locs(), population.scales(), weights, reached, cfg.n_traj, cfg.w2,
        cfg.w3,
    )  # fmt: skip
    logs: dict[str, float] = {}
    for step in range(cfg.gen_steps):
        loss, parts = objective(gen, generator, logs=step == cfg.gen_steps - 1)
        opt.zero_grad()
        loss.backward()
        clip_grads(params, cfg.gen_grad_clip)
        opt.step()
        if parts is not None:
            logs = parts
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
    x, eps = _value_inputs(s0, z, noise)
    return ValueEstimate(agent)(x, eps, -0.5 * eps.pow(2), m, n)


def _value_inputs(
    s0: torch.Tensor, z: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The M action samples in one batched pass: rows (m, i) of x repeat [s0, z_i] for every m."""
    m, n = noise.shape[0], len(z)
    return torch.cat([s0.expand(n, -1), z], dim=-1).repeat(m, 1), noise.reshape(m * n, -1)


Layers = list[tuple[torch.Tensor, torch.Tensor] | None]


def _plain_layers(net: nn.Module) -> Layers | None:
    """An :func:`~rsd_skills.networks.mlp` as (weight, bias) per linear layer and None per ReLU; None when it
    holds anything else. The tensors are the parameters themselves (updated in place by the optimizers and
    by ``load_state_dict``), so the list stays valid."""
    if not isinstance(net, nn.Sequential):
        return None
    layers: Layers = []
    for layer in net:
        if type(layer) is nn.Linear:
            layers.append((layer.weight, layer.bias))
        elif type(layer) is nn.ReLU:
            layers.append(None)
        else:
            return None
    return layers


def _forward(layers: Layers, x: torch.Tensor) -> torch.Tensor:
    """An :func:`~rsd_skills.networks.mlp` forward pass over a prepared layer list (``F.linear`` and
    ``F.relu``: the arithmetic of the modules' calls)."""
    for layer in layers:
        x = F.relu(x) if layer is None else F.linear(x, layer[0], layer[1])
    return x


class ValueEstimate:
    """``V(s0|z)`` of one agent (or snapshot) over prepared inputs, its networks' layers looked up once.

    For the standard policy and Q networks the arithmetic is ``policy.sample`` and ``q(x, a)`` call for
    call, without the module machinery: RSD's generator evaluates two of these at every one of its 100
    steps per round. Other network types go through their modules."""

    def __init__(self, agent: SAC | AgentSnapshot) -> None:
        self.agent = agent
        plain = type(agent.policy) is TanhGaussianPolicy
        plain = plain and type(agent.q1) is QNetwork and type(agent.q2) is QNetwork
        self.policy = _plain_layers(agent.policy.net) if plain else None
        self.q1 = _plain_layers(agent.q1.net) if plain else None
        self.q2 = _plain_layers(agent.q2.net) if plain else None

    def __call__(
        self, x: torch.Tensor, eps: torch.Tensor, half_sq: torch.Tensor, m: int, n: int
    ) -> torch.Tensor:
        """``x`` (M·n, in) rows [s0, z_i], ``eps`` (M·n, |A|) the action noise, ``half_sq`` = ``−0.5·eps²``
        (shared by the agent and its snapshot); returns (n,)."""
        agent = self.agent
        if self.policy is not None and self.q1 is not None and self.q2 is not None:
            mean, log_std = _forward(self.policy, x).chunk(2, dim=-1)
            log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
            u = mean + log_std.exp() * eps
            logp = (half_sq - log_std - 0.5 * LOG_2PI).sum(-1) - tanh_log_det(u)
            a = torch.tanh(u)
            xa = torch.cat([x, a], dim=-1)  # the same input for both Qs
            q = torch.min(_forward(self.q1, xa).squeeze(-1), _forward(self.q2, xa).squeeze(-1))
        else:
            a, logp = agent.policy.sample(x, eps)
            q = torch.min(agent.q1(x, a), agent.q2(x, a))
        values = q - agent.log_alpha.exp() * logp
        return values.reshape(m, n).mean(0)


class Regret:
    """``Reg(z) = V_k(s0|z) − V_{k−1}(s0|z)`` for a fixed agent, snapshot and start state (one generator
    round), both values with the same action noise; ``V_{k−1} ≡ 0`` without a snapshot."""

    def __init__(
        self, agent: SAC, snapshot: AgentSnapshot | None, s0: torch.Tensor, samples: int = 3
    ) -> None:
        self.act_dim = agent.act_dim
        self.value = ValueEstimate(agent)
        self.previous = ValueEstimate(snapshot) if snapshot is not None else None
        self.s0, self.samples = s0, samples

    @torch.no_grad()
    def __call__(self, z: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        m, n = self.samples, len(z)
        noise = torch.randn(m, n, self.act_dim, generator=generator)
        x, eps = _value_inputs(self.s0, z, noise)  # built once for both value estimates
        half_sq = -0.5 * eps.pow(2)
        value = self.value(x, eps, half_sq, m, n)
        if self.previous is None:
            return value
        return value - self.previous(x, eps, half_sq, m, n)


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
    return Regret(agent, snapshot, s0, samples)(z, generator)


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
