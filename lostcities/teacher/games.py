"""Teacher games: the searched agent plays both seats, and every decision is recorded.

A :class:`TeacherGames` task (run by the traversal executor, lostcities/cfr/executors/
tasks.py) plays the games of a list of :class:`TeacherGameId` together: each decision
of each game goes through the play-time search (lostcities/eval/search.py) over the
blueprint, a policy network; the searched move is played, and the decision is recorded
as a :class:`TeacherGame` row: the mover's information state (compact form), the legal
mask, the candidates the search tried with each one's mean playout return and its
standard error, the blueprint's probability of each, and the move played.

Game k of round r is dealt from (seed, r, k) and its redeals and playouts are keyed by
(the round's search seed, k, decision), so its record depends on its ID alone: the
worker count and which games share a batch cannot change it (the blueprint's forwards
are per-row under ``determinism=strict``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from lostcities.checkpoint import write_atomically
from lostcities.config import NetworkConfig
from lostcities.eval.agents import policy_agent
from lostcities.eval.search import SearchAgent, SearchConfig
from lostcities.games import lost_cities_spec as spec
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Purpose, stream_key

TASK = "lostcities.teacher.games:TeacherGames"
KIND = "teacher game"


class TeacherGameId(NamedTuple):
    """Game ``index`` of teacher round ``round``; sorting by it fixes the merge order."""

    round: int
    index: int
    kind: str = KIND

    @property
    def key(self) -> tuple[int, int]:
        return (self.round, self.index)


@dataclass
class TeacherGame:
    """One game's decisions, n rows, k = the search's candidates per decision (rows with
    fewer are padded: candidate -1, mean, error and prior 0).

    states uint8 (n, C): the mover's compact information state; masks uint8 (n, A);
    players int8 (n,); candidates int16 (n, k); means, errors float32 (n, k): each
    candidate's mean playout return (points, the mover's score difference) and its
    standard error (0 with one candidate: nothing was searched); prior float32 (n, k):
    the blueprint's probability of each candidate; played int8 (n,): the index in
    ``candidates`` of the move played; scores int (2,): the final scores."""

    id: TeacherGameId
    states: np.ndarray
    masks: np.ndarray
    players: np.ndarray
    candidates: np.ndarray
    means: np.ndarray
    errors: np.ndarray
    prior: np.ndarray
    played: np.ndarray
    scores: tuple[int, int]


def deal_seed(seed: int, game: TeacherGameId) -> int:
    return stream_key(seed, game.round, game.index, 0, Purpose.TEACHER_DEAL)


class TeacherGames:
    """The task: built in a worker from a payload's config (``network``: NetworkConfig
    fields, ``weights``: the blueprint policy net's arrays, ``search``: SearchConfig
    fields, ``seed``: the deal seed, ``max_turns``, ``batch_invariant``)."""

    def __init__(self, config: dict) -> None:
        blueprint = policy_agent(
            NetworkConfig(**config["network"]), config["weights"], config["batch_invariant"]
        )
        self.search = SearchAgent(blueprint, SearchConfig(**config["search"]))
        self.seed = config["seed"]
        self.max_turns = config["max_turns"]

    def run(self, ids: list[TeacherGameId]) -> list[TeacherGame]:
        """Play the games ``ids`` together to their ends; their records, in ID order."""
        return play_teacher_games(self.search, ids, self.seed, self.max_turns)


def play_teacher_games(
    search: SearchAgent, ids: list[TeacherGameId], seed: int, max_turns: int
) -> list[TeacherGame]:
    """The searched agent in both seats of each game of ``ids`` (all stepped together: one
    search call per step over every game in flight); one record per game."""
    k = search.config.candidates or spec.NUM_ACTIONS  # 0: every legal action was searched
    games = [LostCitiesGame.from_seed(deal_seed(seed, gid), max_turns) for gid in ids]
    rows: list[list[tuple]] = [[] for _ in ids]
    live = [i for i, game in enumerate(games) if not game.is_terminal]
    while live:
        players = np.array([games[i].current_player for i in live], dtype=np.int8)
        features = np.stack([games[i].encode(p) for i, p in zip(live, players, strict=True)])
        masks = np.stack([games[i].legal_mask() for i in live])
        keys = np.array([ids[i].index for i in live], dtype=np.int64)
        decisions, prior = search.decide(keys, players, features, masks, [games[i] for i in live])
        for row, (i, decision) in enumerate(zip(live, decisions, strict=True)):
            player = int(players[row])
            rows[i].append(_row(games[i], player, masks[row], decision, prior[row], k))
            games[i].apply(decision.move)
        live = [i for i in live if not games[i].is_terminal]
    return [
        _record(gid, game, game_rows) for gid, game, game_rows in zip(ids, games, rows, strict=True)
    ]


def _row(game: LostCitiesGame, player: int, mask: np.ndarray, decision, prior, k: int) -> tuple:
    n = len(decision.candidates)
    candidates = np.full(k, -1, dtype=np.int16)
    means, errors, probs = (np.zeros(k, dtype=np.float32) for _ in range(3))
    candidates[:n] = decision.candidates
    probs[:n] = prior[decision.candidates]
    if decision.values is not None:  # (redeals, n)
        means[:n] = decision.values.mean(axis=0)
        redeals = len(decision.values)
        if redeals > 1:
            errors[:n] = decision.values.std(axis=0, ddof=1) / np.sqrt(redeals)
    state = game.kernel.compact_view(player)
    return (state, mask, player, candidates, means, errors, probs, decision.pick)


def _record(gid: TeacherGameId, game: LostCitiesGame, rows: list[tuple]) -> TeacherGame:
    columns = list(zip(*rows, strict=True))
    return TeacherGame(
        gid,
        np.stack(columns[0]).astype(np.uint8),
        np.stack(columns[1]).astype(np.uint8),
        np.array(columns[2], dtype=np.int8),
        np.stack(columns[3]),
        np.stack(columns[4]),
        np.stack(columns[5]),
        np.stack(columns[6]),
        np.array(columns[7], dtype=np.int8),
        tuple(int(s) for s in game.scores()),
    )


COLUMNS = ("states", "masks", "players", "candidates", "means", "errors", "prior", "played")


def save_games(path: str | os.PathLike[str], games: list[TeacherGame]) -> Path:
    """Write ``games`` to ``path`` (.npz): the decisions' columns, game after game, with
    ``round`` and ``game`` naming each row's game and ``scores`` (games, 2); atomically
    (lostcities/checkpoint.py write_atomically)."""
    path = Path(path)
    columns = {name: np.concatenate([getattr(g, name) for g in games]) for name in COLUMNS}
    for word, column in (("round", 0), ("game", 1)):
        columns[word] = np.concatenate(
            [np.full(len(g.masks), g.id.key[column], dtype=np.int32) for g in games]
        )
    columns["scores"] = np.array([g.scores for g in games], dtype=np.int16)
    write_atomically(path, lambda f: np.savez_compressed(f, **columns))
    return path


def load_games(path: str | os.PathLike[str]) -> list[TeacherGame]:
    """The games :func:`save_games` wrote, in their order. ValueError (one line, naming
    the file) if it is not such a file."""
    try:
        data = np.load(path)
        columns = {name: data[name] for name in (*COLUMNS, "round", "game", "scores")}
    except (OSError, KeyError, ValueError) as e:
        raise ValueError(f"{path}: not a teacher data file ({type(e).__name__}: {e})") from None
    keys = np.stack([columns["round"], columns["game"]], axis=1)
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
    ends = np.r_[starts[1:], len(keys)]
    games = []
    for n, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
        gid = TeacherGameId(int(keys[lo, 0]), int(keys[lo, 1]))
        fields = [columns[name][lo:hi] for name in COLUMNS]
        games.append(TeacherGame(gid, *fields, tuple(int(s) for s in columns["scores"][n])))
    return games
