"""Inference benchmark: is torch's batched MLP forward batch invariant, and what does the
batch-invariant row-wise kernel (``RowwiseMLP``) cost next to it?

    python benchmarks/bench_inference.py [--rows 512] [--seconds 0.25] [--rounds 4]
                                         [--threads 1] [--networks compact default]

On real Lost Cities encodings (the player to move, along random games), for each network
(compact 256x2, the shipped one; default 512x3):
a. batch invariance of torch's forward: each row computed inside batches of B rows vs
   the same row alone (B = 1): fraction of rows with any differing bit, max |difference|;
   and the fixed-block workaround (always forward exactly 64 rows, zero padded): does a
   row's result depend on its position in the block and on its neighbours?
b. throughput (rows/s) of torch batched vs ``RowwiseMLP.forward`` at the same batch
   sizes, run interleaved in rounds (torch, row-wise, torch, ...) so machine noise hits
   both alike; the ratios are what to compare across runs;
c. how many of the encoding's features are nonzero, and how many post-ReLU hidden
   activations, which is what the row-wise kernel's work scales with.
Both sides run single threaded by default, as traversal workers do.

    python benchmarks/bench_inference.py --compile [--networks default wide] [--device cuda]

d. instead of a-c: the compile plan's target B, the policy's batched evaluation forward
   compiled as ``compile.inference`` compiles it (symbolic batch sizes, mode default)
   against eager, at the evaluation's batch sizes, interleaved in rounds; the verdict
   follows the plan: ship only if the compiled forward takes >= 20% less time over the
   batch mix (COMPILE_SHIP), else leave ``compile.inference`` off. Compiling costs tens
   of seconds per network on a CPU.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from lostcities.cfr.inference import RowwiseMLP
from lostcities.cfr.networks import build_network
from lostcities.config import NetworkConfig
from lostcities.games.lost_cities import LostCitiesGame

NETWORKS = {"compact": (256, 2), "default": (512, 3), "wide": (1024, 3), "deep": (512, 6)}
INVARIANCE_BATCHES = (1, 7, 64, 256)
THROUGHPUT_BATCHES = (1, 16, 64, 256)
BLOCK = 64  # rows of the fixed-block workaround
# d. Evaluation steps its games together, eval.batch_size (256) at first, fewer as games
# end: the compiled forward is judged on the time to push the rows once at each size.
COMPILE_BATCHES = (16, 64, 256)
COMPILE_SHIP = 0.20  # the compile design note's bar for the inference forward: >= 20% less time


def random_play_rows(rows: int, seed: int) -> np.ndarray:
    """(rows, encoding_size) float32: encodings seen by the player to move in random games."""
    choices = np.random.default_rng(seed)
    encodings = []
    game_seed = seed
    while len(encodings) < rows:
        game = LostCitiesGame.from_seed(game_seed)
        while not game.is_terminal and len(encodings) < rows:
            encodings.append(game.encode(game.current_player))
            legal = game.legal_actions()
            game.apply(legal[choices.integers(len(legal))])
        game_seed += 1
    return np.stack(encodings)


def torch_forward(net: torch.nn.Module, features: np.ndarray) -> np.ndarray:
    """What the policy does per call: numpy (n, d) -> torch -> forward -> numpy (n, A)."""
    with torch.inference_mode():
        return net(torch.from_numpy(features)).numpy()


def in_batches(forward, features: np.ndarray, batch: int) -> np.ndarray:
    """Rows (n, A) computed in consecutive batches of ``batch`` rows."""
    return np.concatenate(
        [forward(features[i : i + batch]) for i in range(0, len(features), batch)]
    )


def differences(outputs: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(fraction of rows with any differing bit, max |difference|) of (n, A) arrays."""
    differ = (outputs.view(np.uint32) != reference.view(np.uint32)).any(axis=1)
    return float(differ.mean()), float(np.abs(outputs - reference).max())


