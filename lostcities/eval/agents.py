"""What a trained Lost Cities run plays with: agents that map a batch of decisions to
action probabilities, for evaluation matches, the arena and the terminal game.

    >>> agents = agents_from_checkpoint("outputs/.../checkpoint_000005.pt")
    >>> agents["sdcfr"].probs(games, players, features, masks)   # (n, A) float64

Every agent answers ``probs(games, players, features, masks)``: ``games`` int (n,) the
index of the game each row belongs to (an agent may keep per-game state: single Deep
CFR picks one iteration per game), ``players`` int8 (n,), ``features`` float32 (n, d),
``masks`` uint8 (n, A); it returns float64 (n, A) probabilities over the legal actions.
How a row becomes an action (sampled or greedy) is the match's business
(:func:`choose_actions`), so every agent can be played both ways. The agents that play
regret matching (current, sdcfr) also answer ``scores`` with the same arguments: regret
matching's input (n, A), whose order is the probabilities' order wherever those differ
and still orders the moves regret matching gives probability 0 (play-time search ranks
its candidates by it: eval/search.py). Single Deep CFR also answers ``advantages``: its
learned regrets in score points, which the search can blend with its playout values.

Kinds (from a checkpoint of T completed iterations):
    policy   the policy network: Deep CFR's average strategy, distilled
    current  sigma_{T+1}: regret matching on the advantage nets of iteration T (with the
             warm-start seed), the strategy the next iteration would traverse with
    sdcfr    single Deep CFR (Steinberger 2019): each game draws one iteration t in 1..T
             with probability proportional to t (linear CFR) and plays RM on that
             iteration's advantage nets for the whole game; the average strategy
             without the policy network's distillation error
    sigma1   the initial strategy CFR starts from (``traversal.initial_strategy``)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from lostcities.cfr.initial import make_initial_strategy
from lostcities.cfr.networks import build_network
from lostcities.cfr.policy import NetworkForward, iteration_strategies, masked_softmax
from lostcities.config import EVAL_AGENTS, PLAY_MODES, NetworkConfig, TraversalConfig
from lostcities.rng import Purpose, stream_key

if TYPE_CHECKING:
    from lostcities.cfr.trainer import AgentView

AGENT_KINDS = (*EVAL_AGENTS, "sigma1")  # sigma1: the paired baseline, never the run's agent


class Agent(Protocol):
    name: str

    def probs(
        self, games: np.ndarray, players: np.ndarray, features: np.ndarray, masks: np.ndarray
    ) -> np.ndarray: ...


def agent_probs(agent, games, players, features, masks, states) -> np.ndarray:
    """``agent.probs`` for the rows of ``states`` (the LostCitiesGame of each row); only an
    agent that searches from the position itself (``needs_states``: eval/search.py) gets
    them."""
    if getattr(agent, "needs_states", False):
        return agent.probs(games, players, features, masks, states)
    return agent.probs(games, players, features, masks)


def choose_actions(probs: np.ndarray, masks: np.ndarray, play: str, streams: Sequence) -> list[int]:
    """One action per row of probs (n, A): ``greedy`` the most probable legal action (the
    lowest index on a tie), ``sampled`` a draw from ``streams[i]`` (a Stream per row), by
    ``Stream.choice``'s rule vectorised: one uniform per row, the first positive entry whose
    running sum exceeds u * total (np.cumsum adds in the same order, so the pick is the
    same), the last positive entry if rounding leaves none."""
    legal = probs * masks
    if play == "greedy":
        return [int(a) for a in np.where(masks > 0, legal, -1.0).argmax(axis=1)]
    if play == "sampled":
        if len(streams) != len(legal):
            raise ValueError(f"{len(legal)} rows but {len(streams)} streams")
        cumulative = np.cumsum(legal, axis=1)  # (n, A)
        draws = np.array([stream.uniform() for stream in streams]) * cumulative[:, -1]
        picks = (cumulative <= draws[:, None]).sum(axis=1)
        last_positive = legal.shape[1] - 1 - (legal[:, ::-1] > 0).argmax(axis=1)
        return [int(a) for a in np.minimum(picks, last_positive)]
    raise ValueError(f"play mode must be one of {PLAY_MODES}, got {play!r}")


def scores_of(strategy):
    """A strategy's regret scores function (``IterationStrategy.scores``), or the strategy
    itself where it has none: its probabilities are then its own ranking."""
    return getattr(strategy, "scores", strategy)


class PolicyAgent:
    """A probability function of (features, masks) only, e.g. the trainer's policy net."""

    def __init__(self, name: str, policy_fn) -> None:
        self.name = name
        self.policy_fn = policy_fn

    def probs(self, games, players, features, masks) -> np.ndarray:
        return self.policy_fn(features, masks)


