"""A training step of the trainer's networks, under the performance switches.

:class:`TrainingStep` is the one owner of what happens between a minibatch and the
optimiser step: the forward through a network's compiled wrapper (``compile.trainer``),
under autocast when AMP is active, the fp32 loss, backward (scaled by the GradScaler with
fp16), gradient clipping (after unscaling) and the optimiser step; a non-finite loss under
AMP is skipped and counted. It also owns what compiling requires of the networks: they are
re-initialised in place (a compiled wrapper stays valid, dynamo compiles once), their
weights leave as clean state dicts (never ``_orig_mod.`` keys), recompiles are counted
against ``compile.max_recompiles``, and the policy's evaluation forward is compiled with
``compile.inference``.

:class:`lostcities.cfr.trainer.DeepCFRTrainer` holds one and never touches AMP or compile
itself. With ``amp=off`` and no ``compile`` group the step runs the plain fp32 loop op for
op: forward, loss, ``zero_grad``, backward, clipping, step.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping

import torch

from lostcities.config import AmpConfig, CompileConfig, NetworkConfig
from lostcities.perf.amp import MixedPrecision
from lostcities.perf.compile import (
    RecompileWatch,
    below_threshold,
    clean_state_dict,
    compile_module,
    load_clean_state_dict,
    measure_forward_us,
)

__all__ = ["TrainingStep"]


def at_batch(features: torch.Tensor, batch: int) -> torch.Tensor:
    """``features`` (b, d) with its rows repeated in order to (batch, d) when b < batch."""
    rows = features.shape[0]
    if rows >= batch:
        return features
    return features.repeat(-(-batch // rows), 1)[:batch]


class TrainingStep:
    """The trainer's networks under ``amp`` and ``compile`` (None: the group is absent).

    ``grad_clip``: max global gradient norm (0: none). ``batch_invariant``: the
    row-wise evaluation kernel is in use (determinism=strict), which takes precedence
    over ``compile.inference``. ``gate_batch``: the training batch size at which the size
    gate times a forward (0: the first step's batch)."""

    def __init__(
        self,
        amp: AmpConfig,
        compile: CompileConfig | None,
        network: NetworkConfig,
        device: torch.device,
        grad_clip: float,
        batch_invariant: bool = False,
        threads: int = 0,
        gate_batch: int = 0,
    ) -> None:
        """``threads``: torch intra-op threads during a fit (0: leave them as they are)."""
        self.gate_batch = gate_batch
        self.amp = MixedPrecision(amp, device)
        self.threads = threads
        self.compile = compile
        self.grad_clip = grad_clip
        self.compile_inference = compile is not None and compile.inference and not batch_invariant
        self.recompile_watch: RecompileWatch | None = None
        self._compiled: dict[int, torch.nn.Module] = {}  # id(plain net) -> its training wrapper
        self._inference: torch.nn.Module | None = None  # compiled evaluation forward
        self.network = network
        self.device = device
        # id(plain net) -> its eager forward's time (us) at the training batch, on CUDA
        self.gpu_forward_us: dict[int, float] = {}
        if compile is not None and (compile.trainer or compile.inference):
            self.recompile_watch = RecompileWatch(compile.max_recompiles)
            # On CUDA the gate's fourth arm (a measured forward) is decided at the first step
            if device.type != "cuda" and below_threshold(network):
                self._warn_below_threshold(None)
            if compile.inference and batch_invariant:
                warnings.warn(
                    "compile.inference ignored: determinism's batch-invariant row-wise "
                    "evaluation forward takes precedence",
                    stacklevel=3,
                )

    def _warn_below_threshold(self, gpu_forward_us: float | None) -> None:
        network = self.network
        attention = network.attention_layers if network.kind == "color_shared" else 0
        measured = "" if gpu_forward_us is None else f", forward {gpu_forward_us:.0f} us"
        warnings.warn(
            f"torch.compile on network {network.name!r} (hidden {network.hidden}, "
            f"{network.layers} layers, {attention} attention layers{measured}), under the "
            "size where it pays (hidden >= 1024, layers >= 6, >= 2 attention layers or a "
            "GPU forward above 150 us): expect it slower than eager",
            stacklevel=4,
        )

    def _measure_gate(self, net: torch.nn.Module, features: torch.Tensor) -> None:
        """The size gate's measured arm, once per network on CUDA: its eager forward at
        the training batch. ``features`` (b, d) is the first step's minibatch, smaller than
        the training batch while the memory is filling: its rows are repeated up to
        ``gate_batch`` so that the gate does not time a smaller forward than training runs."""
        if self.device.type != "cuda" or id(net) in self.gpu_forward_us:
            return
        us = measure_forward_us(net, at_batch(features, self.gate_batch))
        self.gpu_forward_us[id(net)] = us
        if len(self.gpu_forward_us) == 1 and below_threshold(self.network, us):
            self._warn_below_threshold(us)

    # --- the networks -------------------------------------------------------------------
    def forward_of(self, net: torch.nn.Module) -> torch.nn.Module:
        """What a fit runs ``net``'s forward through: its compiled wrapper (made once per
        module) with ``compile.trainer``, else ``net`` itself."""
        if self.compile is None or not self.compile.trainer:
            return net
        compiled = self._compiled.get(id(net))
        if compiled is None or compiled._orig_mod is not net:
            compiled = compile_module(net, self.compile, self.compile.dynamic)
            self._compiled[id(net)] = compiled
        return compiled

    def inference_forward_of(self, net: torch.nn.Module) -> torch.nn.Module:
        """The module the policy's batched evaluation forward runs: a compiled wrapper with
        symbolic batch sizes (evaluation batches vary) under ``compile.inference``, else
        ``net``."""
        if not self.compile_inference:
            return net
        if self._inference is None or self._inference._orig_mod is not net:
            self._inference = compile_module(net, self.compile, dynamic=True)
        return self._inference

    def forget_compiled(self) -> None:
        """Drop the wrappers (the networks they wrap were replaced, e.g. on resume)."""
        self._compiled.clear()

    @staticmethod
    def reinitialise(net: torch.nn.Module, fresh: Mapping[str, torch.Tensor]) -> None:
        """Load ``fresh`` weights into ``net`` in place: its compiled wrapper stays valid."""
        load_clean_state_dict(net, fresh)

    @staticmethod
    def weights(net: torch.nn.Module) -> dict[str, torch.Tensor]:
        """``net``'s weights as plain CPU tensors under the plain module's key names."""
        return clean_state_dict(net)

    @contextlib.contextmanager
    def fitting(self) -> Iterator[None]:
        """The block of a fit: torch runs ``threads`` intra-op threads in it (when set),
        and the count it had after."""
        previous = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)

    # --- one step -----------------------------------------------------------------------
    def __call__(
        self,
        net: torch.nn.Module,
        forward: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        features: torch.Tensor,
        loss_fn: Callable[..., torch.Tensor],
        *loss_args: torch.Tensor,
    ) -> torch.Tensor:
        """One optimiser step of ``net`` (the plain module; ``forward``: what
        :meth:`forward_of` gave for it) on ``features`` (b, d); ``loss_fn(out, *loss_args)``
        maps the forward's (b, A) output to the fp32 loss, which is returned (not synced)."""
        if forward is not net:
            self._measure_gate(net, features)
        with self.amp.autocast():
            out = forward(features)
        loss = loss_fn(out, *loss_args)
        optimizer.zero_grad(set_to_none=True)
        if self.amp.active:
            self.amp.step(loss, optimizer, net.parameters(), self.grad_clip)
        else:  # amp=off: the plain fp32 step
            loss.backward()
            if self.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), self.grad_clip)
            optimizer.step()
        return loss

    @property
    def skips_nonfinite(self) -> bool:
        """Whether a non-finite loss was skipped rather than stepped (an active AMP): a fit
        then leaves such losses out of its reported mean."""
        return self.amp.active

    # --- bookkeeping --------------------------------------------------------------------
    def check(self) -> None:
        """Stop the run (RecompileLimitError) once dynamo recompiled past the limit."""
        if self.recompile_watch is not None:
            self.recompile_watch.check()

    def metrics(self) -> dict[str, float]:
        """``amp/*`` and, with compile, ``compile/recompiles`` (checked against the limit
        first: this also catches recompiles of the last evaluation) and, on CUDA,
        ``compile/gpu_forward_us`` (the largest eager forward the size gate measured)."""
        metrics = self.amp.metrics()
        if self.recompile_watch is not None:
            self.recompile_watch.check()
            metrics["compile/recompiles"] = self.recompile_watch.recompiles
        if self.gpu_forward_us:
            metrics["compile/gpu_forward_us"] = max(self.gpu_forward_us.values())
        return metrics

    def state_dict(self) -> dict:
        return self.amp.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.amp.load_state_dict(state)
