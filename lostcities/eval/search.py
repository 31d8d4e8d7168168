"""Search at play time: a determinized one-step lookahead over a blueprint.

At each decision of the searching player (one row of ``probs``):

1. candidates: the blueprint's ``candidates`` most probable legal actions (default 5;
   ``rank=regret``: the highest by regret matching's input), or all of them (0, or no
   blueprint; the blueprint is the trained agent: single Deep CFR, the policy net, ...);
   the first is the move to keep: the blueprint's most probable action
   (``keep=greedy``) or one drawn from its probabilities (``keep=sampled``, a stream
   keyed like the redeals);
2. ``determinizations`` times: redeal what the player cannot see (the opponent's hand
   but for cards seen taken from discard piles, and the draw pile:
   ``LostCitiesGame.determinize``), apply each candidate to a copy and play the copy
   to its end with both seats on the playout policy: sigma_1's rule (``rollout_play``
   greedy or sampled, all in C: ``heuristic_playouts``), or the blueprint itself
   (``rollout=blueprint``, batched network forwards), or the blueprint for the first
   ``blueprint_plies`` decisions and the rule after;
3. keep that move unless the candidate with the highest mean
   return (score difference) beats it by more than ``margin`` standard errors of the
   paired difference: every candidate of a decision sees the same redeals and playout
   streams (common random numbers). Without the margin, a move is often picked for its
   playout noise (measured: experiments/lost_cities_default/README.md). With
   ``value_blend`` lambda > 0 a candidate's value is (1 - lambda) * its playout mean +
   lambda * the blueprint's learned advantage for it (single Deep CFR's regrets, in
   points), as AlphaGo mixed rollout outcomes with a value network's estimate; the
   advantage nets learned from real deals, so they carry what the uniform redeal drops
   (what the opponent's moves say about its hand).

This is perfect-information Monte Carlo (PIMC) with one step of lookahead: the redeal
is uniform over what the player has not seen (it does not infer the opponent's hand
from the opponent's moves). Streams are keyed by (seed, game, decision, redeal), so a
match's result does not depend on batching.

    >>> agent = SearchAgent(blueprint, SearchConfig(determinizations=64, margin=2.0))
    >>> agent.probs(games, players, features, masks, states)   # one-hot (n, A)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lostcities.cfr._heuristic import heuristic_playouts as _heuristic_playouts
from lostcities.cfr.initial import EXPLORE, OPEN_POINTS, RANK_VALUES
from lostcities.config_checks import check_values, field_rules
from lostcities.config_rules import checked, integer, non_negative, number_in, one_of, seed
from lostcities.eval.agents import choose_actions
from lostcities.rng import Purpose, Stream, stream_key

ROLLOUT_PLAYS = ("greedy", "sampled")
ROLLOUT_POLICIES = ("blueprint", "heuristic")
KEEP_RULES = ("greedy", "sampled")
RANK_RULES = ("probability", "regret")


@dataclass(frozen=True)
class SearchConfig:
    determinizations: int = checked(64, integer(1))
    """Redeals of the hidden cards per decision (each candidate is played out once per
    redeal)."""
    candidates: int = checked(5, integer(0))
    """Candidates per decision: the blueprint's most probable legal actions (0: all legal
    actions). The kept move (``keep``) is always one of them (``margin``). Fewer candidates
    are fewer chances to pick one for its playout noise, and the ranking is where a trained
    blueprint's regrets enter the search (five against all: experiments/lost_cities_default/
    README.md)."""
    rank: str = checked("probability", one_of(RANK_RULES))
    """What orders the candidates: the blueprint's probabilities (ties: the lower index),
    or, for a blueprint that plays regret matching (single Deep CFR, current), ``regret``:
    regret matching's input, the same order wherever the probabilities differ, which also
    orders the moves regret matching gives probability 0 (sigma_2 gives fewer than 5
    phase-0 moves a positive probability in ~60% of decisions: the other candidates were
    the lowest-index moves). Other blueprints (sigma_1, the policy net) rank by
    probability either way."""
    rollout: str = checked("heuristic", one_of(ROLLOUT_POLICIES))
    """Who plays both seats in the playouts: ``heuristic`` (sigma_1's rule, in C) or
    ``blueprint`` (the agent searched over, sampled; batched forwards across every playout
    in flight; ~10x the cost per playout)."""
    blueprint_plies: int = checked(0, integer(0))
    """With ``rollout=heuristic``: the first this many decisions of each playout are the
    blueprint's (sampled), the heuristic plays the rest; the opponent's next answer then
    comes from the learned strategy at a fraction of full blueprint playouts' cost."""
    rollout_play: str = checked("greedy", one_of(ROLLOUT_PLAYS))
    """How the heuristic plays its playouts: ``greedy`` (its best action) or ``sampled``
    (sigma_1 itself: 10% uniform)."""
    keep: str = checked("greedy", one_of(KEEP_RULES))
    """The move played unless another candidate is clearly better (``margin``): the
    blueprint's most probable action (``greedy``) or one sampled from the blueprint
    (``sampled``: a mixed blueprint such as single Deep CFR's sigma_t plays sampled, and
    its argmax can be weaker than its samples)."""
    margin: float = checked(2.0, non_negative())
    """Play the kept move (``keep``) unless another candidate beats it by more than
    ``margin`` standard errors of the paired difference over the redeals (0: plain argmax
    of the mean). Guards against picking a move for its playout noise."""
    value_blend: float = checked(0.0, number_in("[0, 1)", lambda b: 0 <= b < 1))
    """lambda in [0, 1): weight of the blueprint's learned advantages (``advantages``:
    single Deep CFR's predicted regrets, in points) in each candidate's value, beside
    1 - lambda of its playout mean; the margin's standard error is the playouts' share.
    0: the playouts alone. A blueprint without learned advantages (sigma_1 searched as the
    baseline, the policy net) is searched by its playouts alone."""
    seed: int = checked(0, seed())
    """Keys the redeal and playout streams."""

    def __post_init__(self) -> None:
        check_values(self, _SEARCH_RULES)  # each field's rule, as a command line checks it


_SEARCH_RULES = field_rules(SearchConfig)


def _explore(rollout_play: str) -> float:
    return EXPLORE if rollout_play == "sampled" else 0.0


def heuristic_playouts(
    games: Sequence, viewers: Sequence[int], keys: Sequence[int], rollout_play: str = "greedy"
) -> np.ndarray:
    """Play each ``LostCitiesGame`` of ``games`` to its end in place (both seats on the
    heuristic; ``sampled`` draws from sigma_1 with the stream ``keys[i]``) and return
    float64 (n,): ``viewers[i]``'s final score difference. C kernel; its pure-Python twin:
    lostcities/reference/playouts.py."""
    if rollout_play not in ROLLOUT_PLAYS:
        raise ValueError(f"rollout_play must be one of {ROLLOUT_PLAYS}, got {rollout_play!r}")
    out = np.empty(len(games), dtype=np.float64)
    _heuristic_playouts(
        [game.kernel for game in games],
        np.asarray(viewers, dtype=np.int8),
        np.asarray(keys, dtype=np.uint64),
        out,
        RANK_VALUES,
        _explore(rollout_play),
        float(OPEN_POINTS),
    )
    return out


def agent_playouts(
    games: Sequence, viewers: Sequence[int], keys: Sequence[int], agent, agent_games: np.ndarray
) -> np.ndarray:
    """Play each ``LostCitiesGame`` of ``games`` to its end in place with ``agent`` in both
    seats (see :func:`agent_steps`); returns float64 (n,): ``viewers[i]``'s final score
    difference."""
    agent_steps(games, keys, agent, agent_games)
    return np.array([game.returns()[v] for game, v in zip(games, viewers, strict=True)])


def agent_steps(
    games: Sequence, keys: Sequence[int], agent, agent_games: np.ndarray, plies: int | None = None
) -> None:
    """Advance each ``LostCitiesGame`` of ``games`` in place by ``plies`` decisions (None:
    to its end) with ``agent`` in both seats (an agent of lostcities/eval/agents.py;
    playout i is its game ``agent_games[i]``, so single Deep CFR keeps that game's
    iteration): every step one batched ``probs`` call over the playouts still running,
    actions sampled with the stream ``keys[i]``."""
    streams = [Stream(key) for key in keys]
    live = [i for i, game in enumerate(games) if not game.is_terminal]
    step = 0
    while live and (plies is None or step < plies):
        step += 1
        players = np.array([games[i].current_player for i in live], dtype=np.int8)
        features = np.stack([games[i].encode(p) for i, p in zip(live, players, strict=True)])
        masks = np.stack([games[i].legal_mask() for i in live])
        probs = agent.probs(agent_games[live], players, features, masks)  # (m, A)
        actions = choose_actions(probs, masks, "sampled", [streams[i] for i in live])
        for i, action in zip(live, actions, strict=True):
            games[i].apply(action)
        live = [i for i in live if not games[i].is_terminal]


class SearchDecision(NamedTuple):
    """One searched decision: ``candidates`` int (k,) the legal actions searched, the kept
    move first; ``values`` float64 (redeals, k): each candidate's playout return (score
    difference) on each redeal, None when there was only one candidate; ``pick``: the
    index in ``candidates`` of the move played."""

    candidates: np.ndarray
    values: np.ndarray | None
    pick: int

    @property
    def move(self) -> int:
        return int(self.candidates[self.pick])


class SearchAgent:
    """PIMC one-step lookahead (module docstring) on top of ``blueprint`` (an agent of
    lostcities/eval/agents.py, or None: all legal actions are candidates, ties to the
    lowest index).
    Needs the game of each row (``needs_states``); returns one-hot probabilities, so
    sampled and greedy play coincide. ``seconds`` and ``decisions`` count its work."""

    needs_states = True

    def __init__(self, blueprint, config: SearchConfig) -> None:
        if blueprint is None and (
            config.rollout == "blueprint" or config.blueprint_plies or config.keep == "sampled"
        ):
            raise ValueError(
                "rollout=blueprint, blueprint_plies and keep=sampled need a blueprint agent "
                "to search over"
            )
        self.blueprint = blueprint
        self.config = config
        self.name = f"search({blueprint.name if blueprint is not None else 'none'})"
        self.seconds = 0.0
        self.decisions = 0

    def probs(self, games, players, features, masks, states) -> np.ndarray:
        decisions, _ = self.decide(games, players, features, masks, states)
        out = np.zeros(masks.shape)
        for row, decision in enumerate(decisions):
            out[row, decision.move] = 1.0
        return out

    def decide(
        self, games, players, features, masks, states
    ) -> tuple[list[SearchDecision], np.ndarray]:
        """The search of each row (the arguments of ``probs``): one
        :class:`SearchDecision` per row, and the blueprint's probabilities (n, A) (zeros
        without a blueprint)."""
        start = time.perf_counter()
        cfg = self.config
        if self.blueprint is not None:
            blueprint_probs = self.blueprint.probs(games, players, features, masks)  # (n, A)
        else:
            blueprint_probs = np.zeros(masks.shape)
        order = blueprint_probs
        advantages = None  # (n, A) points, where the blend uses the blueprint's regrets
        if cfg.value_blend > 0 and hasattr(self.blueprint, "advantages"):
            advantages = self.blueprint.advantages(games, players, features, masks)
        if cfg.rank == "regret" and hasattr(self.blueprint, "scores"):
            order = self.blueprint.scores(games, players, features, masks)  # (n, A)
        # prefer the blueprint's more probable action (rank=regret: higher regret), then
        # the lower index
        prior = np.where(masks > 0, order, -np.inf)
        lines, viewers, keys, plans, line_games = [], [], [], [], []
        for row, (game, player, state) in enumerate(zip(games, players, states, strict=True)):
            legal = np.flatnonzero(np.isfinite(prior[row]))
            ranked = legal[np.argsort(-prior[row, legal], kind="stable")]
            decision = 2 * state.turns + state.phase
            if cfg.keep == "sampled":  # the drawn move first, the rest in blueprint order
                kept = Stream(self._key(game, decision, 0, Purpose.SEARCH_KEEP)).choice(
                    blueprint_probs[row] * masks[row]
                )
                ranked = np.concatenate(([kept], ranked[ranked != kept]))
            if cfg.candidates > 0 and self.blueprint is not None:  # no ranking without one
                ranked = ranked[: cfg.candidates]
            plans.append((ranked, len(lines)))
            if len(ranked) == 1:
                continue
            for k in range(cfg.determinizations):
                redeal = state.clone()
                redeal.determinize(int(player), self._key(game, decision, 2 * k))
                playout_key = self._key(game, decision, 2 * k + 1)
                for action in ranked:
                    line = redeal.clone()
                    line.apply(int(action))
                    lines.append(line)
                    viewers.append(int(player))
                    keys.append(playout_key)
                    line_games.append(game)
        line_games = np.array(line_games, dtype=np.int64)
        if cfg.rollout == "heuristic":
            if cfg.blueprint_plies > 0:
                agent_steps(lines, keys, self.blueprint, line_games, cfg.blueprint_plies)
            values = heuristic_playouts(lines, viewers, keys, cfg.rollout_play)
        else:
            values = agent_playouts(lines, viewers, keys, self.blueprint, line_games)
        decisions = []
        for row, (ranked, first) in enumerate(plans):
            if len(ranked) == 1:
                decisions.append(SearchDecision(ranked, None, 0))
                continue
            block = values[first : first + cfg.determinizations * len(ranked)]
            block = block.reshape(cfg.determinizations, len(ranked))  # (redeals, candidates)
            learned = None if advantages is None else advantages[row, ranked]  # (candidates,)
            decisions.append(SearchDecision(ranked, block, self._pick(block, learned)))
        self.decisions += len(games)
        self.seconds += time.perf_counter() - start
        return decisions, blueprint_probs

    def _pick(self, values: np.ndarray, learned: np.ndarray | None = None) -> int:
        """Index of the candidate to play from values (redeals, candidates) and the
        blueprint's learned advantages (candidates,) or None; candidate 0 is the kept move
        (``keep``)."""
        blend = self.config.value_blend if learned is not None else 0.0
        learned = np.zeros(values.shape[1]) if learned is None else learned
        means = (1.0 - blend) * values.mean(axis=0) + blend * learned
        best = int(means.argmax())  # the first maximum: blueprint order breaks ties
        if self.config.margin <= 0.0 or best == 0 or len(values) < 2:
            return best
        diffs = values[:, best] - values[:, 0]  # paired over the same redeals
        gap = (1.0 - blend) * diffs.mean() + blend * (learned[best] - learned[0])
        stderr = (1.0 - blend) * diffs.std(ddof=1) / np.sqrt(len(diffs))
        return best if gap > self.config.margin * stderr else 0

    def _key(self, game: int, decision: int, index: int, purpose: Purpose = Purpose.SEARCH) -> int:
        return stream_key(self.config.seed, int(game), decision, index, purpose)