def padded_block(rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """(BLOCK, d) zeros with ``rows`` (m, d) placed at ``positions`` (m,)."""
    block = np.zeros((BLOCK, rows.shape[1]), dtype=np.float32)
    block[positions] = rows
    return block


def fixed_block_checks(net, features: np.ndarray, rng: np.random.Generator) -> dict:
    """Each row in a zero-padded block of BLOCK rows, three ways, against the row alone at
    position 0 of a zero block: (fraction of rows differing, max |difference|) per way."""
    n = len(features)
    alone_first = np.stack(
        [torch_forward(net, padded_block(features[i : i + 1], np.array([0])))[0] for i in range(n)]
    )
    positions = rng.integers(BLOCK, size=n)
    alone_elsewhere = np.stack(
        [
            torch_forward(net, padded_block(features[i : i + 1], positions[i : i + 1]))[p]
            for i, p in enumerate(positions)
        ]
    )

    def with_neighbours(offset: int) -> np.ndarray:
        # Blocks of real rows; the first holds BLOCK - offset of them, so each row gets
        # another position and other neighbours than with offset 0; partial blocks padded.
        out = np.empty((n, net.head.out_features), dtype=np.float32)
        starts = [0, *range(BLOCK - offset if offset else BLOCK, n, BLOCK)]
        for a, b in zip(starts, [*starts[1:], n], strict=True):
            place = np.arange(b - a) + (offset if a == 0 and offset else 0)
            out[a:b] = torch_forward(net, padded_block(features[a:b], place))[place]
        return out

    return {
        "alone, other position": differences(alone_elsewhere, alone_first),
        "full blocks": differences(with_neighbours(0), alone_first),
        "full blocks, shifted": differences(with_neighbours(BLOCK // 2 - 5), alone_first),
    }


def block_forward(forward, features: np.ndarray) -> np.ndarray:
    """The fixed-block workaround: rows (n, d) forwarded in zero-padded blocks of BLOCK."""
    outputs = []
    for start in range(0, len(features), BLOCK):
        rows = features[start : start + BLOCK]
        outputs.append(forward(padded_block(rows, np.arange(len(rows))))[: len(rows)])
    return np.concatenate(outputs)


def measure_throughput(
    runners: dict, features: np.ndarray, seconds: float, rounds: int
) -> dict[str, float]:
    """rows/s of each runner (name -> callable over all rows), interleaved in rounds."""
    passes = {}
    for name, run in runners.items():  # calibrate: passes over the rows per round
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        passes[name] = max(1, round(seconds / max(elapsed, 1e-9)))
    rows = dict.fromkeys(runners, 0)
    spent = dict.fromkeys(runners, 0.0)
    for _ in range(rounds):
        for name, run in runners.items():
            start = time.perf_counter()
            for _ in range(passes[name]):
                run()
            spent[name] += time.perf_counter() - start
            rows[name] += passes[name] * len(features)
    return {name: rows[name] / spent[name] for name in runners}


def batched_runner(forward, chunks: list[np.ndarray]):
    def run() -> None:
        for chunk in chunks:
            forward(chunk)

    return run


def compile_verdict(eager_seconds: float, compiled_seconds: float) -> tuple[str, str]:
    """The compile plan's decision for target B: (verdict, reason)."""
    effect = 1 - compiled_seconds / eager_seconds
    if effect >= COMPILE_SHIP:
        return "ship", (
            f"compiled forward {100 * effect:.1f}% faster (>= {100 * COMPILE_SHIP:.0f}%): "
            "compile.inference may ship"
        )
    if effect >= 0:
        return "park", (
            f"compiled forward {100 * effect:.1f}% faster (< {100 * COMPILE_SHIP:.0f}%): "
            "leave compile.inference off"
        )
    return "park", f"compiled forward {100 * -effect:.1f}% slower: leave compile.inference off"


def bench_compiled_forward(
    net: torch.nn.Module, features: np.ndarray, device: str, seconds: float, rounds: int
) -> dict:
    """d. ``net``'s evaluation forward, eager and compiled the way ``compile.inference``
    compiles it (lostcities/perf/step.py: ``compile_module(net, cfg, dynamic=True)``), at
    COMPILE_BATCHES; seconds per pass over every size, max |difference|, compile time and
    recompiles while warming up every size."""
    from lostcities.config import CompileConfig
    from lostcities.perf.compile import compile_module, recompile_count

    net = net.to(device)

    def forward_with(module):
        def forward(rows: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                return module(torch.from_numpy(rows).to(device)).float().cpu().numpy()

        return forward

    recompiles = recompile_count()  # installs the counter before the first compile
    compiled = compile_module(
        net, CompileConfig(name="inference", trainer=False, inference=True), True
    )
    eager, fast = forward_with(net), forward_with(compiled)
    start = time.perf_counter()
    outputs = {b: in_batches(fast, features, b) for b in COMPILE_BATCHES}  # compiles, warms
    compile_seconds = time.perf_counter() - start
    reference = in_batches(eager, features, 64)
    runners = {}
    for b in COMPILE_BATCHES:
        chunks = [features[i : i + b] for i in range(0, len(features), b)]
        runners[("eager", b)] = batched_runner(eager, chunks)
        runners[("compiled", b)] = batched_runner(fast, chunks)
    rates = measure_throughput(runners, features, seconds, rounds)
    per_pass = {
        how: sum(len(features) / rates[(how, b)] for b in COMPILE_BATCHES)
        for how in ("eager", "compiled")
    }
    return {
        "rates": rates,
        "eager_seconds": per_pass["eager"],
        "compiled_seconds": per_pass["compiled"],
        "max_difference": max(float(np.abs(o - reference).max()) for o in outputs.values()),
        "compile_seconds": compile_seconds,
        "recompiles": recompile_count() - recompiles,
        "verdict": compile_verdict(per_pass["eager"], per_pass["compiled"]),
    }


def compile_main(args: argparse.Namespace, features: np.ndarray) -> dict[str, dict]:
    """d. target B for every network of ``args.networks``; prints a table and the verdicts."""
    actions = LostCitiesGame.from_seed(0).kernel.num_actions
    results = {}
    print(
        f"d. compile.inference (target B) on {args.device}: rows/s at the evaluation's "
        f"batch sizes {COMPILE_BATCHES}; ships at >= {100 * COMPILE_SHIP:.0f}% less time"
    )
    for name in args.networks:
        hidden, layers = NETWORKS[name]
        cfg = NetworkConfig(name=name, hidden=hidden, layers=layers)
        net = build_network(cfg, features.shape[1], actions, seed=args.seed).eval()
        result = bench_compiled_forward(net, features, args.device, args.seconds, args.rounds)
        rates = result["rates"]
        print(
            f"\n== {name} {hidden}x{layers}: compiled in {result['compile_seconds']:.1f} s, "
            f"{result['recompiles']} recompile(s), max |diff| to eager "
            f"{result['max_difference']:.2e}"
        )
        print(f"   {'B':>5}{'eager':>12}{'compiled':>12}{'compiled/eager':>16}")
        for b in COMPILE_BATCHES:
            e, c = rates[("eager", b)], rates[("compiled", b)]
            print(f"   {b:>5}{e:>12,.0f}{c:>12,.0f}{c / e:>15.2f}x")
        verdict, reason = result["verdict"]
        print(f"   verdict: {verdict}: {reason}")
        results[name] = result
    return results


def hidden_zero_fraction(rowwise: RowwiseMLP, features: np.ndarray) -> float:
    """Fraction of post-ReLU hidden activations that are exactly zero."""
    x, zeros, total = features, 0, 0
    for weight, bias in rowwise.layers[:-1]:
        x = np.maximum(x @ weight + bias, 0)
        zeros += int((x == 0).sum())
        total += x.size
    return zeros / total


def main(argv: list[str] | None = None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=512, help="encodings from random play")
    parser.add_argument("--block-rows", type=int, default=128, help="rows for the block check")
    parser.add_argument("--seconds", type=float, default=0.25, help="per method, size, round")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (workers use 1)")
    parser.add_argument(
        "--networks", nargs="+", choices=NETWORKS, help="a-c: compact default; d: default wide"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="d. only: compile.inference")
    parser.add_argument("--device", default="cpu", help="d.: where the forward runs")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    features = random_play_rows(args.rows, args.seed)
    if args.compile:
        args.networks = args.networks or ["default", "wide"]  # under and over the size gate
        return compile_main(args, features)
    args.networks = args.networks or ["compact", "default"]
    nonzero = (features != 0).sum(axis=1)
    print(
        f"{len(features)} Lost Cities encodings from random play, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s)"
    )
    print(
        f"c. nonzero features per row: mean {nonzero.mean():.1f} of {features.shape[1]} "
        f"({100 * nonzero.mean() / features.shape[1]:.1f}%), min {nonzero.min()}, "
        f"max {nonzero.max()}"
    )

    results = {}
    for name in args.networks:
        hidden, layers = NETWORKS[name]
        net = build_network(
            NetworkConfig(name=name, hidden=hidden, layers=layers),
            features.shape[1],
            LostCitiesGame.from_seed(0).kernel.num_actions,
            seed=args.seed,
        ).eval()
        rowwise = RowwiseMLP.from_module(net)
        forward = lambda x, net=net: torch_forward(net, x)  # noqa: E731
        print(
            f"\n== {name} {hidden}x{layers}: hidden activations zero after ReLU "
            f"{100 * hidden_zero_fraction(rowwise, features):.0f}%"
        )

        # a. batch invariance of torch's forward
        alone = in_batches(forward, features, 1)
        # B = 1 against a second B = 1 pass: run-to-run repeatability.
        invariance = {
            b: differences(in_batches(forward, features, b), alone) for b in INVARIANCE_BATCHES
        }
        print("a. torch forward in batches of B vs the row alone (B=1)")
        print(f"   {'B':>5}{'rows differing':>16}{'max |diff|':>12}")
        for b in INVARIANCE_BATCHES:
            frac, diff = invariance[b]
            print(f"   {b:>5}{100 * frac:>15.1f}%{diff:>12.2e}")
        block = fixed_block_checks(
            net, features[: args.block_rows], np.random.default_rng(args.seed)
        )
        print(f"   fixed {BLOCK}-row zero-padded block vs the row alone at position 0:")
        for how, (frac, diff) in block.items():
            print(f"   {how:<24}{100 * frac:>6.1f}% rows differ, max |diff| {diff:.2e}")
        rowwise_alone = in_batches(rowwise.forward, features, 1)
        rowwise_frac = max(
            differences(in_batches(rowwise.forward, features, b), rowwise_alone)[0]
            for b in INVARIANCE_BATCHES
        )
        print(
            f"   RowwiseMLP: {100 * rowwise_frac:.1f}% rows differ at any B; "
            f"max |diff| to torch alone {np.abs(rowwise_alone - alone).max():.2e}"
        )

        # b. throughput, interleaved
        runners = {}
        for b in THROUGHPUT_BATCHES:
            chunks = [features[i : i + b] for i in range(0, len(features), b)]
            runners[("torch", b)] = batched_runner(forward, chunks)
            runners[("rowwise", b)] = batched_runner(rowwise.forward, chunks)
            runners[("block", b)] = batched_runner(lambda x, f=forward: block_forward(f, x), chunks)
        rates = measure_throughput(runners, features, args.seconds, args.rounds)
        print(f"b. throughput, rows/s (torch {BLOCK}-block: the fixed-block workaround)")
        print(
            f"   {'B':>5}{'torch':>12}{'RowwiseMLP':>12}{'rowwise/torch':>15}"
            f"{f'torch {BLOCK}-block':>16}"
        )
        for b in THROUGHPUT_BATCHES:
            t, r, k = rates[("torch", b)], rates[("rowwise", b)], rates[("block", b)]
            print(f"   {b:>5}{t:>12,.0f}{r:>12,.0f}{r / t:>14.2f}x{k:>16,.0f}")
        best_torch = max(rates[("torch", b)] for b in THROUGHPUT_BATCHES)
        print(
            f"   RowwiseMLP at B=64 vs torch alone (B=1): "
            f"{rates[('rowwise', 64)] / rates[('torch', 1)]:.1f}x; "
            f"vs torch's best batch: {rates[('rowwise', 64)] / best_torch:.2f}x"
        )
        results[name] = {
            "invariance": invariance,
            "block": block,
            "rowwise_differing": rowwise_frac,
            "rates": rates,
        }

    conclude(results)
    return results


def conclude(results: dict[str, dict]) -> None:
    print("\nConclusion")
    varies = max(r["invariance"][b][0] for r in results.values() for b in (7, 64, 256))
    block_varies = any(frac > 0 for r in results.values() for frac, _ in r["block"].values())
    print(
        f"  torch's batched forward is {'NOT ' if varies else ''}batch invariant here "
        f"(up to {100 * varies:.0f}% of rows change bits with B). The fixed zero-padded "
        f"{BLOCK}-row block {'does NOT help' if block_varies else 'was invariant here'}, "
        "but that is a BLAS implementation detail, not a guarantee, and a call of few rows "
        f"pays for {BLOCK}."
    )
    if any(r["rowwise_differing"] for r in results.values()):
        print("  RowwiseMLP changed bits with the batch: a BUG, do not use it as the strict path.")
        return
    small_b = (1, 16)
    for name, r in results.items():
        rates = r["rates"]
        ratios = ", ".join(
            f"B={b} {rates[('rowwise', b)] / rates[('torch', b)]:.2f}x" for b in THROUGHPUT_BATCHES
        )
        beats_block = all(rates[("rowwise", b)] > rates[("block", b)] for b in small_b)
        print(
            f"  {name}: RowwiseMLP / torch at the same B: {ratios}; "
            f"{'faster' if beats_block else 'NOT faster'} than the {BLOCK}-block at B<=16"
        )
    slowest = min(
        r["rates"][("rowwise", b)] / r["rates"][("torch", b)]
        for r in results.values()
        for b in (16, 64)
    )
    verdict = "fast enough" if slowest >= 0.5 else "too slow"
    print(
        f"  Strict path: RowwiseMLP is bitwise batch invariant by construction and {verdict} "
        f"to be it: at least {slowest:.2f}x torch's speed at B=16..64 (the batches traversals "
        "make), and faster at small B, where torch pays the dense work and per-call set-up."
    )


if __name__ == "__main__":
    main(sys.argv[1:])
