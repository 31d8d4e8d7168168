"""Start-up checks of every configuration value (the schemas in :mod:`lostcities.config`).

Hydra and OmegaConf check keys and types at compose time; :func:`check_config` checks
values, so a bad one fails before any work (no worker spawned, no MLflow run opened) with
one line naming the key, the value and what is expected::

    run.iterations=0: expected an integer >= 1

``RULES`` holds one rule per field of config.py, in the order of the dataclasses (a new
field without a rule fails tests/test_config_checks.py); ``CROSS_RULES`` the combinations
of values the code relies on. Sets of names come from the modules that own them, where
one does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from lostcities.cfr._traverse import SCHEMES
from lostcities.cfr.initial import INITIAL_STRATEGIES
from lostcities.cfr.networks import KINDS
from lostcities.cfr.trainer import LR_SCHEDULES, POLICY_TRAINING, UPDATES
from lostcities.cfr.workers import EXECUTORS
from lostcities.config import TrainConfig
from lostcities.eval.agents import AGENT_KINDS, PLAY_MODES
from lostcities.eval.opponents import BOT_NAMES
from lostcities.games import GAMES
from lostcities.perf.amp import DTYPES

UTILITIES = ("score_diff", "win_loss")
EVAL_AGENTS = tuple(k for k in AGENT_KINDS if k != "sigma1")  # sigma1 is the paired baseline
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
EXPERIMENT_KINDS = ("ab", "drift")  # lostcities/experiments/report.py
MAX_TURNS = 30000  # the Lost Cities kernel's turn counter (lostcities/games/lost_cities.py)
SEED_LIMIT = 2**64  # seeds are uint64 in the C random streams (lostcities/_rng.pxd)
DEVICE = re.compile(r"cpu|mps|cuda(:\d+)?")


class Rule(NamedTuple):
    """A field's rule: ``ok(value)`` and the text after ``expected`` in the error."""

    ok: Callable[[Any], bool]
    expected: str


class CrossRule(NamedTuple):
    """A rule on a combination of fields, reported under ``key``: ``ok(cfg)`` and the
    expected text, which may name the other fields' values."""

    key: str
    ok: Callable[[TrainConfig], bool]
    expected: Callable[[TrainConfig], str]


# --- rule makers ---------------------------------------------------------------------


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_text(v: object) -> bool:
    return isinstance(v, str) and v != ""


def integer(low: int, high: int | None = None) -> Rule:
    if high is None:
        return Rule(lambda v: _is_int(v) and v >= low, f"an integer >= {low}")
    return Rule(lambda v: _is_int(v) and low <= v <= high, f"an integer in [{low}, {high}]")


def seed() -> Rule:
    return Rule(lambda v: _is_int(v) and 0 <= v < SEED_LIMIT, "an integer in [0, 2^64)")


def even_integer(low: int) -> Rule:
    return Rule(lambda v: _is_int(v) and v >= low and v % 2 == 0, f"an even integer >= {low}")


def positive() -> Rule:
    return Rule(lambda v: _is_number(v) and v > 0, "a finite number > 0")


def non_negative() -> Rule:
    return Rule(lambda v: _is_number(v) and v >= 0, "a finite number >= 0")


def number_in(text: str, ok: Callable[[float], bool]) -> Rule:
    return Rule(lambda v: _is_number(v) and ok(v), f"a number in {text}")


def boolean() -> Rule:
    return Rule(lambda v: isinstance(v, bool), "true or false")


def label() -> Rule:
    return Rule(_is_text, "a non-empty string")


def optional_label() -> Rule:
    return Rule(lambda v: v is None or _is_text(v), "null or a non-empty string")


def one_of(names: Sequence[str]) -> Rule:
    names = tuple(names)
    return Rule(lambda v: isinstance(v, str) and v in names, "one of " + ", ".join(names))


