"""Reservoir memories of Deep CFR samples, preallocated with compact dtypes.

Each sample is (information-state features, legal mask, target, iteration):
target = regrets for the advantage memory, sigma for the strategy memory.
Storage per sample: features float16 (exact for the counts and one-hots the
games encode; Lost Cities' fractions, e.g. the draw pile left or a color's
top rank / 9, are rounded to ~1e-3), mask
bit-packed, target float16, iteration int32. Reservoir sampling keeps a
uniform sample of everything ever inserted once capacity is reached; the
replacement draws come from a caller-supplied keyed stream, so the memory's
content depends only on insertion order, which the trainer fixes by
traversal ID.
"""

from __future__ import annotations

import numpy as np
import torch

from lostcities.rng import Stream


class ReservoirMemory:
    def __init__(self, capacity: int, dim: int, num_actions: int) -> None:
        if capacity < 1:
            raise ValueError(f"memory capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.dim = dim
        self.num_actions = num_actions
        # np.empty reserves address space only; pages are touched as samples arrive.
        self.features = np.empty((capacity, dim), dtype=np.float16)
        self.masks = np.empty((capacity, (num_actions + 7) // 8), dtype=np.uint8)
        self.targets = np.empty((capacity, num_actions), dtype=np.float16)
        self.iterations = np.empty(capacity, dtype=np.int32)
        self.size = 0
        self.seen = 0

    @property
    def bytes_per_sample(self) -> int:
        return (
            self.features.itemsize * self.dim
            + self.masks.shape[1]
            + self.targets.itemsize * self.num_actions
            + self.iterations.itemsize
        )

    def add(
        self,
        features: np.ndarray,
        masks: np.ndarray,
        targets: np.ndarray,
        iteration: int,
        stream: Stream,
    ) -> None:
        """Insert samples in order: features (n, d), masks (n, A), targets (n, A)."""
        n = len(features)
        if n == 0:
            return
        packed = np.packbits(masks.astype(bool), axis=1)
        # Fill free slots first (no randomness), then reservoir-replace.
        free = min(n, self.capacity - self.size)
        if free:
            slots = np.arange(self.size, self.size + free)
            self._write(slots, features[:free], packed[:free], targets[:free], iteration)
            self.size += free
            self.seen += free
        if free < n:
            rows, slots = [], []
            for i in range(free, n):
                self.seen += 1
                j = stream.below(self.seen)
                if j < self.capacity:
                    rows.append(i)
                    slots.append(j)
            if rows:
                # A later sample replacing the same slot must win: keep the last write.
                last = dict(zip(slots, rows, strict=True))
                slot_arr = np.fromiter(last.keys(), dtype=np.int64)
                row_arr = np.fromiter(last.values(), dtype=np.int64)
                self._write(
                    slot_arr, features[row_arr], packed[row_arr], targets[row_arr], iteration
                )

    def _write(self, slots, features, packed, targets, iteration) -> None:
        self.features[slots] = features
        self.masks[slots] = packed
        self.targets[slots] = targets
        self.iterations[slots] = iteration

    def sample(self, batch_size: int, generator: np.random.Generator, device: torch.device):
        """A uniform minibatch as tensors: features (b, d) f32, masks (b, A) bool,
        targets (b, A) f32, iterations (b,) f32."""
        idx = generator.integers(0, self.size, size=min(batch_size, self.size))
        masks = np.unpackbits(self.masks[idx], axis=1, count=self.num_actions).astype(bool)
        return (
            torch.from_numpy(self.features[idx].astype(np.float32)).to(device),
            torch.from_numpy(masks).to(device),
            torch.from_numpy(self.targets[idx].astype(np.float32)).to(device),
            torch.from_numpy(self.iterations[idx].astype(np.float32)).to(device),
        )

    def state_dict(self) -> dict:
        n = self.size
        return {
            "capacity": self.capacity,
            "size": n,
            "seen": self.seen,
            "features": torch.from_numpy(self.features[:n].copy()),
            "masks": torch.from_numpy(self.masks[:n].copy()),
            "targets": torch.from_numpy(self.targets[:n].copy()),
            "iterations": torch.from_numpy(self.iterations[:n].copy()),
        }

    def load_state_dict(self, state: dict) -> None:
        n = int(state["size"])
        if n > self.capacity:
            raise ValueError(f"memory holds {n} samples, more than capacity {self.capacity}")
        for name in ("features", "masks", "targets", "iterations"):
            getattr(self, name)[:n] = state[name].numpy()
        self.size = n
        self.seen = int(state["seen"])
