"""torch.compile support: what leaves a (possibly compiled) network.

``torch.compile`` wraps a module in an ``OptimizedModule`` whose state dict
keys carry an ``_orig_mod.`` prefix. Checkpoints, weight pushes to traversal
workers and every consumer of weights see only clean state dicts, so a
compiled and a plain run stay interchangeable.

The ``compile`` config group (:class:`lostcities.config.CompileConfig`) is read by
the trainer: :func:`compile_module` wraps a network once, :func:`load_clean_state_dict`
re-initialises or resumes it in place (so dynamo does not recompile), and a
:class:`RecompileWatch` counts dynamo's recompilations and stops the run past
``compile.max_recompiles``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping

import numpy as np
import torch

from lostcities.config import COMPILE_MODES, CompileConfig, NetworkConfig

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


def load_clean_state_dict(module: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Load clean (or prefixed) weights into a plain or compiled module, in place: a
    compiled wrapper loads through its ``_orig_mod``, so its parameters keep their
    identity and dynamo's graph stays valid."""
    getattr(module, "_orig_mod", module).load_state_dict(strip_compiled_prefix(state))


# The compile design note's size gate (its "threshold rule"): hidden >= 1024, or layers >= 6,
# or >= 2 attention layers, or an eager forward above ~150 us at the trainer's batch size on
# the target GPU. Below all four, compile's dispatch overhead outweighs the fused kernels
# (experiments/perf_switches/README.md). The forward arm counts on a CUDA device only:
# its 150 us was calibrated on a GPU, and a CPU's forward of any network exceeds it.
GATE_HIDDEN, GATE_LAYERS, GATE_ATTENTION_LAYERS = 1024, 6, 2
GATE_FORWARD_US = 150.0


def below_threshold(network: NetworkConfig, gpu_forward_us: float | None = None) -> bool:
    """True for a network too small for torch.compile to pay on: hidden < 1024, fewer
    than 6 layers, fewer than 2 attention layers (an MLP has none: ``attention_layers``
    is read by ``color_shared`` only), and no eager forward measured on a GPU above
    150 us (``gpu_forward_us``: None where none was measured on CUDA)."""
    attention = network.attention_layers if network.kind == "color_shared" else 0
    return (
        network.hidden < GATE_HIDDEN
        and network.layers < GATE_LAYERS
        and attention < GATE_ATTENTION_LAYERS
        and (gpu_forward_us is None or gpu_forward_us <= GATE_FORWARD_US)
    )


def measure_forward_us(net: torch.nn.Module, features: torch.Tensor, repeats: int = 20) -> float:
    """Median time in microseconds of ``net``'s eager forward on ``features`` (b, d), no
    gradient, after 3 warm-up calls; on CUDA each call is synchronised, so the time is the
    kernels' and not the launch's."""
    sync = torch.cuda.synchronize if features.device.type == "cuda" else (lambda: None)
    times = []
    with torch.no_grad():
        for i in range(3 + repeats):
            sync()
            start = time.perf_counter()
            net(features)
            sync()
            if i >= 3:
                times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def compile_module(module: torch.nn.Module, cfg: CompileConfig, dynamic: bool) -> torch.nn.Module:
    """``torch.compile(module)`` with ``cfg``'s mode and fullgraph. ``dynamic``: symbolic
    batch sizes from the start; False passes torch's default (None: static first, and one
    recompile with symbolic sizes if a shape changes) rather than dynamo's strict
    ``dynamic=False``, which would recompile for every new batch size (an early iteration
    whose memory holds fewer samples than a batch trains on smaller batches).

    A wrapper with symbolic batch sizes (the evaluation forward of ``compile.inference``,
    or ``compile.dynamic``) refuses ``mode=reduce-overhead`` (ValueError, one line): CUDA
    graphs are recorded for fixed shapes, and evaluation batches vary in size."""
    if dynamic and cfg.mode == "reduce-overhead":
        modes = ", ".join(m for m in COMPILE_MODES if m != "reduce-overhead")
        raise ValueError(
            f"compile.mode=reduce-overhead: expected one of {modes} for a wrapper with "
            "varying batch sizes (compile.inference's evaluation forward, compile.dynamic): "
            "CUDA graphs need fixed shapes"
        )
    return torch.compile(
        module, mode=cfg.mode, fullgraph=cfg.fullgraph, dynamic=True if dynamic else None
    )


class RecompileLimitError(ValueError):
    """Dynamo recompiled more often than ``compile.max_recompiles`` allows (one line)."""


_recompiles = 0  # dynamo recompilations in this process (see recompile_count)


def _on_compile_start(args) -> None:
    global _recompiles
    from torch._dynamo.callback import CallbackTrigger
    from torch._guards import CompileId

    if args.callback_trigger != CallbackTrigger.DYNAMO:
        return  # a deferred backward compile belongs to a forward already counted
    compile_id = CompileId.from_string(args.compile_id)
    if compile_id is not None and (compile_id.frame_compile_id or 0) > 0:
        _recompiles += 1


def recompile_count() -> int:
    """Dynamo recompilations in this process since the first call: compiles of a frame
    (code object) that already holds a compiled graph, i.e. compile ids ``f/n`` with
    n > 0 (a guard failed: new shape, grad mode, module attribute, compile options).
    First compiles (``f/0``) and deferred backward compiles are not counted. Counted by
    a dynamo compile-start callback, (re)installed by every call: ``torch._dynamo.reset()``
    drops callbacks (and starts frame ids afresh)."""
    import torch._dynamo.callback  # here, not at import: traversal workers never load dynamo

    handler = torch._dynamo.callback.callback_handler
    if _on_compile_start not in handler.start_callbacks:
        handler.register_start_callback(_on_compile_start)
    return _recompiles


class RecompileWatch:
    """Recompiles since this watch was made, checked against a limit.

    Dynamo stops compiling a function after ``torch._dynamo.config.recompile_limit``
    cache entries (8) and silently runs it eagerly from then on; a watch raises that
    process-wide limit to ``limit + 2`` if lower, so the run stops with our message
    instead of going on slower.
    """

    def __init__(self, limit: int) -> None:
        import torch._dynamo

        self.limit = limit
        self.start = recompile_count()
        config = torch._dynamo.config  # n recompiles of a function: n + 1 cache entries
        config.recompile_limit = max(config.recompile_limit, limit + 2)

    @property
    def recompiles(self) -> int:
        return recompile_count() - self.start

    def check(self) -> None:
        """Raise :class:`RecompileLimitError` once past the limit."""
        if self.recompiles > self.limit:
            raise RecompileLimitError(
                f"torch.compile recompiled {self.recompiles} times, more than "
                f"compile.max_recompiles={self.limit} (shapes or modules keep changing; "
                'TORCH_LOGS="recompiles" names the guard that failed)'
            )