class StrategyAgent:
    """A strategy of (players, features, masks): sigma_1 (``rule``: its name in
    ``traversal.initial_strategy``), or an AdvantagePolicy's sigma."""

    def __init__(self, name: str, strategy, rule: str | None = None) -> None:
        self.name = name
        self.strategy = strategy
        self.rule = rule

    def probs(self, games, players, features, masks) -> np.ndarray:
        return self.strategy(players, features, masks)

    def scores(self, games, players, features, masks) -> np.ndarray:
        """Regret matching's input where the strategy has one, else the probabilities."""
        return scores_of(self.strategy)(players, features, masks)


class SingleDeepCFRAgent:
    """Single Deep CFR: game g plays iteration t's strategy, t drawn once per game with
    probability t / (1 + ... + T) from a stream keyed by (seed, g). ``utility_scale``: the
    traversal's payoff scale (``game.utility_scale``), which ``advantages`` undoes."""

    name = "sdcfr"

    def __init__(self, strategies: Sequence, seed: int, utility_scale: float = 1.0) -> None:
        if not strategies:
            raise ValueError("single Deep CFR needs at least one iteration's advantage nets")
        self.strategies = list(strategies)  # strategies[t - 1]: (players, features, masks)
        self.seed = seed
        self.utility_scale = utility_scale
        weights = np.arange(1, len(strategies) + 1, dtype=np.float64)
        self.cumulative = np.cumsum(weights / weights.sum())
        self._picks: dict[int, int] = {}  # game -> its iteration index

    def iteration_of(self, game: int) -> int:
        """0-based index of the iteration game ``game`` plays (fixed for the game)."""
        pick = self._picks.get(game)
        if pick is None:  # drawn once per game, not at each of its ~50 decisions
            key = stream_key(self.seed, int(game), 0, 0, Purpose.SDCFR_ITERATION)
            u = np.random.Generator(np.random.PCG64(key)).random()
            last = len(self.strategies) - 1
            pick = self._picks[game] = min(int(np.searchsorted(self.cumulative, u, "right")), last)
        return pick

    def probs(self, games, players, features, masks) -> np.ndarray:
        return self._per_iteration(lambda strategy: strategy, games, players, features, masks)

    def scores(self, games, players, features, masks) -> np.ndarray:
        """Regret matching's input (n, A) of each game's iteration (its probabilities
        where a strategy has no ``scores``)."""
        return self._per_iteration(scores_of, games, players, features, masks)

    def advantages(self, games, players, features, masks) -> np.ndarray:
        """Each game's iteration's predicted advantages (n, A) in the game's own payoff
        units (Lost Cities: score points): its learned regrets, seed excluded."""
        raw = self._per_iteration(
            lambda strategy: strategy.advantages, games, players, features, masks
        )
        return raw / self.utility_scale

    def _per_iteration(self, method, games, players, features, masks) -> np.ndarray:
        out = np.zeros(masks.shape)
        chosen = np.array([self.iteration_of(g) for g in games], dtype=np.int64)
        for t in np.unique(chosen):  # one batched forward per iteration in use
            rows = np.flatnonzero(chosen == t)
            out[rows] = method(self.strategies[t])(players[rows], features[rows], masks[rows])
        return out


