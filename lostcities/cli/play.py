"""Play Lost Cities against a trained agent in the terminal.

    lostcities play outputs/DAY/TIME_lost_cities/agent.pt [--agent sdcfr]
        [--search 64] [--play sampled] [--seed N] [--seat 0]

(or ``python -m lostcities.cli.play``; the options are the fields of PlayConfig,
lostcities/cli/config.py).

Moves are typed by short names (case-insensitive) or by their number in the list shown:
    p R5     play the red 5 on your red expedition   (colors Y B W G R, wager 'w': p Bw)
    d Bw     discard a blue wager onto the blue pile
    deck     draw the top card of the draw pile      (after playing or discarding)
    take R   draw the top card of the red discard pile
    ?        list the legal moves          b   show the board again          q   quit
The agent's moves are shown by the same names. Input is read line by line from stdin,
so a game can also be driven by a pipe.
"""

from __future__ import annotations

import re
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TextIO

from lostcities.cli.agent_options import load_agent, searched
from lostcities.cli.config import PlayConfig
from lostcities.cli.options import parse
from lostcities.eval.match import arena_deal_seed
from lostcities.eval.players import AgentPlayer
from lostcities.games import lost_cities_spec as spec
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.rng import Purpose, stream_key

# The terminal game is game 0 of a match seeded by --seed: its deal, and the key of the
# agent's per-game state and choice stream.
GAME = 0
COLOR_WORDS = {name: c for c, name in enumerate(spec.COLOR_NAMES)} | {
    letter.lower(): c for c, letter in enumerate(spec.COLOR_LETTERS)
}
COLOR = "|".join(COLOR_WORDS)
CARD_MOVE = re.compile(rf"(p|play|d|discard) ?({COLOR}) ?(w|wager|10|[2-9])")
TAKE_MOVE = re.compile(rf"(t|take) ?({COLOR})")
DECK_MOVE = re.compile(r"deck|draw|draw deck")
QUIT = ("q", "quit", "exit")
HELP = ("?", "h", "help")
BOARD = ("b", "board")
SYNTAX = (
    "type a move or its number: p R5 plays the red 5, d Bw discards a blue wager, then "
    "deck draws from the draw pile and take R takes the top of the red pile; "
    "b shows the board, q quits"
)


class Quit(Exception):
    """The person typed q or closed the input."""


@dataclass(frozen=True)
class Move:
    """A typed move before it is checked: ``kind`` play / discard (``arg`` a card type),
    deck, take (``arg`` a color) or index (``arg`` a 1-based number in the list)."""

    kind: str
    arg: int = -1


# --- names ------------------------------------------------------------------------------


def move_name(action: int) -> str:
    """Short name of an action, the same the person types: p R5, d Bw, deck, take R."""
    if spec.PLAY <= action < spec.DISCARD:
        return f"p {spec.card_name(action - spec.PLAY)}"
    if spec.DISCARD <= action < spec.DRAW_DECK:
        return f"d {spec.card_name(action - spec.DISCARD)}"
    if action == spec.DRAW_DECK:
        return "deck"
    return f"take {spec.COLOR_LETTERS[action - spec.DRAW_PILE]}"


def parse_move(text: str) -> Move | None:
    """The move ``text`` names (spacing and case are free), or None if it names none."""
    text = " ".join(text.lower().split())
    if text.isdigit():
        return Move("index", int(text))
    if DECK_MOVE.fullmatch(text):
        return Move("deck")
    if m := TAKE_MOVE.fullmatch(text):
        return Move("take", COLOR_WORDS[m[2]])
    if m := CARD_MOVE.fullmatch(text):
        rank = 0 if m[3] in ("w", "wager") else int(m[3]) - 1
        card = COLOR_WORDS[m[2]] * spec.RANKS_PER_COLOR + rank
        return Move("play" if m[1].startswith("p") else "discard", card)
    return None


def move_action(move: Move, legal: list[int]) -> int:
    """The action index ``move`` stands for (legal or not); -1 for a number off the list."""
    if move.kind == "index":
        return legal[move.arg - 1] if 1 <= move.arg <= len(legal) else -1
    if move.kind == "deck":
        return spec.DRAW_DECK
    base = {"play": spec.PLAY, "discard": spec.DISCARD, "take": spec.DRAW_PILE}
    return base[move.kind] + move.arg


