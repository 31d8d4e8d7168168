"""Networks of Deep CFR: advantage and policy networks over information-state features.

Every network maps features (batch, encoding_size) to one value per action of the
game's fixed action space (batch, num_actions): predicted advantages for the
advantage network, logits for the policy (average strategy) network.
``build_network`` picks the kind (``network.kind``): ``mlp`` for any game, or
``color_shared`` for Lost Cities, whose weights are shared by the five colors so
that what it learns about one color holds for all of them.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from lostcities.config import NETWORK_KINDS, NetworkConfig, ValueConfig
from lostcities.games import lost_cities_spec as spec

NORM_EPS = 1e-5
"""The variance floor of ``MLP(normalize_last=True)``'s normalisation (torch's layer_norm
default)."""


class MLP(nn.Module):
    """``layers`` hidden ReLU layers of width ``hidden``, then a linear head (sizes
    validated by lostcities/config_checks.py). With ``normalize_last`` the head reads the
    last hidden layer normalised per row to mean 0 and variance 1 (layer normalisation
    without a learned scale, as Deep CFR's and PokerRL's networks): the head's input keeps
    one scale however far the body's weights drift while the regrets it fits grow."""

    def __init__(
        self, input_dim: int, num_actions: int, hidden: int, layers: int, normalize_last=False
    ) -> None:
        super().__init__()
        self.normalize_last = bool(normalize_last)
        blocks: list[nn.Module] = []
        width = input_dim
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        self.body = nn.Sequential(*blocks)
        self.head = nn.Linear(width, num_actions)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        # features: (batch, input_dim) float32 -> hidden (batch, hidden) -> (batch, num_actions)
        hidden = self.body(features)
        if self.normalize_last:
            hidden = nn.functional.layer_norm(hidden, hidden.shape[-1:], eps=NORM_EPS)
        return self.head(hidden)


# --- color_shared: Lost Cities, one set of weights for the five colors -----------------

# Encoding slices made of five equal per-color blocks, color-major (see lost_cities_spec):
# ten values per color (one per card type) for the per-card slices, 12 slots x 10 ranks
# for the discard piles, 14 statistics for color_stats. Every other slice is global.
PER_COLOR_SLICES = (
    "own_hand", "own_expedition", "opp_expedition", "discards", "opp_known",
    "just_discarded", "playable", "opens", "gap", "color_stats",
)  # fmt: skip
# A color's actions, in the order of its head's outputs: play and discard its 10 card
# types (rank order), then draw its discard pile. Drawing from the deck is global.
ACTIONS_PER_COLOR = 2 * spec.RANKS_PER_COLOR + 1  # 21


