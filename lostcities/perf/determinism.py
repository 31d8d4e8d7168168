"""The ``determinism`` config group, applied before anything is built.

``strict`` makes torch pick deterministic kernels (and fail loudly on an op that
has none), turns off cudnn autotuning and TF32, and fixes cuBLAS's workspace so
its reductions do not depend on scheduling. Batch invariance of the traversal's
and evaluation's forwards is a separate switch of the same group, read by
:class:`lostcities.cfr.policy.AdvantagePolicy` (see lostcities/cfr/inference.py).
The trainer and every traversal worker call :func:`apply_determinism`.
"""

from __future__ import annotations

import os

import torch

from lostcities.config import DeterminismConfig

CUBLAS_WORKSPACE = ":4096:8"  # a fixed cuBLAS workspace: what torch's docs ask for determinism


def apply_determinism(cfg: DeterminismConfig) -> None:
    """Set torch's global determinism flags for this process from ``cfg``."""
    if not cfg.torch_deterministic:
        return
    # cuBLAS reads the variable when its handle is created: set it before any CUDA work.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
