"""Batch-invariant inference: an MLP forward in which every row is computed alone.

torch's batched forward is not batch invariant on CPU: BLAS picks a different
kernel (gemv for one row, gemm with shape-dependent blocking for many), so a
row's output can change in its last bits with the batch size or with its
neighbours, and one flipped float can flip an action sampled from it. For a
strict-determinism mode the network output of a row must be a function of that
row alone.

``RowwiseMLP`` evaluates an :class:`~lostcities.cfr.networks.MLP` one row at a
time in a fixed order of float32 operations (the Cython kernel
``lostcities.cfr._rowwise``). Per row and layer, with W stored transposed
as (in, out)::

    acc[j] = 0                                  for every output j
    for k in 0 .. in-1 with x[k] != 0:
        acc[j] = acc[j] + x[k] * W[k, j]        (product rounded to float32, no FMA)
    y[j] = acc[j] + b[j]                        then y > 0 ? y : 0 on hidden layers

An MLP built with ``normalize_last`` then normalises its last hidden layer's y (n values),
as ``NORM_EPS``-regularised layer normalisation without a learned scale, in float32 with
every sum in increasing j: mean = sum(y) / n, d = y - mean, y = d / sqrt(sum(d * d) / n +
eps). So the result does not depend on the batch size, on a row's position or on the
other rows, nor on the number of threads. The kernel walks rows in blocks of 8
so that each weight row fetched from memory serves all of them; that interleaves
rows but never mixes them. Vectorising over j reorders no sum either, so builds
for any vector width (SSE2, AVX2, AVX-512) agree bit for bit. Skipping zero
inputs is what makes it fast: Lost Cities encodings are mostly zeros (about 93 of
1077 nonzero) and about half of the post-ReLU hidden activations are zero.
``lostcities.reference.rowwise.rowwise_mlp_reference`` is the pure-numpy twin doing
the same operations in the same order; the two agree bit for bit.
The results agree with torch's forward to float32 rounding, not bitwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from lostcities.cfr import _rowwise
from lostcities.cfr.networks import MLP, NORM_EPS
from lostcities.perf.compile import strip_compiled_prefix

Layer = tuple[np.ndarray, np.ndarray]
"""(W (in, out) float32 C-contiguous, b (out,) float32) of one linear layer."""


class RowwiseMLP:
    """A snapshot of an MLP's weights with a batch-invariant ``forward``.

    Built with :meth:`from_module` or :meth:`from_state_dict`; later changes to the
    module (training) do not reach the snapshot.
    """

    def __init__(self, layers: Sequence[Layer], normalize_last: bool = False) -> None:
        """``layers``: (W (in, out), b (out,)) per linear layer, hidden layers first,
        the head last; every layer but the head is followed by a ReLU.
        ``normalize_last``: the head reads the last hidden layer normalised (as the MLP's
        ``normalize_last``; needs a hidden layer)."""
        if not layers:
            raise ValueError("RowwiseMLP needs at least one layer")
        if normalize_last and len(layers) < 2:
            raise ValueError("RowwiseMLP: normalize_last needs a hidden layer")
        self.normalize_last = bool(normalize_last)
        checked: list[Layer] = []
        width = None
        for i, (weight, bias) in enumerate(layers):
            weight = _float32(weight, f"layer {i} weight")
            bias = _float32(bias, f"layer {i} bias")
            if weight.ndim != 2 or 0 in weight.shape or bias.shape != (weight.shape[1],):
                raise ValueError(
                    f"layer {i}: expected W (in, out) and b (out,), "
                    f"got {weight.shape} and {bias.shape}"
                )
            if width is not None and weight.shape[0] != width:
                raise ValueError(
                    f"layer {i} takes {weight.shape[0]} inputs, the layer before gives {width}"
                )
            width = weight.shape[1]
            # Own read-only copies: the kernel reads them while the GIL is released.
            weight, bias = np.array(weight, order="C"), np.array(bias)
            weight.flags.writeable = bias.flags.writeable = False
            checked.append((weight, bias))
        self.layers: list[Layer] = checked
        self._weights = [w for w, _ in checked]
        self._biases = [b for _, b in checked]

    @classmethod
    def from_module(cls, net: torch.nn.Module) -> RowwiseMLP:
        """From an :class:`MLP` (or a torch.compile'd one)."""
        inner = getattr(net, "_orig_mod", net)
        if not isinstance(inner, MLP):
            raise TypeError(f"RowwiseMLP.from_module expects an MLP, got {type(inner).__name__}")
        return cls.from_state_dict(inner.state_dict(), inner.normalize_last)

    @classmethod
    def from_state_dict(
        cls, state: Mapping[str, torch.Tensor | np.ndarray], normalize_last: bool = False
    ) -> RowwiseMLP:
        """From an MLP's state dict: ``body.{2i}.weight``/``.bias`` per hidden layer i,
        ``head.weight``/``.bias``; weights (out, in) as in ``nn.Linear``, float32 torch
        tensors or numpy arrays. Keys may carry torch.compile's ``_orig_mod.`` prefix.
        ``normalize_last`` is not in a state dict (the normalisation has no weights): say
        it as the MLP was built."""
        params = strip_compiled_prefix(state)
        hidden = sum(1 for key in params if key.startswith("body.") and key.endswith(".weight"))
        names = [f"body.{2 * i}" for i in range(hidden)] + ["head"]
        expected = {f"{name}.{kind}" for name in names for kind in ("weight", "bias")}
        if hidden < 1 or set(params) != expected:
            missing = sorted(expected - set(params))
            unexpected = sorted(set(params) - expected)
            raise ValueError(
                "not the state dict of an MLP (body.{0,2,..}.weight/bias, head.weight/bias): "
                f"missing {missing}, unexpected {unexpected}"
            )
        layers = []
        for name in names:
            weight = _to_numpy(params[f"{name}.weight"], f"{name}.weight")
            bias = _to_numpy(params[f"{name}.bias"], f"{name}.bias")
            if weight.ndim != 2:
                raise ValueError(f"{name}.weight must be 2-D (out, in), got shape {weight.shape}")
            layers.append((weight.T, bias))  # nn.Linear's (out, in) -> (in, out)
        return cls(layers, normalize_last)

    @property
    def input_dim(self) -> int:
        return self.layers[0][0].shape[0]

    @property
    def num_actions(self) -> int:
        return self.layers[-1][0].shape[1]

    def forward(self, features: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Outputs float32 (n, num_actions) for features float32 (n, input_dim).

        Row i of the result depends on row i of ``features`` alone. ``out``: an
        optional float32 C-contiguous (n, num_actions) array to write into.
        """
        features = np.asarray(features)
        if features.dtype != np.float32:
            raise ValueError(f"features must be float32, got {features.dtype}")
        if features.ndim != 2 or features.shape[1] != self.input_dim:
            raise ValueError(
                f"features must have shape (n, {self.input_dim}), got {features.shape}"
            )
        shape = (features.shape[0], self.num_actions)
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        elif (
            not isinstance(out, np.ndarray)
            or out.dtype != np.float32
            or out.shape != shape
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError(f"out must be a writable C-contiguous float32 array of shape {shape}")
        # A contiguous copy changes no value, only the layout the kernel reads.
        _rowwise.forward(
            self._weights,
            self._biases,
            np.ascontiguousarray(features),
            out,
            self.normalize_last,
            NORM_EPS,
        )
        return out

    __call__ = forward

    def __repr__(self) -> str:
        widths = [self.input_dim] + [w.shape[1] for w, _ in self.layers]
        norm = ", normalize_last" if self.normalize_last else ""
        return f"RowwiseMLP({' -> '.join(map(str, widths))}{norm})"


def _to_numpy(value, name: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        if value.dtype != torch.float32:
            raise ValueError(f"{name} must be float32, got {value.dtype}")
        return value.detach().cpu().numpy()
    return _float32(value, name)


def _float32(value, name: str) -> np.ndarray:
    """``value`` as a float32 array; no silent rounding from wider types."""
    array = np.asarray(value)
    if array.dtype != np.float32:
        raise ValueError(f"{name} must be float32, got {array.dtype}")
    return array