def _as_of_iteration(path: str | Path, trainer: dict, iteration: int, policy: bool) -> dict:
    """An agent state as it was after ``iteration`` (earlier than its last): the advantage
    nets of iterations 1..iteration. ValueError (one line) if the file does not keep them,
    or if the ``policy`` agent is asked for (its earlier weights are not kept)."""
    final = int(trainer["iteration"])
    per_iteration = trainer.get("iteration_advantage_nets", [[], []])
    if not 1 <= iteration < final or len(per_iteration[0]) < final:
        raise ValueError(
            f"{path}: iteration {iteration} is not one of its iterations 1..{final} "
            "with their advantage nets"
        )
    if policy:
        raise ValueError(f"{path}: the policy net of iteration {iteration} is not kept")
    per_iteration = [nets[:iteration] for nets in per_iteration]
    return {
        **trainer,
        "iteration": iteration,
        "iteration_advantage_nets": per_iteration,
        "advantage_nets": [nets[-1] for nets in per_iteration],
    }


def agents_from_checkpoint(
    path: str | Path,
    kinds: Sequence[str] = AGENT_KINDS,
    seed: int = 0,
    iteration: int | None = None,
) -> dict[str, Agent]:
    """The agents of a run's agent file (``agent.pt`` in its run directory) or of a training
    checkpoint (see the module docstring for the kinds).
    ``seed`` keys single Deep CFR's per-game iteration draws. ``iteration``: the agents as
    they were after that iteration (None: the file's last); the policy net's earlier
    weights are not kept, so ``policy`` is only available at the last."""
    from lostcities.checkpoint import load_checkpoint
    from lostcities.config import TrainConfig
    from lostcities.games import lost_cities_spec as spec

    for kind in kinds:
        if kind not in AGENT_KINDS:
            raise ValueError(f"agent kind must be one of {AGENT_KINDS}, got {kind!r}")
    state = load_checkpoint(path, required=("config",))
    if "agent" not in state and "trainer" not in state:
        raise ValueError(f"{path}: neither an agent file nor a training checkpoint")
    if state.get("game") != "lost_cities":
        raise ValueError(
            f"{path}: a Lost Cities checkpoint is needed, got game {state.get('game')!r}"
        )
    cfg = _typed(TrainConfig, state["config"])
    trainer = state.get("agent") or state["trainer"]  # an agent file, or a checkpoint
    if iteration is not None and iteration != int(trainer["iteration"]):
        trainer = _as_of_iteration(path, trainer, iteration, "policy" in kinds)
    per_iteration = trainer.get("iteration_advantage_nets", [[], []])
    dim, actions = spec.ENCODING_SIZE, spec.NUM_ACTIONS
    network = NetworkConfig(**trainer["network"])
    invariant = cfg.determinism.batch_invariant_inference
    agents: dict[str, Agent] = {}
    if "policy" in kinds:
        agents["policy"] = policy_agent(network, trainer["policy_net"], invariant)
    if "current" in kinds:
        last = [[w] for w in trainer["advantage_nets"]]
        dims = (dim, actions)
        (current,) = iteration_strategies(
            network, cfg.traversal, last, dims, invariant, first_iteration=trainer["iteration"]
        )
        agents["current"] = StrategyAgent("current", current)
    if "sdcfr" in kinds:
        if not per_iteration[0]:
            raise ValueError(
                f"{path}: no per-iteration advantage nets in this checkpoint (written before "
                "single Deep CFR was supported): sdcfr is unavailable"
            )
        agents["sdcfr"] = sdcfr_agent(
            network, cfg.traversal, per_iteration, invariant, seed, cfg.game.utility_scale
        )
    if "sigma1" in kinds:
        rule = cfg.traversal.initial_strategy
        agents["sigma1"] = StrategyAgent("sigma1", make_initial_strategy(rule), rule)
    return agents


