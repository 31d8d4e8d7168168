"""Engine benchmark: random full Lost Cities games per second, three ways, side by side.

    python benchmarks/bench_engine.py [--seconds 3]

1. C level: ``random_playouts`` steps the kernel with no Python call per move.
2. Wrapper: ``LostCitiesGame`` driven step by step from Python.
3. Reference: the pure-Python ``lostcities.reference.lost_cities_rules.RulesState``.

The three loops run interleaved in rounds (C, wrapper, reference, C, ...) so
machine noise hits them alike; the ratios are what to compare across runs.
Expected: C >= 100x the reference and >= 10x the wrapper.
"""

from __future__ import annotations

import argparse
import sys
import time

from lostcities.games._state import random_playouts
from lostcities.games.lost_cities import LostCitiesGame
from lostcities.reference.lost_cities_rules import RulesState
from lostcities.rng import Stream, stream_key


def c_level(games: int, seed: int) -> None:
    random_playouts(LostCitiesGame.from_seed(seed).kernel, games, stream_key(seed, 1))


def stepped(factory, games: int, seed: int) -> None:
    choices = Stream(stream_key(seed, 2))
    for g in range(games):
        game = factory(seed + g)
        while not game.is_terminal:
            legal = game.legal_actions()
            game.apply(legal[choices.below(len(legal))])


LOOPS = {
    "C-level playout": c_level,
    "Python wrapper, step by step": lambda n, s: stepped(LostCitiesGame.from_seed, n, s),
    "reference (pure Python)": lambda n, s: stepped(RulesState.from_seed, n, s),
}


def calibrate(loop, seconds: float) -> int:
    """Games per round so one round of this loop takes about ``seconds``."""
    games = 1
    while True:
        start = time.perf_counter()
        loop(games, 0)
        elapsed = time.perf_counter() - start
        if elapsed > 0.2:
            return max(1, int(games * seconds / elapsed))
        games *= 4


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per loop per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args(argv)

    sizes = {name: calibrate(loop, args.seconds) for name, loop in LOOPS.items()}
    games = dict.fromkeys(LOOPS, 0)
    spent = dict.fromkeys(LOOPS, 0.0)
    for r in range(args.rounds):
        for name, loop in LOOPS.items():
            start = time.perf_counter()
            loop(sizes[name], 1000 + r)
            spent[name] += time.perf_counter() - start
            games[name] += sizes[name]
    rates = {name: games[name] / spent[name] for name in LOOPS}

    c_rate, wrapper, reference = rates.values()
    print(f"{'loop':<32}{'games/s':>12}{'games':>10}")
    for name, rate in rates.items():
        print(f"{name:<32}{rate:>12.1f}{games[name]:>10}")
    print(f"C / reference  = {c_rate / reference:8.1f}x   (target >= 100x)")
    print(f"C / wrapper    = {c_rate / wrapper:8.1f}x   (target >= 10x)")
    print(f"wrapper / ref  = {wrapper / reference:8.1f}x")
    return rates


if __name__ == "__main__":
    main(sys.argv[1:])
