"""Reservoir memories of Deep CFR samples, stored compactly and expanded when drawn.

Each sample is (information state, legal mask, target, iteration): target = regrets for
the advantage memory, sigma for the strategy memory, a utility for the value memory.
What is stored per sample:

- the information state in the game's compact form (``GameState.compact``: Lost
  Cities 64 bytes, where each card is as that player sees it; a history row holds both
  seats' states), expanded to the network's features in the kernel when a minibatch is
  drawn (``expand``), bit for bit the features the traversal saw;
- the mask, bit-packed;
- the targets of the legal actions only, in the mask's order, in the memory's precision
  (``memory.precision``): illegal actions' targets are never trained on (both losses mask
  them), so a row needs ``target_slots`` values (Lost Cities: at most 16 legal actions of
  106). float16 rounds regrets and sigma to ~1e-3 relative; float32 keeps them exact;
- the iteration, int32.

A Lost Cities sample takes 114 bytes (its float32 features alone would take 4308).
Minibatches are float32. Reservoir sampling keeps a uniform sample of everything ever
inserted once capacity is reached; the replacement draws come from a caller-supplied
keyed stream, so the memory's content depends only on insertion order, which the
trainer fixes by traversal ID. Checkpoints hold the filled rows as stored, each array
column by column (one card's location codes side by side) and deflated.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import torch

from lostcities.rng import Stream

# memory.precision (lostcities.config.MEMORY_PRECISIONS) -> storage dtype of the targets
PRECISIONS = {"float16": np.float16, "float32": np.float32}

# states uint8 (n, state_size) -> features float32 (n, d), in the game's kernel
Expand = Callable[[np.ndarray], np.ndarray]


class ReservoirMemory:
    def __init__(
        self,
        capacity: int,
        state_size: int,
        num_actions: int,
        expand: Expand,
        target_slots: int,
        precision: str = "float16",
    ) -> None:
        """``state_size`` bytes per compact state row; ``target_slots``: the most legal
        actions a row can have (the game's bound; a row with more is refused). capacity
        >= 1 and precision a key of PRECISIONS: validated by lostcities/config_checks.py
        (memory.*)."""
        self.capacity = capacity
        self.state_size = state_size
        self.num_actions = num_actions
        self.target_slots = target_slots
        self.expand = expand
        # np.empty reserves address space only; pages are touched as samples arrive.
        self.states = np.empty((capacity, state_size), dtype=np.uint8)
        self.masks = np.empty((capacity, (num_actions + 7) // 8), dtype=np.uint8)
        self.targets = np.empty((capacity, target_slots), dtype=PRECISIONS[precision])
        self.iterations = np.empty(capacity, dtype=np.int32)
        self.size = 0
        self.seen = 0

    @property
    def bytes_per_sample(self) -> int:
        return (
            self.state_size
            + self.masks.shape[1]
            + self.targets.itemsize * self.target_slots
            + self.iterations.itemsize
        )

    def add(
        self,
        states: np.ndarray,
        masks: np.ndarray,
        targets: np.ndarray,
        iteration: int,
        stream: Stream,
    ) -> None:
        """Insert samples in order: states uint8 (n, state_size), masks (n, A), targets
        (n, A) (only the legal actions' are kept)."""
        n = len(states)
        if n == 0:
            return
        legal = masks.astype(bool)
        packed = np.packbits(legal, axis=1)
        slots_targets = self._pack_targets(legal, targets)
        # Fill free slots first (no randomness), then reservoir-replace.
        free = min(n, self.capacity - self.size)
        if free:
            slots = np.arange(self.size, self.size + free)
            self._write(slots, states[:free], packed[:free], slots_targets[:free], iteration)
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
                    slot_arr, states[row_arr], packed[row_arr], slots_targets[row_arr], iteration
                )

    def _pack_targets(self, legal: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(n, A) targets -> (n, target_slots): each row's legal actions' targets, left to
        right in action order, zeros after."""
        counts = legal.sum(axis=1)
        if counts.size and counts.max() > self.target_slots:
            raise ValueError(
                f"a sample has {counts.max()} legal actions, more than this memory's "
                f"{self.target_slots} target slots (the game's bound on legal actions)"
            )
        out = np.zeros((len(legal), self.target_slots), dtype=self.targets.dtype)
        # row-major order on both sides: row r's k-th legal action goes to slot k
        out[np.arange(self.target_slots) < counts[:, None]] = targets[legal]
        return out

    def clear(self) -> None:
        """Empty the memory (the arrays stay allocated)."""
        self.size = 0
        self.seen = 0

    def _write(self, slots, states, packed, targets, iteration) -> None:
        self.states[slots] = states
        self.masks[slots] = packed
        self.targets[slots] = targets
        self.iterations[slots] = iteration

    def sample(
        self,
        batch_size: int,
        generator: np.random.Generator,
        device: torch.device,
        holdout_stride: int = 0,
    ):
        """A uniform minibatch as tensors: features (b, d) f32 (expanded from the compact
        states), masks (b, A) bool, targets (b, A) f32 (0 at illegal actions), iterations
        (b,) f32. With ``holdout_stride`` k >= 2, never a row of :meth:`held_out` (every
        k-th slot)."""
        if holdout_stride < 2:
            idx = generator.integers(0, self.size, size=min(batch_size, self.size))
            return self.rows(idx, device)
        k = holdout_stride
        trainable = self.size - len(range(0, self.size, k))
        i = generator.integers(0, trainable, size=min(batch_size, trainable))
        return self.rows(i // (k - 1) * k + i % (k - 1) + 1, device)  # skip slots 0, k, 2k...

    def held_out(self, holdout_stride: int) -> np.ndarray:
        """Every ``holdout_stride``-th slot: a uniform sample of the memory whether or not it
        is full (slots fill in insertion order, then are replaced in random order)."""
        return np.arange(0, self.size, holdout_stride)

    def rows(self, idx: np.ndarray, device: torch.device):
        """The samples at ``idx`` as :meth:`sample` returns them."""
        masks = np.unpackbits(self.masks[idx], axis=1, count=self.num_actions).view(bool)
        targets = np.zeros(masks.shape, dtype=np.float32)
        stored = self.targets[idx]
        counts = masks.sum(axis=1)
        targets[masks] = stored[np.arange(self.target_slots) < counts[:, None]]
        return (
            torch.from_numpy(self.expand(self.states[idx])).to(device),
            torch.from_numpy(masks).to(device),
            torch.from_numpy(targets).to(device),
            torch.from_numpy(self.iterations[idx].astype(np.float32)).to(device),
        )

    def state_dict(self) -> dict:
        """The filled rows and the counters that let the reservoir continue exactly; each
        array deflated (:func:`_deflate`). Only tensors, strings and ints, so
        ``torch.load(weights_only=True)`` reads it."""
        n = self.size
        return {
            "capacity": self.capacity,
            "state_size": self.state_size,
            "num_actions": self.num_actions,
            "target_slots": self.target_slots,
            "size": n,
            "seen": self.seen,
            **{name: _deflate(getattr(self, name)[:n]) for name in _ARRAYS},
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore into the preallocated arrays (targets saved in the other precision are
        converted: float32 into a float16 memory is rounded)."""
        if "states" not in state:
            raise ValueError(
                "saved memory holds feature rows, a format from before compact memories; "
                "this version cannot resume it (start a new run)"
            )
        n = int(state["size"])
        if n > self.capacity:
            raise ValueError(
                f"saved memory holds {n} samples, more than this memory's capacity {self.capacity}"
            )
        for key in ("state_size", "num_actions", "target_slots"):
            if int(state[key]) != getattr(self, key):
                raise ValueError(
                    f"saved memory has {key} {int(state[key])}, this one {getattr(self, key)}"
                )
        # A different capacity is accepted (a run resumed with a bigger or smaller reservoir);
        # the same one continues the reservoir draw for draw, since add() needs only size/seen.
        for name in _ARRAYS:
            saved, out = _inflate(state[name], name), getattr(self, name)
            if saved.shape != (n, *out.shape[1:]):
                expected = (n, *out.shape[1:])
                raise ValueError(
                    f"saved {name} have shape {tuple(saved.shape)}, expected {expected}"
                )
            out[:n] = saved
        self.size = n
        self.seen = int(state["seen"])


_ARRAYS = ("states", "masks", "targets", "iterations")


def _deflate(rows: np.ndarray) -> dict:
    """(n, ...) rows -> {"data": uint8 tensor, "shape", "dtype"}: the array transposed
    (column j of every row side by side: long runs of one location code) and deflated."""
    width = int(np.prod(rows.shape[1:]))  # 1 for the iterations
    columns = np.ascontiguousarray(rows.reshape(len(rows), width).T)
    data = np.frombuffer(zlib.compress(columns.tobytes(), 6), dtype=np.uint8)
    return {
        "data": torch.from_numpy(data.copy()),
        "shape": torch.tensor(rows.shape, dtype=torch.int64),
        "dtype": rows.dtype.str,
    }


def _inflate(saved: dict, name: str) -> np.ndarray:
    """The rows :func:`_deflate` stored."""
    shape = tuple(int(x) for x in saved["shape"])
    try:
        raw = zlib.decompress(saved["data"].numpy().tobytes())
    except zlib.error as error:
        raise ValueError(f"saved {name} are corrupt ({error})") from None
    columns = np.frombuffer(raw, dtype=np.dtype(saved["dtype"]))
    n = shape[0]
    if columns.size != int(np.prod(shape)):
        raise ValueError(f"saved {name} hold {columns.size} values, their shape {shape} needs more")
    width = int(np.prod(shape[1:]))
    return columns.reshape(width, n).T.reshape(shape)
