"""The terminal game against a trained agent: move names, input handling, a full game."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from lostcities.cli.play import Move, main, move_action, move_name, parse_move, why_illegal
from lostcities.eval.match import arena_deal_seed
from lostcities.games import lost_cities_spec as spec
from lostcities.games.lost_cities import LostCitiesGame

SEED = 3


@pytest.fixture(scope="module")
def agent_file(lost_cities_checkpoint: Path) -> Path:
    return lost_cities_checkpoint.parent.parent / "agent.pt"


def play(agent_file: Path, typed: str, *flags: str) -> tuple[int, str]:
    """Exit code and transcript of a game with ``typed`` as the person's input."""
    out = io.StringIO()
    code = main([str(agent_file), "--seed", str(SEED), *flags], io.StringIO(typed), out)
    return code, out.getvalue()


def test_every_action_round_trips_through_its_name() -> None:
    for action in range(spec.NUM_ACTIONS):
        move = parse_move(move_name(action))
        assert move is not None and move_action(move, []) == action, move_name(action)


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("P r10", spec.PLAY + 49),
        ("play red 10", spec.PLAY + 49),
        ("dbw", spec.DISCARD + 10),
        ("discard blue wager", spec.DISCARD + 10),
        ("DECK", spec.DRAW_DECK),
        ("t y", spec.DRAW_PILE + 0),
        ("take green", spec.DRAW_PILE + 3),
    ],
)
def test_moves_are_case_and_space_insensitive(text: str, action: int) -> None:
    move = parse_move(text)
    assert move is not None and move_action(move, []) == action


def test_numbers_pick_from_the_list_and_nonsense_is_no_move() -> None:
    assert move_action(Move("index", 2), [7, 9, 11]) == 9
    assert move_action(Move("index", 4), [7, 9, 11]) == -1
    for text in ("p R11", "p R1", "d X5", "take", "hello"):
        assert parse_move(text) is None, text


def test_why_a_card_cannot_be_played() -> None:
    r5, r3, rw = 44, 42, 40  # red 5, red 3, red wager
    hands = ([rw, r3, r5, 1, 2, 3, 4, 5], [11, 12, 13, 14, 15, 16, 17, 18])
    rest = spec.sorted_deck()
    for card in [*hands[0], *hands[1]]:
        rest.remove(card)
    game = LostCitiesGame.from_deal(hands, rest)
    for action in (spec.PLAY + r5, spec.DRAW_DECK, spec.DISCARD + 11, spec.DRAW_DECK):
        game.apply(action)
    assert why_illegal(game, Move("play", r3), spec.PLAY + r3) == (
        "R3 must be higher than R5, the top of your red expedition"
    )
    assert why_illegal(game, Move("play", rw), spec.PLAY + rw) == (
        "a wager goes before any number: your red expedition has R5"
    )
    assert why_illegal(game, Move("index", 40), -1) == "the list has moves 1 to 14"


def test_first_move_every_turn_plays_a_full_game(agent_file: Path) -> None:
    code, out = play(agent_file, "1\n" * 400)
    assert code == 0
    assert "agent: " in out and "final scores" in out
    total = next(line for line in out.splitlines() if line.strip().startswith("total"))
    you, agent = (int(x) for x in total.split()[1:])
    verdict = out.rstrip().splitlines()[-1]
    if you > agent:
        assert verdict == f"You win by {you - agent}."
    elif you < agent:
        assert verdict == f"The agent wins by {agent - you}."
    else:
        assert verdict == "A draw."


def test_an_illegal_move_is_explained_and_the_game_goes_on(agent_file: Path) -> None:
    hand = LostCitiesGame.from_seed(arena_deal_seed(SEED, 0)).hand(0)
    missing = spec.card_name(next(t for t in range(spec.NUM_CARD_TYPES) if t not in hand))
    code, out = play(agent_file, f"p {missing}\ndeck\n1\np R5\n1\nq\n")
    assert code == 0
    assert (
        f"not a legal move: 'p {missing}' (you do not hold {missing}); type ? for the list" in out
    )
    assert "(play or discard a card first, then draw)" in out
    assert "(you have played this turn; now draw: deck or take <color>)" in out
    assert "agent: " in out  # the person's turn went through, then the agent's
    assert out.rstrip().endswith("quit at turn 3; no result.")


def test_help_lists_the_moves(agent_file: Path) -> None:
    code, out = play(agent_file, "?\nq\n")
    assert code == 0
    assert out.count("  discard:  ") == 2  # once with the board, once after ?


def test_q_and_end_of_input_quit_cleanly(agent_file: Path) -> None:
    for typed in ("q\n", ""):
        code, out = play(agent_file, typed, "--seat", "1")
        assert code == 0
        assert "agent: " in out  # seat 1: the agent moved first
        assert out.rstrip().endswith("quit at turn 2; no result.")


def test_cli_through_a_pipe(agent_file: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "lostcities.cli.play", str(agent_file), "--seed", "3"],
        input="p Q5\nquit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "not a legal move: 'p Q5' (not a move" in run.stdout
    assert "quit at turn 1" in run.stdout


def test_a_missing_file_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "nope.pt"), "--seed", "1"], io.StringIO("")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "not found" in err[0]


def test_the_agent_can_search_at_play_time(agent_file: Path) -> None:
    code, out = play(agent_file, "1\n" * 400, "--search", "4", "--search-candidates", "3")
    assert code == 0
    assert "[search(sdcfr), sampled]" in out and "final scores" in out
