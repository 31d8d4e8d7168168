"""Match players (``lostcities.eval.match.Player``): a baseline bot, or a trained agent.

    >>> bot = BotPlayer.per_game("cautious", lambda game: stream_key(seed, game, 1))
    >>> agent = AgentPlayer(agents["sdcfr"], "sampled", lambda game: stream_key(seed, game, 2))
    >>> play_match(agent, bot, games=400, seed=seed, batch_size=400)

A bot answers one decision at a time (``Bot.act``), so it plays in line; an agent answers
every game's due decision in one batched call (features and masks stacked, one
``agent_probs``), each row turned into an action by ``choose_actions`` with that game's own
choice stream, so a game's moves do not depend on which games share its batch (up to a
forward's last bits, where batch-invariant inference is off).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lostcities.eval.agents import Agent, agent_probs, choose_actions
from lostcities.eval.opponents import Bot, make_bot
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Stream


class BotPlayer:
    """A bot seated as a match player, answering row by row. ``bot_for(game)`` is game
    ``game``'s bot, asked for at the game's first decision and kept for the rest of it (its
    stream runs on from one decision to the next)."""

    batched = False

    def __init__(self, name: str, bot_for: Callable[[int], Bot]) -> None:
        self.name = name
        self.bot_for = bot_for
        self.bots: dict[int, Bot] = {}  # game index -> its bot

    @classmethod
    def shared(cls, bot: Bot) -> BotPlayer:
        """One bot, and so one stream, for every game of the match."""
        return cls(bot.name, lambda game: bot)

    @classmethod
    def per_game(cls, name: str, key_for: Callable[[int], int]) -> BotPlayer:
        """A bot ``name`` of its own per game, seeded by ``key_for(game)``."""
        return cls(name, lambda game: make_bot(name, key_for(game)))

    def act(self, game_indices: Sequence[int], states: Sequence[LostCitiesGame]) -> list[int]:
        pairs = zip(game_indices, states, strict=True)
        return [self._bot(game).act(state) for game, state in pairs]

    def _bot(self, game: int) -> Bot:
        bot = self.bots.get(game)
        if bot is None:
            bot = self.bots[game] = self.bot_for(game)
        return bot


class AgentPlayer:
    """A trained agent (lostcities/eval/agents.py) seated as a match player: one batched
    ``agent_probs`` per call, rows turned into actions by ``play`` (``sampled`` or
    ``greedy``); game g's draws come from one stream keyed ``choice_key(g)`` for the whole
    game. ``name`` defaults to the agent's."""

    batched = True

    def __init__(
        self, agent: Agent, play: str, choice_key: Callable[[int], int], name: str | None = None
    ) -> None:
        self.agent = agent
        self.play = play
        self.choice_key = choice_key
        self.name = agent.name if name is None else name
        self.streams: dict[int, Stream] = {}  # game index -> its choice stream

    def act(self, game_indices: Sequence[int], states: Sequence[LostCitiesGame]) -> list[int]:
        seats = [state.current_player for state in states]
        players = np.array(seats, dtype=np.int8)  # (n,)
        features = np.stack([s.encode(seat) for s, seat in zip(states, seats, strict=True)])
        masks = np.stack([state.legal_mask() for state in states])  # (n, A); features (n, d)
        games = np.array(game_indices)  # (n,) int64: keys the agent's per-game state
        # one call for every row: probabilities (n, A)
        probs = agent_probs(self.agent, games, players, features, masks, states)
        streams = [self._stream(game) for game in game_indices]
        return choose_actions(probs, masks, self.play, streams)

    def _stream(self, game: int) -> Stream:
        stream = self.streams.get(game)
        if stream is None:
            stream = self.streams[game] = Stream(self.choice_key(game))
        return stream
