"""Pure-numpy twin of the batch-invariant row-wise MLP kernel (``lostcities/cfr/_rowwise.pyx``).

The same float32 operations in the same order as the kernel (see lostcities/cfr/inference.py
for the order), so the two agree bit for bit (tests/cfr/test_rowwise_inference.py). Slow:
a Python loop over rows and nonzero inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lostcities.cfr.inference import Layer
from lostcities.cfr.networks import NORM_EPS


def rowwise_mlp_reference(
    layers: Sequence[Layer], features: np.ndarray, normalize_last: bool = False
) -> np.ndarray:
    """Pure-numpy twin of the kernel: same float32 operations in the same order.

    ``layers`` as ``RowwiseMLP.layers``; features (n, in) -> (n, out of the last layer);
    ``normalize_last`` as ``RowwiseMLP.normalize_last``.
    Slow (a Python loop over rows and nonzero inputs); for the property tests.
    """
    features = np.asarray(features, dtype=np.float32)
    out = np.empty((features.shape[0], layers[-1][0].shape[1]), dtype=np.float32)
    with np.errstate(all="ignore"):  # inf/nan propagate silently, as in C
        _reference_rows(layers, features, out, normalize_last)
    return out


def _reference_rows(
    layers: Sequence[Layer], features: np.ndarray, out: np.ndarray, normalize_last: bool
) -> None:
    for r, row in enumerate(features):
        x = row
        for i, (weight, bias) in enumerate(layers):
            acc = np.zeros(weight.shape[1], dtype=np.float32)
            for k in np.flatnonzero(x):
                # float32 product rounded, then float32 add, elementwise over j.
                acc += np.float32(x[k]) * weight[k]
            y = acc + bias
            x = np.where(y > 0, y, np.float32(0)) if i < len(layers) - 1 else y
            if normalize_last and i == len(layers) - 2:
                x = _normalized(x)
        out[r] = x


def _normalized(y: np.ndarray) -> np.ndarray:
    """The kernel's normalisation of one row y (n,) float32: every sum in increasing index,
    each operation rounded to float32 (numpy's own sums are pairwise, so not used)."""
    n = np.float32(len(y))
    total = np.float32(0)
    for value in y:
        total = np.float32(total + value)
    d = y - np.float32(total / n)
    total = np.float32(0)
    for value in d:
        total = np.float32(total + np.float32(value * value))
    scale = np.sqrt(np.float32(np.float32(total / n) + np.float32(NORM_EPS)))
    return d / scale
