"""Small models for the CPU experiments: an MLP ``d-h-h-C`` and a two-layer CNN."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["MLP", "SmallCNN", "make_model"]


class MLP(nn.Sequential):
    """``d-h-h-C`` ReLU multilayer perceptron (the model of the package's CPU benchmark)."""

    def __init__(self, n_features: int, hidden: int, n_classes: int) -> None:
        super().__init__(
            nn.Linear(n_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )


class SmallCNN(nn.Module):
    """Conv(5x5, c) - pool - Conv(5x5, 2c) - pool - Linear, for flattened ``(1, H, W)`` images."""

    def __init__(self, image_shape: tuple[int, ...], n_classes: int, channels: int = 8) -> None:
        super().__init__()
        self.image_shape = tuple(image_shape)
        c_in, h, w = self.image_shape
        self.features = nn.Sequential(
            nn.Conv2d(c_in, channels, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        with torch.no_grad():
            n = self.features(torch.zeros(1, c_in, h, w)).shape[1]
        self.classifier = nn.Linear(n, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x.view(-1, *self.image_shape)))


def make_model(
    name: str,
    n_features: int,
    n_classes: int,
    hidden: int = 16,
    image_shape: tuple[int, ...] | None = None,
) -> nn.Module:
    """``mlp`` or ``cnn`` (the CNN needs ``image_shape``)."""
    if name == "mlp":
        return MLP(n_features, hidden, n_classes)
    if name == "cnn":
        if image_shape is None:
            raise ValueError("model 'cnn' needs image data (image_shape); use model 'mlp'")
        return SmallCNN(image_shape, n_classes, channels=max(4, hidden // 4))
    raise ValueError(f"unknown model {name!r}; choose from ['mlp', 'cnn']")