def names_from(names: Sequence[str]) -> Rule:
    names = tuple(names)

    def ok(v: object) -> bool:
        return (
            isinstance(v, list | tuple)
            and all(isinstance(n, str) and n in names for n in v)
            and len(set(v)) == len(v)
        )

    return Rule(ok, "a list of distinct names from " + ", ".join(names))


def texts() -> Rule:
    return Rule(
        lambda v: isinstance(v, list | tuple) and all(_is_text(s) for s in v),
        "a list of non-empty strings",
    )


def device() -> Rule:
    return Rule(
        lambda v: isinstance(v, str) and DEVICE.fullmatch(v) is not None,
        "cpu, mps, cuda or cuda:N",
    )


# --- the rules -----------------------------------------------------------------------

RULES: dict[str, Rule] = {
    # game
    "game.name": one_of(GAMES),
    "game.max_turns": integer(1, MAX_TURNS),
    "game.utility": one_of(UTILITIES),
    "game.utility_scale": positive(),
    # network
    "network.name": label(),
    "network.kind": one_of(KINDS),
    "network.hidden": integer(1),
    "network.layers": integer(1),
    "network.attention_layers": integer(0),
    "network.attention_heads": integer(1),
    # traversal
    "traversal.scheme": one_of(SCHEMES),
    "traversal.traversals_per_player": integer(1),
    "traversal.first_traversals_per_player": integer(0),  # 0: traversals_per_player
    "traversal.updates": one_of(UPDATES),
    "traversal.branch_prob": number_in("(0, 1]", lambda p: 0 < p <= 1),
    "traversal.rollouts": integer(1),
    "traversal.sampling_policy": one_of(INITIAL_STRATEGIES),
    "traversal.initial_strategy": one_of(INITIAL_STRATEGIES),
    "traversal.warm_start": non_negative(),
    "traversal.cache_strategies": boolean(),
    "traversal.executor": one_of(EXECUTORS),
    "traversal.num_workers": integer(0),  # 0: the cores this process may use
    "traversal.chunk_size": integer(0),  # 0: automatic
    "traversal.inference_batch": integer(0),  # 0: no cap
    "traversal.worker_retries": integer(0),
    "traversal.debug_checks": boolean(),
    # memory
    "memory.advantage_capacity": integer(1),
    "memory.strategy_capacity": integer(1),
    # optim
    "optim.advantage_steps": integer(1),
    "optim.advantage_batch_size": integer(1),
    "optim.advantage_lr": positive(),
    "optim.reinit_advantage": boolean(),
    "optim.strategy_steps": integer(1),
    "optim.strategy_batch_size": integer(1),
    "optim.strategy_lr": positive(),
    "optim.lr_schedule": one_of(LR_SCHEDULES),
    "optim.grad_clip": non_negative(),  # 0: no clipping
    "optim.policy_training": one_of(POLICY_TRAINING),
    "optim.augment_symmetries": boolean(),
    # eval
    "eval.every": integer(1),
    "eval.opponents": names_from(BOT_NAMES),
    "eval.games": even_integer(2),  # seats alternate: every deal is played from both seats
    "eval.batch_size": integer(1),
    "eval.seed": seed(),
    "eval.agent": one_of(EVAL_AGENTS),
    "eval.play": one_of(PLAY_MODES),
    "eval.paired_baseline": boolean(),
    # tracking
    "tracking.enabled": boolean(),
    "tracking.tracking_uri": optional_label(),
    "tracking.experiment": label(),
    "tracking.run_name": optional_label(),
    "tracking.parent_run_id": optional_label(),
    # checkpoint
    "checkpoint.every": integer(0),  # 0: only at the end
    "checkpoint.dir": label(),
    "checkpoint.keep": integer(0),  # 0: keep all
    "checkpoint.log_artifacts": boolean(),
    # run
    "run.seed": seed(),
    "run.iterations": integer(1),
    "run.resume": optional_label(),
    "run.device": device(),
    "run.threads": integer(0),  # 0: torch's default
    "run.progress": boolean(),
    # determinism
    "determinism.name": label(),
    "determinism.torch_deterministic": boolean(),
    "determinism.batch_invariant_inference": boolean(),
    # amp
    "amp.name": label(),
    "amp.dtype": one_of(tuple(DTYPES)),
    "amp.init_scale": positive(),
    "amp.growth_interval": integer(1),
    # compile (only when the group is added: +compile=...)
    "compile.name": label(),
    "compile.trainer": boolean(),
    "compile.inference": boolean(),
    "compile.mode": one_of(COMPILE_MODES),
    "compile.fullgraph": boolean(),
    "compile.dynamic": boolean(),
    "compile.max_recompiles": integer(0),
    # experiment (only in a sweep: +experiment=...)
    "experiment.name": label(),
    "experiment.kind": one_of(EXPERIMENT_KINDS),
    "experiment.arms": texts(),
    "experiment.arm": integer(0),
    "experiment.baseline": integer(0),
    "experiment.warmup_iterations": integer(0),
    "experiment.min_speedup": number_in("[0, 1)", lambda f: 0 <= f < 1),
    "experiment.isolate": boolean(),
}
"""One rule per field of config.py, ``section.field`` -> Rule."""


