"""torch.compile support: what leaves a (possibly compiled) network.

``torch.compile`` wraps a module in an ``OptimizedModule`` whose state dict
keys carry an ``_orig_mod.`` prefix. Checkpoints, weight pushes to traversal
workers and every consumer of weights see only clean state dicts, so a
compiled and a plain run stay interchangeable.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

COMPILED_PREFIX = "_orig_mod."


def strip_compiled_prefix(state: Mapping[str, object]) -> dict[str, object]:
    """The same entries with every ``_orig_mod.`` segment removed from the keys."""
    return {key.replace(COMPILED_PREFIX, ""): value for key, value in state.items()}


def clean_state_dict(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's weights as plain CPU tensors under the original module's key names."""
    original = getattr(module, "_orig_mod", module)
    return {k: v.detach().cpu() for k, v in strip_compiled_prefix(original.state_dict()).items()}


def state_dict_arrays(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """:func:`clean_state_dict` as numpy arrays: pickled by value (no shared-memory file
    handles), the cheap form for one message to a worker process."""
    return {k: v.numpy().copy() for k, v in clean_state_dict(module).items()}
