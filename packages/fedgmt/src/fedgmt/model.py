"""Models: digits MLP, MNIST 2NN (McMahan et al. 2017) / CNN (the official FL-SAM CIFAR CNN shape),
fastText-shaped AG News model (the official code's, with a masked mean), and an MLP head on frozen
all-MiniLM-L6-v2 sentence embeddings (``agnews-minilm``)."""

from __future__ import annotations

import torch
from torch import nn

from .config import FedConfig

__all__ = ["CNN", "MLP", "FastText", "make_model"]


class MLP(nn.Module):
    """``in -> hidden (ReLU) x len(hidden) -> classes``; no BatchNorm (DP-compatible)."""

    def __init__(self, in_dim: int, hidden: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        d = in_dim
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))


class CNN(nn.Module):
    """The official CIFAR CNN shape on 1x28x28 (fc 3136 -> 512 -> classes)."""

    def __init__(self, num_classes: int = 10, side: int = 28) -> None:
        super().__init__()
        self.side = side
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.head = nn.Sequential(
            nn.Linear(64 * (side // 4) ** 2, 512), nn.ReLU(), nn.Linear(512, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.view(x.shape[0], 1, self.side, self.side)
        return self.head(self.features(x).flatten(1))


class FastText(nn.Module):
    """Embedding(V, 32, pad=0) -> masked mean -> Linear(32, 32) -> Linear(32, C) (no activation)."""

    def __init__(self, vocab_size: int, num_classes: int = 4, dim: int = 32) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = (tokens != 0).unsqueeze(-1).to(self.embedding.weight.dtype)
        emb = self.embedding(tokens) * mask
        mean = emb.sum(1) / mask.sum(1).clamp_min(1.0)
        return self.fc2(self.fc1(mean))


def make_model(
    cfg: FedConfig, input_dim: int, num_classes: int, vocab_size: int | None = None
) -> nn.Module:
    """Seeded model init ``w_1`` (``torch.manual_seed(cfg.seed)``); identical in both engines."""
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(cfg.seed)
    try:
        arch = cfg.model
        if cfg.dataset == "agnews":
            model: nn.Module = FastText(int(vocab_size or 2), num_classes)
        elif arch == "cnn":
            model = CNN(num_classes)
        elif cfg.dataset == "mnist":
            model = MLP(input_dim, (200, 200), num_classes)
        elif cfg.dataset == "agnews-minilm":  # frozen 384-d sentence embeddings -> small MLP head
            model = MLP(input_dim, (64,), num_classes)
        elif cfg.dataset == "synthetic":
            model = MLP(input_dim, (), num_classes)
        else:
            model = MLP(input_dim, (64,), num_classes)
    finally:
        torch.random.set_rng_state(gen_state)
    return model
