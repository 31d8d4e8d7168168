# cython: language_level=3
"""Private kernel: MLP forward one row at a time, in a fixed order of float operations.

``lostcities/cfr/inference.py`` is the documented wrapper (``RowwiseMLP``) and holds
the pure-numpy twin ``rowwise_mlp_reference`` that performs the same float32
operations in the same order, so the two agree bit for bit.

Per row and layer (W stored transposed, (in, out) row-major):
    acc[j] = 0 for every j
    for k = 0 .. in-1 with x[k] != 0:  acc[j] = acc[j] + x[k] * W[k, j] for every j
    y[j] = acc[j] + b[j]                (then y > 0 ? y : 0 on hidden layers)
With ``normalize_last`` the last hidden layer's y (n values) is then normalised, all in
float32, sums in increasing j:
    mean = (y[0] + ... + y[n-1]) / n;   d[j] = y[j] - mean
    var = (d[0] * d[0] + ... + d[n-1] * d[n-1]) / n;   y[j] = d[j] / sqrt(var + EPS)
Vectorising the j loop reorders nothing: each acc[j] still sums over k in
increasing order. Built with -ffp-contract=off, so x[k] * W[k, j] is rounded
to float32 before the add (no FMA), as numpy does.
"""

from libc.math cimport sqrtf
from libc.stdlib cimport free, malloc

import numpy as np


# Rows per block: each row of W is fetched once per block and reused from L1 by every
# row of the block (a 512x3 MLP holds 4.5 MB of weights, more than a core's L2, so one
# row at a time is bound by streaming them: 1.5x slower at 512x3). Blocking interleaves rows, it never mixes them: every row
# goes through exactly the operations listed above, so its result does not depend on
# the block. Accumulators of a block: BLOCK * out floats (16 KiB at out = 512).
cdef enum:
    BLOCK = 8


cdef inline void _dense(const float** x, Py_ssize_t rows, Py_ssize_t n_in, const float* w,
                        const float* b, Py_ssize_t n_out, bint relu, float** y) noexcept nogil:
    # x[r] (n_in,) for r < rows, w (n_in, n_out) row-major, b (n_out,) -> y[r] (n_out,);
    # y[r] is row r's accumulator.
    cdef Py_ssize_t j, k, r
    cdef float xk, v
    cdef float* acc
    cdef const float* wk
    for r in range(rows):
        acc = y[r]
        for j in range(n_out):
            acc[j] = 0.0
    for k in range(n_in):
        wk = w + k * n_out
        for r in range(rows):
            xk = x[r][k]
            if xk != 0.0:  # encodings are mostly zeros, hidden activations about half
                acc = y[r]
                # Unrolled by 8 (gcc still vectorises it across j): the plain loop is so tight
                # that its speed hung on its code alignment (18k or 28k rows/s at 512x3).
                j = 0
                while j + 8 <= n_out:
                    acc[j + 0] = acc[j + 0] + xk * wk[j + 0]
                    acc[j + 1] = acc[j + 1] + xk * wk[j + 1]
                    acc[j + 2] = acc[j + 2] + xk * wk[j + 2]
                    acc[j + 3] = acc[j + 3] + xk * wk[j + 3]
                    acc[j + 4] = acc[j + 4] + xk * wk[j + 4]
                    acc[j + 5] = acc[j + 5] + xk * wk[j + 5]
                    acc[j + 6] = acc[j + 6] + xk * wk[j + 6]
                    acc[j + 7] = acc[j + 7] + xk * wk[j + 7]
                    j += 8
                while j < n_out:
                    acc[j] = acc[j] + xk * wk[j]
                    j += 1
    for r in range(rows):
        acc = y[r]
        for j in range(n_out):
            v = acc[j] + b[j]
            if relu:
                acc[j] = v if v > 0.0 else 0.0
            else:
                acc[j] = v


cdef inline void _normalize(float* y, Py_ssize_t n, float eps) noexcept nogil:
    # y (n,) -> (y - mean) / sqrt(var + eps), in place; sums in increasing index.
    cdef Py_ssize_t j
    cdef float total = 0.0, mean, d, scale
    for j in range(n):
        total = total + y[j]
    mean = total / <float> n
    total = 0.0
    for j in range(n):
        d = y[j] - mean
        y[j] = d
        total = total + d * d
    scale = sqrtf(total / <float> n + eps)
    for j in range(n):
        y[j] = y[j] / scale


def forward(list weights, list biases, const float[:, ::1] features, float[:, ::1] out,
            bint normalize_last=False, float eps=1e-5):
    """out (n, A) = MLP(features (n, d)); weights[i] (in_i, out_i), biases[i] (out_i,).
    ``normalize_last``: normalise the last hidden layer's activations of each row (mean 0,
    variance 1 with ``eps``) before the head.

    Shapes are checked by the wrapper; only what would corrupt memory is rechecked here.
    """
    cdef Py_ssize_t n_layers = len(weights)
    cdef Py_ssize_t n = features.shape[0]
    cdef Py_ssize_t block, start, rows, r, i, widest = 0
    cdef const float[:, ::1] w
    cdef const float[::1] b
    if n_layers < 1 or len(biases) != n_layers or out.shape[0] != n:
        raise ValueError("rowwise forward: inconsistent layers or row counts")
    cdef const float** w_ptr = <const float**> malloc(n_layers * sizeof(float*))
    cdef const float** b_ptr = <const float**> malloc(n_layers * sizeof(float*))
    cdef Py_ssize_t* dims = <Py_ssize_t*> malloc((n_layers + 1) * sizeof(Py_ssize_t))
    # (2, BLOCK, widest hidden width): ping-pong hidden activations of one block
    cdef float[:, :, ::1] scratch
    cdef const float* x[BLOCK]
    cdef float* y[BLOCK]
    if w_ptr == NULL or b_ptr == NULL or dims == NULL:
        free(w_ptr)
        free(b_ptr)
        free(dims)
        raise MemoryError()
    try:
        dims[0] = features.shape[1]
        for i in range(n_layers):
            w = weights[i]
            b = biases[i]
            if w.shape[0] != dims[i] or w.shape[0] < 1 or w.shape[1] < 1 \
                    or b.shape[0] != w.shape[1]:
                raise ValueError(f"rowwise forward: layer {i} does not fit its input")
            w_ptr[i] = &w[0, 0]
            b_ptr[i] = &b[0]
            dims[i + 1] = w.shape[1]
            if i < n_layers - 1 and dims[i + 1] > widest:
                widest = dims[i + 1]
        if out.shape[1] != dims[n_layers]:
            raise ValueError("rowwise forward: out has the wrong width")
        scratch = np.empty((2, BLOCK, max(widest, 1)), dtype=np.float32)
        with nogil:
            for block in range((n + BLOCK - 1) // BLOCK):
                start = block * BLOCK
                rows = min(BLOCK, n - start)
                for r in range(rows):
                    x[r] = &features[start + r, 0]
                for i in range(n_layers):
                    for r in range(rows):
                        y[r] = &out[start + r, 0] if i == n_layers - 1 else &scratch[i & 1, r, 0]
                    _dense(x, rows, dims[i], w_ptr[i], b_ptr[i], dims[i + 1],
                           i < n_layers - 1, y)
                    if normalize_last and i == n_layers - 2:
                        for r in range(rows):
                            _normalize(y[r], dims[i + 1], eps)
                    for r in range(rows):
                        x[r] = y[r]
    finally:
        free(w_ptr)
        free(b_ptr)
        free(dims)