def _lost_cities_only(key: str, off: object) -> CrossRule:
    """``key`` must be ``off`` unless the game is Lost Cities."""
    return CrossRule(
        key,
        lambda c: c.game.name == "lost_cities" or _get(c, key) == off,
        lambda c: f"{_show(off)} with game.name={c.game.name} (Lost Cities only)",
    )


def _arm_index(key: str) -> CrossRule:
    """``key`` indexes experiment.arms (0 when the experiment has no arms)."""
    return CrossRule(
        key,
        lambda c: c.experiment is None or _get(c, key) < max(1, len(c.experiment.arms)),
        lambda c: f"an index of experiment.arms (0..{max(1, len(c.experiment.arms)) - 1})",
    )


CROSS_RULES: tuple[CrossRule, ...] = (
    # the network reads the Lost Cities feature layout (lostcities/cfr/networks.py)
    _lost_cities_only("network.kind", "mlp"),
    CrossRule(
        "network.attention_heads",
        lambda c: (
            c.network.kind != "color_shared"
            or c.network.attention_layers == 0
            or c.network.hidden % c.network.attention_heads == 0
        ),
        lambda c: f"a divisor of network.hidden={c.network.hidden}",
    ),
    # the heuristic reads Lost Cities features (lostcities/cfr/initial.py)
    _lost_cities_only("traversal.sampling_policy", "uniform"),
    _lost_cities_only("traversal.initial_strategy", "uniform"),
    # Kuhn and Leduc define no symmetry (lostcities/games/__init__.py GameSpec.symmetries)
    _lost_cities_only("optim.augment_symmetries", False),
    _arm_index("experiment.arm"),
    _arm_index("experiment.baseline"),
)
"""Combinations the code relies on, checked after every field passed its own rule."""


# --- the check -----------------------------------------------------------------------

_ABSENT = object()


def _get(cfg: TrainConfig, key: str) -> Any:
    section, name = key.split(".")
    node = getattr(cfg, section)
    return _ABSENT if node is None else getattr(node, name)


def _show(value: object) -> str:
    """A value as it would be written on the command line (one line)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value and value.isprintable() else repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return " ".join(repr(value).split())


def check_config(cfg: TrainConfig) -> None:
    """Raise ``ValueError("<key>=<value>: expected <what>")`` for the first bad value of
    ``cfg`` (fields in the order of config.py, then the cross-field rules); sections that
    are absent (``compile``, ``experiment``) are skipped."""
    for key, rule in RULES.items():
        value = _get(cfg, key)
        if value is not _ABSENT and not rule.ok(value):
            raise ValueError(f"{key}={_show(value)}: expected {rule.expected}")
    for cross in CROSS_RULES:
        if not cross.ok(cfg):
            value = _show(_get(cfg, cross.key))
            raise ValueError(f"{cross.key}={value}: expected {cross.expected(cfg)}")
