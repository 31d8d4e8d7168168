"""Reservoir memories of Deep CFR samples, preallocated with compact dtypes.

Each sample is (information-state features, legal mask, target, iteration):
target = regrets for the advantage memory, sigma for the strategy memory.
Storage per sample: features and target in the memory's precision
(``memory.precision``), mask bit-packed, iteration int32. float16 (the default)
halves the bytes: exact for the counts and one-hots the games encode, while
Lost Cities' fractions (the draw pile left, a color's top rank / 9), regrets
and sigma are rounded to ~1e-3 relative; float32 keeps the exact values the
traversals produced. Minibatches are float32 either way. Reservoir sampling keeps a
uniform sample of everything ever inserted once capacity is reached; the
replacement draws come from a caller-supplied keyed stream, so the memory's
content depends only on insertion order, which the trainer fixes by
traversal ID.

Checkpoints hold the filled rows only, and features and targets in a sparse
form when it is smaller (Lost Cities: ~92 of 1077 features and ~7 of 106
regrets nonzero per row, so a row shrinks from 2384 to ~360 bytes): a
bit-packed nonzero pattern plus the nonzero values in row-major order. The
pattern is taken on the values' bits, so -0.0 and NaN round-trip exactly. A
checkpoint loads into a memory of either precision (float32 values saved into a
float16 memory are rounded).
"""

from __future__ import annotations

import numpy as np
import torch

from lostcities.rng import Stream

# memory.precision (lostcities.config.MEMORY_PRECISIONS) -> storage dtype of features, targets
PRECISIONS = {"float16": np.float16, "float32": np.float32}


class ReservoirMemory:
    def __init__(
        self, capacity: int, dim: int, num_actions: int, precision: str = "float16"
    ) -> None:
        # capacity >= 1 and precision a key of PRECISIONS: validated by
        # lostcities/config_checks.py (memory.*)
        self.capacity = capacity
        self.dim = dim
        self.num_actions = num_actions
        dtype = PRECISIONS[precision]
        # np.empty reserves address space only; pages are touched as samples arrive.
        self.features = np.empty((capacity, dim), dtype=dtype)
        self.masks = np.empty((capacity, (num_actions + 7) // 8), dtype=np.uint8)
        self.targets = np.empty((capacity, num_actions), dtype=dtype)
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

    def clear(self) -> None:
        """Empty the memory (the arrays stay allocated)."""
        self.size = 0
        self.seen = 0

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
        # fancy indexing already copied the rows: a float32 memory needs no second copy
        return (
            torch.from_numpy(self.features[idx].astype(np.float32, copy=False)).to(device),
            torch.from_numpy(masks).to(device),
            torch.from_numpy(self.targets[idx].astype(np.float32, copy=False)).to(device),
            torch.from_numpy(self.iterations[idx].astype(np.float32)).to(device),
        )

    def state_dict(self) -> dict:
        """The filled rows and the counters that let the reservoir continue exactly.

        Features and targets are stored by :func:`_pack_rows` (dense or sparse, whichever
        is smaller); only tensors, ints and nested dicts, so ``torch.load(weights_only=True)``
        reads it back.
        """
        n = self.size
        return {
            "capacity": self.capacity,
            "dim": self.dim,
            "num_actions": self.num_actions,
            "size": n,
            "seen": self.seen,
            "features": _pack_rows(self.features[:n]),
            "masks": torch.from_numpy(self.masks[:n].copy()),
            "targets": _pack_rows(self.targets[:n]),
            "iterations": torch.from_numpy(self.iterations[:n].copy()),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore into the preallocated arrays. Also reads older states whose arrays were
        saved whole (capacity rows, of which the first ``size`` are filled)."""
        n = int(state["size"])
        if n > self.capacity:
            raise ValueError(
                f"saved memory holds {n} samples, more than this memory's capacity {self.capacity}"
            )
        for key, want in (("dim", self.dim), ("num_actions", self.num_actions)):
            if key in state and int(state[key]) != want:  # older states lack these keys
                raise ValueError(f"saved memory has {key} {int(state[key])}, this one {want}")
        # A different capacity is accepted (a run resumed with a bigger or smaller reservoir);
        # the same one continues the reservoir draw for draw, since add() needs only size/seen.
        _unpack_rows(state["features"], n, self.features, "features")
        _unpack_rows(state["targets"], n, self.targets, "targets")
        for name in ("masks", "iterations"):
            _copy_rows(state[name].numpy(), n, getattr(self, name), name)
        self.size = n
        self.seen = int(state["seen"])


# Rows packed per step: bounds the temporary bool pattern (chunk x d bytes, ~35 MB for
# Lost Cities) whatever the memory's size.
_CHUNK = 32_768


def _pack_rows(rows: np.ndarray) -> torch.Tensor | dict:
    """(n, d) float16 or float32 rows -> a dense tensor (n, d), or, when smaller, a sparse
    dict: ``nonzero`` (n, ceil(d/8)) uint8 bit-packed pattern, ``values`` (nnz,) of the
    rows' dtype in row-major order."""
    n, d = rows.shape
    patterns, values = [], []
    for lo in range(0, n, _CHUNK):
        chunk = rows[lo : lo + _CHUNK]
        # Bits, not values: -0.0 == 0 would be dropped and come back as +0.0.
        nonzero = chunk.view(f"u{rows.itemsize}") != 0
        patterns.append(np.packbits(nonzero, axis=1))
        values.append(chunk[nonzero])
    nnz = sum(len(v) for v in values)
    if nnz * rows.itemsize + n * ((d + 7) // 8) >= rows.nbytes:
        return torch.from_numpy(rows.copy())
    return {
        "nonzero": torch.from_numpy(_concat(patterns, (0, (d + 7) // 8), np.uint8)),
        "values": torch.from_numpy(_concat(values, (0,), rows.dtype)),
    }


def _unpack_rows(saved: torch.Tensor | dict, n: int, out: np.ndarray, name: str) -> None:
    """Write the first ``n`` rows stored by :func:`_pack_rows` (or an older whole array of
    capacity rows) into ``out[:n]``."""
    if not isinstance(saved, dict):
        _copy_rows(saved.numpy(), n, out, name)
        return
    d = out.shape[1]
    nonzero, values = saved["nonzero"].numpy(), saved["values"].numpy()
    if nonzero.shape != (n, (d + 7) // 8):
        raise ValueError(
            f"saved {name} pattern has shape {nonzero.shape}, expected {(n, (d + 7) // 8)}"
        )
    start = 0
    for lo in range(0, n, _CHUNK):
        pattern = np.unpackbits(nonzero[lo : lo + _CHUNK], axis=1, count=d).view(bool)
        count = int(np.count_nonzero(pattern))
        if start + count > len(values):
            raise ValueError(f"saved {name} hold {len(values)} values, their pattern needs more")
        block = out[lo : lo + len(pattern)]  # a view: assignments below write into out
        block[...] = 0
        block[pattern] = values[start : start + count]
        start += count
    if start != len(values):
        raise ValueError(f"saved {name} hold {len(values)} values, their pattern needs {start}")


def _copy_rows(saved: np.ndarray, n: int, out: np.ndarray, name: str) -> None:
    # saved: (n or more, ...) rows; older states stored whole arrays, whose first n rows count.
    if len(saved) < n or saved.shape[1:] != out.shape[1:]:
        expected = (n, *out.shape[1:])
        raise ValueError(f"saved {name} have shape {tuple(saved.shape)}, expected {expected}")
    out[:n] = saved[:n]


def _concat(parts: list[np.ndarray], empty_shape: tuple[int, ...], dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(empty_shape, dtype=dtype)