def why_illegal(game: LostCitiesGame, move: Move, action: int) -> str:
    """Why an understood move cannot be made now, in words a player knows."""
    player, legal = game.current_player, game.legal_actions()
    if move.kind == "index":
        return f"the list has moves 1 to {len(legal)}"
    drawing = move.kind in ("deck", "take")
    if game.phase == 0 and drawing:
        return "play or discard a card first, then draw"
    if game.phase == 1 and not drawing:
        return "you have played this turn; now draw: deck or take <color>"
    if move.kind == "take":
        color = spec.COLOR_NAMES[move.arg]
        if not game.discard_pile(move.arg):
            return f"the {color} discard pile is empty"
        return f"you just discarded onto the {color} pile; take from another pile or the deck"
    card = move.arg
    name = spec.card_name(card)
    if card not in game.hand(player):
        return f"you do not hold {name}"
    color = spec.card_color(card)
    top = spec.card_name(game.expedition(player, color)[-1])
    if spec.card_rank(card) == 0:
        return (
            f"a wager goes before any number: your {spec.COLOR_NAMES[color]} expedition has {top}"
        )
    return f"{name} must be higher than {top}, the top of your {spec.COLOR_NAMES[color]} expedition"


# --- what is shown ----------------------------------------------------------------------


def _cards(types: list[int]) -> str:
    return " ".join(spec.card_name(t) for t in types) or "-"


