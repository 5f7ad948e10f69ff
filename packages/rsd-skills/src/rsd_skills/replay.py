"""A ring replay buffer of skill-conditioned transitions (s, a, s', s0, z, terminal)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

FIELDS = ("obs", "act", "next_obs", "s0", "z", "terminal")


class ReplayBuffer:
    """Fixed-capacity float32 arrays; ``s0`` is the first observation of each transition's trajectory."""

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, dim_option: int) -> None:
        self.capacity = int(capacity)
        shapes = {
            "obs": (obs_dim,),
            "act": (act_dim,),
            "next_obs": (obs_dim,),
            "s0": (obs_dim,),
            "z": (dim_option,),
            "terminal": (),
        }
        self.data = {k: np.zeros((self.capacity, *s), dtype=np.float32) for k, s in shapes.items()}
        self.ptr = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, batch: dict[str, np.ndarray]) -> None:
        n = len(batch["obs"])
        if n > self.capacity:
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            n = self.capacity
        idx = (self.ptr + np.arange(n)) % self.capacity
        for key in FIELDS:
            self.data[key][idx] = batch[key]
        self.ptr = int((self.ptr + n) % self.capacity)
        self.size = int(min(self.size + n, self.capacity))

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        idx = rng.integers(0, self.size, size=n)
        return {k: torch.from_numpy(v[idx]) for k, v in self.data.items()}

    def state(self) -> dict[str, Any]:
        return {
            "data": {k: torch.from_numpy(v[: self.size].copy()) for k, v in self.data.items()},
            "ptr": self.ptr,
            "size": self.size,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        size = int(state["size"])
        if size > self.capacity:
            raise ValueError(f"replay buffer holds {size} transitions, capacity is {self.capacity}")
        for key in FIELDS:
            values = state["data"][key].numpy()
            if values.shape[0] != size or values.shape[1:] != self.data[key].shape[1:]:
                raise ValueError(
                    f"replay buffer field {key!r} has shape {tuple(values.shape)}, expected "
                    f"({size}, {', '.join(map(str, self.data[key].shape[1:]))})"
                )
            self.data[key][:size] = values
        self.ptr = int(state["ptr"])
        self.size = size