def policy_agent(
    network: NetworkConfig, weights: dict, batch_invariant: bool, name: str = "policy"
) -> PolicyAgent:
    """A Lost Cities policy network's agent from its weights (a state dict of tensors or
    numpy arrays), on the CPU."""
    from lostcities.games import lost_cities_spec as spec

    net = build_network(network, spec.ENCODING_SIZE, spec.NUM_ACTIONS, seed=0)
    net.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in weights.items()})
    forward = NetworkForward(net.eval(), torch.device("cpu"), batch_invariant)
    return PolicyAgent(name, lambda features, masks: masked_softmax(forward(features), masks))


def sdcfr_agent(
    network: NetworkConfig,
    traversal: TraversalConfig,
    per_iteration: Sequence[Sequence[dict]],
    batch_invariant: bool,
    seed: int,
    utility_scale: float = 1.0,
) -> SingleDeepCFRAgent:
    """Single Deep CFR over ``per_iteration[p][t - 1]`` (player p's advantage weights after
    iteration t, as the trainer keeps them); ``utility_scale``: ``game.utility_scale``."""
    from lostcities.games import lost_cities_spec as spec

    dims = (spec.ENCODING_SIZE, spec.NUM_ACTIONS)
    strategies = iteration_strategies(network, traversal, per_iteration, dims, batch_invariant)
    return SingleDeepCFRAgent(strategies, seed, utility_scale)


def run_agent(agent: AgentView, kind: str, seed: int) -> Agent:
    """The running agent of ``kind`` (module docstring), for in-run evaluation."""
    spec = agent.spec
    if kind == "policy":
        return PolicyAgent("policy", agent.policy_probs)
    if kind == "current":
        return StrategyAgent("current", agent.regret_matching_probs)
    if kind == "sdcfr":
        return sdcfr_agent(
            spec.network,
            spec.traversal,
            agent.iteration_advantage_nets,
            spec.batch_invariant,
            seed,
            spec.utility_scale,
        )
    if kind == "sigma1":
        return StrategyAgent("sigma1", agent.initial_strategy)
    raise ValueError(f"eval.agent must be one of {AGENT_KINDS}, got {kind!r}")


def earlier_agent(agent: AgentView, kind: str, iteration: int, seed: int) -> Agent:
    """The running agent of ``kind`` as it was after ``iteration`` (< its own): single
    Deep CFR over iterations 1..iteration, or ``current``: regret matching on that
    iteration's advantage nets (sigma_{iteration + 1}). The policy net's past weights are
    not kept: ValueError for ``policy``."""
    spec = agent.spec
    nets = [per_player[:iteration] for per_player in agent.iteration_advantage_nets]
    if kind == "sdcfr":
        return sdcfr_agent(
            spec.network, spec.traversal, nets, spec.batch_invariant, seed, spec.utility_scale
        )
    if kind == "current":
        last = [per_player[-1:] for per_player in nets]
        (strategy,) = iteration_strategies(
            spec.network,
            spec.traversal,
            last,
            agent.dims,
            spec.batch_invariant,
            first_iteration=iteration,
        )
        return StrategyAgent("current", strategy)
    raise ValueError(f"no earlier {kind!r} agent: the run keeps past advantage nets only")


def _typed(schema, container: dict):
    """``container`` (a file's saved config) typed by ``schema``. Keys the schema no longer
    has are dropped: an agent file written before a setting moved or was retired (e.g.
    ``traversal.num_workers``, now ``executor.num_workers``) still plays, as settings of
    how a run was computed do not change what its agent plays."""
    from omegaconf import OmegaConf

    structured = OmegaConf.structured(schema)
    return OmegaConf.to_object(OmegaConf.merge(structured, _known(structured, container)))


def _known(structured, container):
    """``container`` without the keys ``structured`` (an OmegaConf node) lacks, recursively."""
    from omegaconf import DictConfig

    if not isinstance(container, dict) or not isinstance(structured, DictConfig):
        return container
    if structured._is_none() or structured._is_missing():
        return container  # an absent optional section: nothing to check it against
    return {
        key: _known(structured._get_node(key), value)
        for key, value in container.items()
        if key in structured
    }
