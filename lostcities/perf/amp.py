"""The ``amp`` config group: mixed precision for the trainer's fitting loop.

:class:`MixedPrecision` is owned by :class:`lostcities.cfr.trainer.DeepCFRTrainer`
and used only in ``DeepCFRTrainer._fit`` (both phases: advantage and policy).
When active it provides the autocast context of the forward, one shared
``torch.amp.GradScaler`` (fp16 only; bf16 has fp32's exponent range and needs
none), ``unscale_`` before gradient clipping, and a guard that skips and counts
a step whose loss is NaN or inf. The trainer computes its losses in fp32 (the
network output is cast first), so only the network's own ops run in low
precision.

Low precision is active by default only where it is known to be fast: fp16 on CUDA,
bf16 on CUDA when the GPU supports it. Anywhere else (a CPU) a requested fp16/bf16
warns once and the run is fp32 on the unchanged ``amp=off`` path. CPU autocast is no
reliable speed-up: fp16 is many times slower than fp32 there, and bf16 is faster or
slower by the CPU's bf16 instructions (benchmarks/bench_trainer_phase.py --force-cpu-amp;
numbers in experiments/perf_switches/README.md). So bf16 on a CPU is an explicit opt-in
(``amp.on_cpu``, the ``amp=bf16_cpu`` choice), to be judged by its own A/B and drift
check; fp16 on a CPU stays refused. ``amp=off`` runs none of this module's step logic:
the trainer keeps the pre-AMP code path.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable

import torch

from lostcities.config import AmpConfig

DTYPES = {"off": None, "fp16": torch.float16, "bf16": torch.bfloat16}


class MixedPrecision:
    """Autocast + GradScaler + non-finite guard for one trainer (see the module doc).

    ``cfg.on_cpu`` lets bf16 run on a CPU (the training opt-in). ``allow_cpu`` turns any
    low precision on even on a CPU, fp16 included (GradScaler and autocast both exist
    there): for tests of the step logic and for measuring the CPU slowdown, never for
    training.
    """

    def __init__(self, cfg: AmpConfig, device: str | torch.device, allow_cpu: bool = False) -> None:
        # cfg.dtype is a key of DTYPES: validated by lostcities/config_checks.py
        self.device = torch.device(device)
        self.requested = cfg.dtype
        self.dtype = DTYPES[cfg.dtype]
        why_not = None if self.dtype is None else _unsupported_reason(self.dtype, self.device)
        opted_in = allow_cpu or (cfg.on_cpu and self.dtype == torch.bfloat16)
        if why_not is not None and opted_in and self.device.type == "cpu":
            why_not = None
        self.active = self.dtype is not None and why_not is None
        if why_not is not None:
            warnings.warn(
                f"amp={cfg.dtype} requested but {why_not}: training runs fp32", stacklevel=2
            )
        self.scaler = None
        if self.active and self.dtype == torch.float16:
            self.scaler = torch.amp.GradScaler(
                self.device.type, init_scale=cfg.init_scale, growth_interval=cfg.growth_interval
            )
        self.nonfinite_loss_count = 0  # cumulative over the run (restored on resume)

    def autocast(self) -> contextlib.AbstractContextManager:
        """Context of the network forward: autocast when active, else nothing."""
        if not self.active:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def step(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Iterable[torch.Tensor],
        grad_clip: float,
    ) -> bool:
        """Backward and optimizer step of an active AMP step; False if the loss was
        non-finite: then it is counted and skipped (no backward, no step), and the run goes
        on. With fp16 the scaler also skips, inside ``scaler.step``, a step whose gradients
        overflowed, and lowers the scale (seen in ``amp/grad_scale``; not re-read here, which
        would cost one more device sync per step). Gradients are unscaled before clipping,
        so ``grad_clip`` means what it says. The caller has already zeroed the gradients.
        """
        if not bool(torch.isfinite(loss)):
            self.nonfinite_loss_count += 1
            return False
        if self.scaler is None:  # bf16: fp32's exponent range, no scaling needed
            loss.backward()
            if grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
            optimizer.step()
            return True
        self.scaler.scale(loss).backward()
        if grad_clip > 0:
            self.scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
        self.scaler.step(optimizer)  # skipped inside if a gradient is inf/NaN
        self.scaler.update()
        return True

    def metrics(self) -> dict[str, float]:
        """``amp/*`` metrics of the current state (added to every iteration's metrics)."""
        return {
            "amp/active": float(self.active),
            "amp/grad_scale": 1.0 if self.scaler is None else float(self.scaler.get_scale()),
            "amp/nonfinite_loss_count": self.nonfinite_loss_count,
        }

    def state_dict(self) -> dict:
        return {
            "nonfinite_loss_count": self.nonfinite_loss_count,
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore the count, and the scale if both runs use a scaler (a run resumed with
        another ``amp`` choice keeps its own fresh scaler)."""
        self.nonfinite_loss_count = int(state.get("nonfinite_loss_count", 0))
        if self.scaler is not None and state.get("scaler") is not None:
            self.scaler.load_state_dict(state["scaler"])


def _unsupported_reason(dtype: torch.dtype, device: torch.device) -> str | None:
    """Why ``dtype`` would not speed up training on ``device`` (None: it would)."""
    if device.type == "cpu":
        if dtype == torch.float16:
            return "the device is a CPU, where fp16 autocast is many times slower than fp32"
        return (
            "the device is a CPU, where bf16 autocast depends on the CPU's bf16 support "
            "(opt in with amp=bf16_cpu)"
        )
    if device.type != "cuda":
        return f"device {device.type!r} has no known fast {dtype} path"
    if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        return "this GPU does not support bf16"
    return None
