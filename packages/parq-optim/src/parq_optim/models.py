"""Small models for the CPU experiments: an MLP ``d-h-h-C`` and a two-layer CNN."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["MLP", "CharTransformer", "SmallCNN", "make_model"]


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


class Block(nn.Module):
    """Pre-norm transformer block: causal multi-head self-attention and a GELU MLP."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int = 4) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, mlp_ratio * d_model)
        self.out = nn.Linear(mlp_ratio * d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        h = self.n_heads
        q, k, v = (t.view(B, T, h, C // h).transpose(1, 2) for t in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


class CharTransformer(nn.Module):
    """A small decoder-only character language model (GPT-style, pre-norm, learned positions).

    ``forward(ids)`` maps ``(B, T)`` character ids (``T <= context``) to ``(B, T, vocab)`` logits.
    The embeddings and the output head stay in full precision in the package's protocol
    (:func:`lm_quant_groups`); every ``nn.Linear`` inside the blocks is quantized."""

    def __init__(
        self, vocab_size: int, context: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4
    ) -> None:
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids: Tensor) -> Tensor:
        T = ids.size(1)
        if T > self.context:
            raise ValueError(f"sequence length {T} exceeds the context {self.context}")
        x = self.tok(ids) + self.pos(torch.arange(T, device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))  # type: ignore[no-any-return]