def lost_cities_layout() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the color_shared net reads and writes in the Lost Cities layout.

    Returns int64 arrays:
    ``color_features`` (5, 214): row c lists the encoding indices of color c's own
    features, in the same order for every color (slice by slice as in PER_COLOR_SLICES);
    ``global_features`` (7,): the indices of the color-independent features (draw pile
    size, phase, seat, score totals);
    ``action_source`` (106,): for action a, its column in the heads' output
    [color 0's 21 values, ..., color 4's 21 values, the pooled head's value].
    """
    per_color = []
    for name in PER_COLOR_SLICES:
        part = spec.ENCODING_SLICES[name]
        width, rest = divmod(part.stop - part.start, spec.NUM_COLORS)
        assert rest == 0, name
        starts = part.start + width * np.arange(spec.NUM_COLORS)
        per_color.append(starts[:, None] + np.arange(width))  # (5, width)
    color_features = np.concatenate(per_color, axis=1).astype(np.int64)
    global_features = np.setdiff1d(np.arange(spec.ENCODING_SIZE), color_features).astype(np.int64)
    action_source = np.empty(spec.NUM_ACTIONS, dtype=np.int64)
    ranks = np.arange(spec.RANKS_PER_COLOR)
    for color in range(spec.NUM_COLORS):
        column = color * ACTIONS_PER_COLOR
        card_types = color * spec.RANKS_PER_COLOR + ranks
        action_source[spec.PLAY + card_types] = column + ranks
        action_source[spec.DISCARD + card_types] = column + spec.RANKS_PER_COLOR + ranks
        action_source[spec.DRAW_PILE + color] = column + 2 * spec.RANKS_PER_COLOR
    action_source[spec.DRAW_DECK] = spec.NUM_COLORS * ACTIONS_PER_COLOR
    return color_features, global_features, action_source


class ColorSharedNet(nn.Module):
    """Lost Cities features (batch, 1077) -> action values (batch, 106), color-equivariant.

    Each color becomes a token: a trunk shared by the colors (``layers`` ReLU layers of
    width ``hidden``) reads that color's own 214 features and the 7 global ones; then
    ``attention_layers`` pre-norm transformer encoder layers mix the five tokens (no
    positional encoding, so the colors stay exchangeable); a head shared by the colors
    turns each token into its color's 21 action values, and a head on the mean token
    (order-free) gives the draw-from-deck value. Relabelling the colors of the input
    therefore permutes the output the same way (``color_permutations()``), up to float
    rounding: the attention and the mean sum over tokens in another order. Dropout 0.
    The sizes (``attention_heads`` dividing ``hidden``) are validated by
    lostcities/config_checks.py.
    """

    def __init__(self, hidden: int, layers: int, attention_layers: int, attention_heads: int):
        super().__init__()
        color_features, global_features, action_source = lost_cities_layout()
        # Index tables, not weights: kept out of state dicts (weights stay layout-free).
        self.register_buffer("color_features", torch.from_numpy(color_features), False)
        self.register_buffer("global_features", torch.from_numpy(global_features), False)
        self.register_buffer("action_source", torch.from_numpy(action_source), False)
        # First trunk layer split in two: W [x_color; x_global] = W_c x_color + W_g x_global,
        # so the global part is computed once per row instead of once per color.
        self.color_in = nn.Linear(color_features.shape[1], hidden)
        self.global_in = nn.Linear(len(global_features), hidden, bias=False)
        blocks: list[nn.Module] = [nn.ReLU()]
        for _ in range(layers - 1):
            blocks += [nn.Linear(hidden, hidden), nn.ReLU()]
        self.trunk = nn.Sequential(*blocks)
        self.attention = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden,
                attention_heads,
                dim_feedforward=2 * hidden,  # 2x, not the usual 4x: inference cost on CPUs
                dropout=0.0,
                batch_first=True,
                norm_first=True,
            )
            for _ in range(attention_layers)
        )
        # Pre-norm layers leave the residual stream unnormalised: one final LayerNorm.
        self.norm = nn.LayerNorm(hidden) if attention_layers else nn.Identity()
        self.color_head = nn.Linear(hidden, ACTIONS_PER_COLOR)
        self.global_head = nn.Linear(hidden, 1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        # features: (batch, 1077) float32
        colors = features[:, self.color_features]  # (batch, 5, 214)
        shared = features[:, self.global_features]  # (batch, 7)
        tokens = self.color_in(colors) + self.global_in(shared).unsqueeze(1)  # (batch, 5, hidden)
        tokens = self.trunk(tokens)  # (batch, 5, hidden)
        for layer in self.attention:
            tokens = layer(tokens)  # (batch, 5, hidden), each token attends to all five
        tokens = self.norm(tokens)
        per_color = self.color_head(tokens).flatten(1)  # (batch, 5 * 21), color-major
        pooled = self.global_head(tokens.mean(dim=1))  # (batch, 1)
        # (batch, 106) heads' columns -> action order
        return torch.cat([per_color, pooled], dim=1)[:, self.action_source]


def build_network(
    cfg: NetworkConfig, input_dim: int, num_actions: int, seed: int
) -> MLP | ColorSharedNet:
    """A freshly initialised network of kind ``cfg.kind``; ``seed`` makes the initial
    weights reproducible (no draw from torch's global generator decides them)."""
    if cfg.kind == "mlp":
        return _build_mlp(cfg, input_dim, num_actions, seed)
    if cfg.kind == "color_shared":
        if (input_dim, num_actions) != (spec.ENCODING_SIZE, spec.NUM_ACTIONS):
            raise ValueError(
                "network.kind=color_shared needs game=lost_cities (features "
                f"{spec.ENCODING_SIZE}, actions {spec.NUM_ACTIONS}), got {input_dim}, {num_actions}"
            )
        # torch's default initialisers, drawn from the CPU generator seeded here; fork_rng
        # restores the global generator afterwards (built on the CPU: no CUDA draw).
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)
            return ColorSharedNet(cfg.hidden, cfg.layers, cfg.attention_layers, cfg.attention_heads)
    raise ValueError(f"network.kind must be one of {NETWORK_KINDS}, got {cfg.kind!r}")


def value_network(cfg: ValueConfig, encoding_size: int, seed: int) -> MLP:
    """A fresh history-value MLP: both seats' encodings (2 * encoding_size) -> 1."""
    network = NetworkConfig(name="value", hidden=cfg.hidden, layers=cfg.layers)
    return build_network(network, 2 * encoding_size, 1, seed=seed)


def _build_mlp(cfg: NetworkConfig, input_dim: int, num_actions: int, seed: int) -> MLP:
    generator = torch.Generator().manual_seed(seed)
    net = MLP(input_dim, num_actions, cfg.hidden, cfg.layers, cfg.normalize_last)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.Linear):
                # Kaiming-uniform as nn.Linear does by default, drawn from our generator.
                bound = 1.0 / module.in_features**0.5
                module.weight.uniform_(-bound, bound, generator=generator)
                module.bias.uniform_(-bound, bound, generator=generator)
    return net