def render_board(game: LostCitiesGame, you: int) -> str:
    """Both players' expeditions by color with their scores, the discard piles' tops (and
    sizes), the draw pile, the scores, and your hand: all a player may see."""
    agent = 1 - you
    scores = game.scores()
    rows = []
    for color in range(spec.NUM_COLORS):
        pile = game.discard_pile(color)
        rows.append(
            [
                spec.COLOR_NAMES[color],
                *_expedition(game, agent, color),
                f"{spec.card_name(pile[-1])} ({len(pile)})" if pile else "-",
                *_expedition(game, you, color),
            ]
        )
    head = ["", "agent", "", "discard", "you", ""]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    right = (2, 5)  # the score columns

    def line(row: list[str]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  " + "  ".join(cells).rstrip()

    turn = f"turn {game.turns + 1}" if not game.is_terminal else "game over"
    lines = [
        "",
        f"=== {turn} | draw pile {len(game.draw_pile)} | "
        f"score: you {scores[you]}, agent {scores[agent]} ===",
        line(head),
        *(line(r) for r in rows),
    ]
    known = game.known(agent)
    if known:
        lines.append(f"  agent holds (taken from discards): {_cards(known)}")
    lines.append(f"  your hand: {_cards(game.hand(you))}")
    return "\n".join(lines)


def _expedition(game: LostCitiesGame, player: int, color: int) -> list[str]:
    """Cards and score of one expedition; a blank score when it is not opened."""
    cards = game.expedition(player, color)
    return [_cards(cards), str(game.expedition_scores(player)[color]) if cards else ""]


def render_moves(game: LostCitiesGame) -> str:
    """The legal moves, numbered as the person may type them."""
    legal = game.legal_actions()
    numbered = [(i, a) for i, a in enumerate(legal, 1)]
    if game.phase == 1:
        cells = [f"{i} {move_name(a)} ({_draw_detail(game, a)})" for i, a in numbered]
        return "  draw:     " + "   ".join(cells)
    plays = [f"{i} {move_name(a)}" for i, a in numbered if a < spec.DISCARD]
    discards = [f"{i} {move_name(a)}" for i, a in numbered if a >= spec.DISCARD]
    return "\n".join(
        [f"  play:     {'   '.join(plays) or '(none)'}", f"  discard:  {'   '.join(discards)}"]
    )


def _draw_detail(game: LostCitiesGame, action: int) -> str:
    if action == spec.DRAW_DECK:
        return f"{len(game.draw_pile)} left"
    return spec.card_name(game.discard_pile(action - spec.DRAW_PILE)[-1])


def render_result(game: LostCitiesGame, you: int) -> str:
    """Final scores per color and in total, and who won."""
    mine, theirs = game.expedition_scores(you), game.expedition_scores(1 - you)
    lines = [
        "",
        "final scores" + (" (the turn cap ended the game)" if game.capped else ""),
        f"  {'':<8}{'you':>6}{'agent':>7}",
    ]
    for color in range(spec.NUM_COLORS):
        lines.append(f"  {spec.COLOR_NAMES[color]:<8}{mine[color]:>6}{theirs[color]:>7}")
    total_you, total_agent = sum(mine), sum(theirs)
    lines.append(f"  {'total':<8}{total_you:>6}{total_agent:>7}")
    if total_you > total_agent:
        lines.append(f"You win by {total_you - total_agent}.")
    elif total_you < total_agent:
        lines.append(f"The agent wins by {total_agent - total_you}.")
    else:
        lines.append("A draw.")
    return "\n".join(lines)


# --- the game loop ------------------------------------------------------------------------


class Session:
    """One game between the person (reading ``stdin``) and the agent, written to ``stdout``."""

    def __init__(
        self, game: LostCitiesGame, agent: AgentPlayer, you: int, stdin: TextIO, stdout: TextIO
    ) -> None:
        self.game = game
        self.agent = agent  # asked about game GAME, one decision at a time
        self.you = you
        self.stdin = stdin
        self.stdout = stdout
        self.echo = not stdin.isatty()  # a piped transcript shows what was typed

    def say(self, text: str) -> None:
        print(text, file=self.stdout, flush=True)

    def run(self) -> None:
        """Play to the end; raises Quit when the person quits."""
        while not self.game.is_terminal:
            if self.game.current_player == self.you:
                self.human_step()
            else:
                self.agent_turn()
        self.say(render_board(self.game, self.you))
        self.say(render_result(self.game, self.you))

    def agent_turn(self) -> None:
        """Both steps of the agent's turn, then one line naming them."""
        game, seat, names = self.game, self.game.current_player, []
        while not game.is_terminal and game.current_player == seat:
            (action,) = self.agent.act([GAME], [game])
            name = move_name(action)
            if action > spec.DRAW_DECK:
                name += f" ({_draw_detail(game, action)})"
            names.append(name)
            game.apply(action)
        self.say(f"agent: {', '.join(names)}")

    def human_step(self) -> None:
        """One step of the person's turn: show what they need, read until a legal move."""
        game = self.game
        if game.phase == 0:
            self.say(render_board(game, self.you))
        self.say(render_moves(game))
        action = self.read_action("play or discard> " if game.phase == 0 else "draw> ")
        before = game.hand(self.you)
        game.apply(action)
        if action == spec.DRAW_DECK:  # the only card the person has not seen yet
            self.say(f"you drew {_cards(_new_cards(before, game.hand(self.you)))}")

    def read_action(self, prompt: str) -> int:
        """Prompt until the person types a legal move; raises Quit on q or end of input."""
        game = self.game
        while True:
            self.stdout.write(prompt)
            self.stdout.flush()
            line = self.stdin.readline()
            if not line:
                self.say("")
                raise Quit
            text = line.strip()
            if self.echo:
                self.say(text)
            command = text.lower()
            if command in QUIT:
                raise Quit
            if command in HELP:
                self.say(SYNTAX)
                self.say(render_moves(game))
                continue
            if command in BOARD:
                self.say(render_board(game, self.you))
                self.say(render_moves(game))
                continue
            if not text:
                continue
            move = parse_move(text)
            if move is None:
                reason = "not a move: try p R5, d Bw, deck, take R or a number"
            else:
                legal = game.legal_actions()
                action = move_action(move, legal)
                if action in legal:
                    return action
                reason = why_illegal(game, move, action)
            self.say(f"not a legal move: {text!r} ({reason}); type ? for the list")


def _new_cards(before: list[int], after: list[int]) -> list[int]:
    """Cards in ``after`` beyond those in ``before`` (both sorted multisets)."""
    rest = list(after)
    for card in before:
        rest.remove(card)
    return rest


# --- command line -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> PlayConfig:
    """The command line as a checked PlayConfig (lostcities/cli/config.py)."""
    return parse(
        PlayConfig,
        argv,
        prog="lostcities play",
        description="Play Lost Cities against a trained agent.",
    )


def main(
    argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    cfg = parse_args(argv)
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    # A fresh seed only picks the deal; it is printed so the game can be replayed.
    seed = cfg.seed if cfg.seed is not None else secrets.randbelow(1_000_000)
    try:
        agent = load_agent(cfg.path, cfg.agent, seed)
        if cfg.search is not None:
            agent = searched(agent, replace(cfg.search, seed=seed))
    except (OSError, ValueError) as e:  # CheckpointError is a ValueError
        print(f"error: {e}", file=sys.stderr)
        return 2
    game = LostCitiesGame.from_seed(arena_deal_seed(seed, GAME))
    order = "first" if cfg.seat == 0 else "second"
    print(
        f"Lost Cities against {cfg.path} [{agent.name}, {cfg.play}]; you move {order}; "
        f"seed {seed}. Type ? for help, q to quit.",
        file=stdout,
    )
    player = AgentPlayer(agent, cfg.play, lambda i: stream_key(seed, i, 0, 0, Purpose.PLAY_AGENT))
    session = Session(game, player, cfg.seat, stdin, stdout)
    try:
        session.run()
    except Quit:
        session.say(f"quit at turn {game.turns + 1}; no result.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
