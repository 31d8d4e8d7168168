"""Networks of Deep CFR: advantage and policy MLPs over information-state features.

Both map features (batch, encoding_size) to one value per action of the
game's fixed action space (batch, num_actions): predicted advantages for
the advantage network, logits for the policy (average strategy) network.
"""

from __future__ import annotations

import torch
from torch import nn

from lostcities.config import NetworkConfig


class MLP(nn.Module):
    """``layers`` hidden ReLU layers of width ``hidden``, then a linear head."""

    def __init__(self, input_dim: int, num_actions: int, hidden: int, layers: int) -> None:
        super().__init__()
        if hidden < 1 or layers < 1:
            raise ValueError(
                f"network.hidden and network.layers must be >= 1, got {hidden}, {layers}"
            )
        blocks: list[nn.Module] = []
        width = input_dim
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        self.body = nn.Sequential(*blocks)
        self.head = nn.Linear(width, num_actions)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        # features: (batch, input_dim) float32 -> (batch, num_actions)
        return self.head(self.body(features))


def build_network(cfg: NetworkConfig, input_dim: int, num_actions: int, seed: int) -> MLP:
    """A freshly initialised network; ``seed`` makes the initial weights reproducible
    without touching torch's global generator."""
    generator = torch.Generator().manual_seed(seed)
    net = MLP(input_dim, num_actions, cfg.hidden, cfg.layers)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.Linear):
                # Kaiming-uniform as nn.Linear does by default, drawn from our generator.
                bound = 1.0 / module.in_features**0.5
                module.weight.uniform_(-bound, bound, generator=generator)
                module.bias.uniform_(-bound, bound, generator=generator)
    return net
