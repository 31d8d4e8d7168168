"""Typed configuration: one dataclass per concern, registered with Hydra's ConfigStore.

``conf/train.yaml`` composes config groups (game, network, ...) on top of
these schemas, so a misspelt key or a wrongly typed value fails at compose
time with Hydra's message. Every field is declared with its rule
(:func:`lostcities.config_rules.checked`), so a bad value fails at start-up with one
line naming the key (lostcities/config_checks.py). The names a field may take
(schemes, bots, ...) are the vocabularies below; the modules that implement them
take their names from here. Library code receives only its own sub-config
(``TraversalConfig``, ``TrackingConfig``, ...), never ``TrainConfig``.
Every field is documented here; there is no logic in this module beyond
registration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore

from lostcities.config_rules import (
    boolean,
    checked,
    device,
    even_integer,
    integer,
    label,
    names_from,
    non_negative,
    number_in,
    one_of,
    optional_label,
    positive,
    ray_address,
    seed,
    texts,
)

# --- vocabularies: the names a field may take ----------------------------------------------

GAMES = ("lost_cities", "kuhn", "leduc")  # lostcities/games/__init__.py make_game
UTILITIES = ("score_diff", "win_loss")
NETWORK_KINDS = ("mlp", "color_shared")  # lostcities/cfr/networks.py
SCHEMES = ("external", "rollout")  # lostcities/cfr/_traverse.pyx
ACTION_VALUES = ("playout", "learned")  # lostcities/cfr/_traverse.pyx
UPDATES = ("alternating", "simultaneous")  # lostcities/cfr/trainer.py
INITIAL_STRATEGIES = ("uniform", "lost_cities_heuristic")  # lostcities/cfr/initial.py
EXECUTORS = ("inline", "processes", "ray")  # lostcities/cfr/executors/factory.py
LR_SCHEDULES = ("constant", "cosine")
POLICY_TRAINING = ("scratch", "continual")
ADVANTAGE_TARGETS = ("cumulative", "bootstrapped")  # lostcities/cfr/trainer.py
BOT_NAMES = (  # lostcities/eval/opponents.py
    "random",
    "discard_only",
    "eager",
    "cautious",
    "committer",
    "sigma1",
    "sigma1_greedy",
)
EVAL_AGENTS = ("policy", "current", "sdcfr")  # lostcities/eval/agents.py
PLAY_MODES = ("sampled", "greedy")  # lostcities/eval/agents.py choose_actions
AMP_DTYPES = ("off", "fp16", "bf16")  # lostcities/perf/amp.py
MEMORY_PRECISIONS = ("float16", "float32")  # lostcities/cfr/memory.py
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
EXPERIMENT_KINDS = ("ab", "amp", "drift")  # lostcities/experiments/protocols.py
EXPERIMENT_SETTINGS = ("full", "short", "reduced")  # conf/experiment/setting/
TEACHER_TARGETS = ("move", "search")  # lostcities/teacher/student.py
STUDENT_STARTS = ("fresh", "continued")  # lostcities/teacher/stage.py
MAX_TURNS = 30000  # the Lost Cities kernel's turn counter (lostcities/games/lost_cities.py)


@dataclass
class GameConfig:
    name: str = checked("lost_cities", one_of(GAMES))
    """Which game: ``lost_cities``, ``kuhn`` or ``leduc``."""
    max_turns: int = checked(1000, integer(1, MAX_TURNS))
    """Lost Cities turn cap (ends discard ping-pong; never binds in normal play; at most
    30000)."""
    utility: str = checked("score_diff", one_of(UTILITIES))
    """Lost Cities payoff: ``score_diff`` (zero-sum score difference) or ``win_loss`` (+1/0/-1)."""
    utility_scale: float = checked(1.0, positive())
    """Payoffs are multiplied by this inside traversals (keeps regret targets near unit scale)."""


@dataclass
class NetworkConfig:
    name: str = checked("default", label())
    """Label of the architecture (the config group choice), logged as a tag."""
    kind: str = checked("mlp", one_of(NETWORK_KINDS))
    """``mlp`` (``layers`` ReLU layers of width ``hidden``) or ``color_shared`` (Lost Cities:
    a trunk shared by the five colors, then ``attention_layers`` transformer layers across
    the colors; same input and output layout as the MLP)."""
    hidden: int = checked(512, integer(1))
    """Width of every hidden layer (color_shared: the per-color embedding width)."""
    layers: int = checked(3, integer(1))
    """Number of hidden layers of the MLP (color_shared: of the shared per-color trunk)."""
    attention_layers: int = checked(0, integer(0))
    """color_shared: transformer encoder layers across the five colors."""
    attention_heads: int = checked(4, integer(1))
    """color_shared: attention heads per transformer layer (must divide ``hidden``)."""
    normalize_last: bool = checked(False, boolean())
    """mlp: normalise the last hidden layer per row (mean 0, variance 1; Deep CFR's
    last-layer normalisation) before the head, in the advantage and policy networks (the
    value network is ``value``'s)."""


@dataclass
class TraversalConfig:
    scheme: str = checked("rollout", one_of(SCHEMES))
    """``external`` (textbook external sampling; Kuhn, Leduc) or ``rollout``
    (fixed-policy trajectory + branching with on-policy rollouts; Lost Cities)."""
    traversals_per_player: int = checked(100, integer(1))
    """Traversals per player per iteration (IDs (t, p, k) for k below this)."""
    first_traversals_per_player: int = checked(0, integer(0))
    """Traversals per player at iteration 1 (0: ``traversals_per_player``). Iteration 1
    plays sigma_1, which needs no network forward when it is a fixed rule, so its
    samples can be far cheaper; a sample's linear-CFR weight is divided by its
    iteration's traversal count, so every iteration keeps weight t whatever its size."""
    updates: str = checked("alternating", one_of(UPDATES))
    """``alternating`` (Brown et al. 2019: player 1 traverses against player 0's freshly
    trained network) or ``simultaneous`` (both players traverse against sigma_t, then
    both networks train; Zinkevich et al.'s CFR)."""
    branch_prob: float = checked(0.05, number_in("(0, 1]", lambda p: 0 < p <= 1))
    """rollout scheme: probability that a traverser decision node on the trajectory
    branches (constant over iterations, which keeps the regret estimate unbiased)."""
    rollouts: int = checked(1, integer(1))
    """rollout scheme: playouts per legal action at a branching node."""
    sampling_policy: str = checked("uniform", one_of(INITIAL_STRATEGIES))
    """rollout scheme: the fixed policy of the traverser's own trajectory: ``uniform`` or
    ``lost_cities_heuristic`` (a fixed mix, 10% uniform; trajectories then look like sensible
    play, so branching nodes sample the states an agent actually meets)."""
    sampling_explore: float = checked(0.0, number_in("[0, 1]", lambda e: 0 <= e <= 1))
    """rollout scheme: the share of uniform play mixed into ``sampling_policy``:
    (1 - e) * policy + e * uniform (fixed across iterations like the policy itself), so
    the traverser's trajectories also reach states the policy alone rarely does."""
    initial_strategy: str = checked("uniform", one_of(INITIAL_STRATEGIES))
    """sigma_1, played before a player's first advantage network exists: ``uniform``
    (textbook) or ``lost_cities_heuristic`` (see lostcities/cfr/initial.py; sound because
    regret matching's bound does not depend on the first strategy)."""
    warm_start: float = checked(0.0, non_negative())
    """Strategy-based warm start (Brown & Sandholm 2016): initial regrets c * sigma_1, so
    sigma_{t+1} = RM(c * sigma_1 + R_t) with R_t the linear-CFR cumulative regret (in
    utility units). 0 is plain Deep CFR. The seed fades as regrets accumulate and keeps
    regret matching's guarantee; it stops noisy early regret estimates from throwing away
    a sound sigma_1 (see lostcities/cfr/policy.py)."""
    anchor: float = checked(0.0, non_negative())
    """A pull towards sigma_1: every iteration's regret of action a gets a bonus
    ``a_t * sigma_1(a)`` (in utility units), a_t = anchor * t^-anchor_decay, so
    sigma_{t+1} = RM(R_t / W_t + (a_t + warm_start / W_t) * sigma_1). With no decay the
    fixed point is the equilibrium of a game regularised towards sigma_1 (as magnetic
    mirror descent or piKL regularise towards a reference policy); 0 is plain CFR. Where
    the learned regrets are noisy, the fading seed alone lets the noise take over once W_t
    is large."""
    anchor_decay: float = checked(0.0, non_negative())
    """How the anchor's pull fades with the iteration t of the advantage nets: a_t =
    anchor * t^-anchor_decay. 0 keeps it (a regularised equilibrium); 0.5 is magnetic
    mirror descent's annealing (Sokota et al. 2023, alpha_t ~ 1/sqrt(t)): strong while the
    regrets are noisy, and towards Nash as they accumulate, since the regularised game
    approaches the real one. It fades far slower than the warm start's 1/W_t ~ 2/t^2."""
    cache_strategies: bool = checked(False, boolean())
    """Memoize sigma per information state within an iteration (exact; pays off on
    small games whose infosets repeat, useless on Lost Cities)."""
    inference_batch: int = checked(0, integer(0))
    """Most rows one network forward takes inside a traversal (0: no cap, the whole
    lockstep step of one traversal's playouts). With ``determinism=strict`` it cannot change
    a result; with ``off`` it may, through BLAS rounding (measured in bench_inference.py)."""
    debug_checks: bool = checked(False, boolean())
    """Check in the kernel that every sampled action is legal before applying it (the
    build turns off bounds checks, so a bad action would otherwise corrupt memory)."""
    action_values: str = checked("playout", one_of(ACTION_VALUES))
    """rollout scheme: how an action's value at a branching node is estimated.
    ``playout``: ``rollouts`` on-policy playouts of sigma_t to the end (one network
    forward per step once sigma_t is a network). ``learned``: sigma_t's learned history
    value at the child (ESCHER, McAleer et al. 2022): one batched forward of the value
    network (``value``) for every child of every branching node, so an iteration's cost
    stays flat as sigma_t becomes a network; the network is trained each iteration on
    sigma_t's own play (value traversals)."""
    value_traversals_per_player: int = checked(500, integer(1))
    """``learned``: value traversals per player and iteration (IDs (t, p, k) of their
    own streams): the regret traversal's trajectory, then at each branching node one
    uniformly random action and a playout of sigma_t to the end, whose states are the
    value network's training samples."""
    value_record: float = checked(0.1, number_in("[0, 1]", lambda p: 0 <= p <= 1))
    """``learned``: each value playout's first state is a sample (from both seats' sides);
    each later state is one with this probability."""


@dataclass
class ExecutorConfig:
    """Where traversals run (the config group ``executor``). A performance setting only:
    results do not depend on it, since every random number of a traversal is keyed by its
    ID (lostcities/cfr/executors/)."""

    name: str = checked("inline", one_of(EXECUTORS))
    """``inline`` (in the trainer's process), ``processes`` (a pool of ``num_workers``
    spawned worker processes that lives for the whole run) or ``ray`` (``num_workers``
    actors on the Ray cluster at ``ray_address``; needs the ``ray`` extra)."""
    num_workers: int = checked(0, integer(0))
    """Worker processes of ``processes`` (0: the cores this process may use), or actors
    of ``ray`` (0: one per CPU of the cluster)."""
    ray_address: str | None = checked(None, ray_address())
    """The Ray cluster of ``ray``: null starts a local Ray for the run (stopped at its end),
    ``auto`` joins the cluster this machine belongs to (``ray start``), ``HOST:PORT`` a head
    node's GCS address, ``ray://HOST:PORT`` a Ray client server."""
    chunk_size: int = checked(0, integer(0))
    """Traversal IDs per task sent to a worker (0: automatic, about four tasks per worker
    per iteration and player so that uneven traversal lengths still balance)."""
    retries: int = checked(1, integer(0))
    """How often a chunk whose worker died or raised is rerun in a fresh worker before the
    run stops (the rerun gives identical results: every stream is keyed by traversal ID)."""


@dataclass
class ValueConfig:
    """The learned history value of sigma_t (``traversal.action_values=learned``): an MLP
    from both seats' information states (2 x the game's encoding) to the first seat's
    utility, fitted by mean squared error to the value traversals' targets."""

    hidden: int = checked(256, integer(1))
    """Width of every hidden layer."""
    layers: int = checked(2, integer(1))
    """Hidden layers."""
    steps: int = checked(1000, integer(1))
    """Adam steps per iteration (the network continues from the previous iteration's)."""
    batch_size: int = checked(512, integer(1))
    lr: float = checked(1e-3, positive())
    """Learning rate at the start of each fit; annealed to 0 over it (cosine)."""
    capacity: int = checked(300_000, integer(1))
    """Samples kept of one iteration's value traversals (a uniform reservoir): the data
    is sigma_t's alone, so the memory starts empty every iteration."""


@dataclass
class MemoryConfig:
    advantage_capacity: int = checked(1_000_000, integer(1))
    """Reservoir capacity of each player's advantage memory (samples)."""
    strategy_capacity: int = checked(1_000_000, integer(1))
    """Reservoir capacity of the strategy (average policy) memory."""
    precision: str = checked("float16", one_of(MEMORY_PRECISIONS))
    """Storage dtype of the advantage and strategy memories' targets: ``float16`` (half
    the bytes; regrets and sigma rounded to ~1e-3 relative) or ``float32`` (the exact
    values the traversals produced). Information states are stored compactly and expanded
    to their exact float32 features either way (lostcities/cfr/memory.py)."""


@dataclass
class OptimConfig:
    advantage_steps: int = checked(400, integer(1))
    """SGD steps per advantage-network training (per player per iteration); with
    ``advantage_passes`` the fewest."""
    advantage_passes: float = checked(0.0, non_negative())
    """Size each advantage fit by its memory: ceil(passes * samples in the memory / batch
    size) steps, at least ``advantage_steps`` (0: always ``advantage_steps``). A fit then
    sees every stored sample about ``passes`` times however large the reservoir has grown,
    where a fixed step count sees an ever smaller share of it."""
    advantage_batch_size: int = checked(1024, integer(1))
    advantage_lr: float = checked(1e-3, positive())
    reinit_advantage: bool = checked(True, boolean())
    """Train the advantage network from scratch each iteration (Brown et al. 2019); false
    continues the previous iteration's network and optimiser."""
    advantage_target: str = checked("cumulative", one_of(ADVANTAGE_TARGETS))
    """What an advantage net regresses, both estimates of the mean regret R_t / W_t.
    ``cumulative`` (Deep CFR): every stored iteration's sampled regrets, weighted by their
    iteration, over a reservoir of all iterations. ``bootstrapped`` (as VR-DeepPDCFR+, Xu
    et al. 2026): (W_{t-1} / W_t) A_{t-1}(I) + (t / W_t) r_t(I), the previous iteration's
    network plus this iteration's sampled regret, over this iteration's samples only (the
    player's memory is emptied every iteration): the same recursion on a problem that no
    longer grows with t, at the price of carrying A_{t-1}'s errors forward."""
    magnet: float = checked(0.0, non_negative())
    """A pull towards the average strategy that moves with it (magnetic mirror descent's
    moving magnet, Sokota et al. 2023, in regret-matching form): every sampled regret of
    action a that an advantage net fits gets ``magnet * pi(a | I)`` added (in utility
    units), pi the policy network's average strategy of the iterations before (sigma_1
    before the first). The nets then predict R_t / W_t plus the pull towards a weighted
    average of the average strategies, so play stays near what was learned, and where the
    average settles on an equilibrium its pull vanishes from the fixed point (a fixed
    ``traversal.anchor`` towards sigma_1 keeps its own). 0: none. Needs
    ``policy_training: continual`` (the average strategy trained every iteration)."""
    advantage_holdout: float = checked(0.0, number_in("[0, 0.5]", lambda h: 0 <= h <= 0.5))
    """The share of each advantage memory kept out of its fits to measure them (every
    round(1 / share)-th slot, a uniform sample whether or not the reservoir is full):
    ``fit/advantage_r2_p{0,1}`` is the fitted net's R^2 on those samples (0: none held
    out, nothing measured). A measurement setting: the fits see that much less data."""
    strategy_steps: int = checked(2000, integer(1))
    """SGD steps each time the policy network is trained; with ``strategy_passes`` the
    fewest."""
    strategy_passes: float = checked(0.0, non_negative())
    """The policy fit's size by its memory, as ``advantage_passes`` (with ``continual``
    training: passes over the memory per iteration)."""
    strategy_batch_size: int = checked(1024, integer(1))
    strategy_lr: float = checked(1e-3, positive())
    lr_schedule: str = checked("constant", one_of(LR_SCHEDULES))
    """Learning rate within each training (advantage and policy fits): ``constant`` or
    ``cosine`` (from the set rate down to 0 over the fit's steps; the rate is restored after)."""
    grad_clip: float = checked(1.0, non_negative())
    """Max global gradient norm (0 disables clipping)."""
    policy_training: str = checked("scratch", one_of(POLICY_TRAINING))
    """How the policy (average-strategy) network is trained, so that neither evaluation nor
    checkpoint cadence changes the agent: ``scratch`` (a fresh network, initialised and
    sampled from streams keyed by (seed, iteration), trained for ``strategy_steps`` whenever
    the policy is needed: at evaluation, checkpoint and the end) or ``continual`` (the same
    network trained for ``strategy_steps`` more at the end of every iteration)."""
    augment_symmetries: bool = checked(False, boolean())
    """Train on each sampled row under a random symmetry of the game (Lost Cities: one of
    the 120 color relabellings), so every sample teaches all colors. Needs a game with
    symmetries (Kuhn and Leduc define none)."""


@dataclass
class EvalConfig:
    every: int = checked(10, integer(1))
    """Evaluate (and train the policy network) every this many iterations, and at the end."""
    opponents: list[str] = checked(
        rule=names_from(BOT_NAMES), factory=lambda: ["random", "discard_only"]
    )
    """Lost Cities: bots the policy network plays against (see lostcities.eval.opponents)."""
    games: int = checked(200, even_integer(2))
    """Lost Cities: games per opponent, an even number (seats alternate, fixed seeds)."""
    batch_size: int = checked(256, integer(1))
    """Lost Cities: games stepped together so network forwards are batched."""
    seed: int = checked(12345, seed())
    """Seed of the evaluation deals (fixed, so every evaluation plays the same games)."""
    agent: str = checked("policy", one_of(EVAL_AGENTS))
    """Lost Cities: what the run is evaluated as (lostcities/eval/agents.py): ``policy``
    (the policy network), ``current`` (regret matching on the latest advantage nets) or
    ``sdcfr`` (single Deep CFR: one iteration's strategy per game, linear weights)."""
    play: str = checked("sampled", one_of(PLAY_MODES))
    """Lost Cities: how the agent's probabilities become moves: ``sampled`` or ``greedy``
    (the most probable legal action)."""
    br_games: int = checked(0, even_integer(0))
    """Lost Cities: games of a search best response against the agent (0: none), logged
    as ``eval/br/*`` (lostcities/eval/br.py): its mean score difference is the margin by
    which one-step deviations exploit the agent; learning makes it fall."""
    br_redeals: int = checked(32, integer(1))
    """Lost Cities: the best response's redeals of the hidden cards per decision."""
    br_candidates: int = checked(5, integer(1))
    """Lost Cities: the agent's most probable moves the best response tries per decision."""
    br_agent_plies: int = checked(0, integer(0))
    """Lost Cities: decisions after each tried move that the best response's playouts
    give to the agent (its model of the opponent's reply) before sigma_1's rule."""
    h2h_games: int = checked(0, even_integer(0))
    """Lost Cities: games of the agent against the run's agent after iteration
    ``h2h_iteration`` (0: none; played once the run is past it), logged as
    ``eval/h2h/*``."""
    h2h_iteration: int = checked(1, integer(1))
    """Lost Cities: the earlier iteration the agent meets head to head."""
    paired_baseline: bool = checked(True, boolean())
    """Lost Cities: also play sigma_1 (the initial strategy, played the same way) on the
    same games and log the agent's paired gain over it (eval/<bot>/gain_*)."""


@dataclass
class AmpConfig:
    name: str = checked("off", label())
    """Label of the choice (the config group ``amp``), logged as a tag."""
    dtype: str = checked("off", one_of(AMP_DTYPES))
    """Autocast dtype of the training phases (``DeepCFRTrainer._fit``): ``off`` (fp32, the
    exact pre-AMP code path), ``fp16`` (autocast + one shared GradScaler) or ``bf16`` (no
    scaler). On a device without fast low precision (a CPU) it warns once and runs fp32,
    unless ``on_cpu`` opts bf16 in."""
    on_cpu: bool = checked(False, boolean())
    """Run bf16 autocast on a CPU device too (``amp=bf16_cpu``) instead of falling back to
    fp32: faster than fp32 on a CPU with bf16 instructions, many times slower on one
    without (experiments/perf_switches/README.md). fp16 stays fp32 on a CPU whatever this
    says."""
    init_scale: float = checked(65536.0, positive())
    """fp16: the GradScaler's initial loss scale."""
    growth_interval: int = checked(2000, integer(1))
    """fp16: steps without an inf/NaN gradient before the scale doubles."""


@dataclass
class CompileConfig:
    name: str = checked("trainer", label())
    """Label of the choice (the config group ``compile``), logged as a tag."""
    trainer: bool = checked(True, boolean())
    """torch.compile the networks the trainer fits (one compiled module per network,
    reinitialised in place each iteration so it is compiled once)."""
    inference: bool = checked(False, boolean())
    """torch.compile the batched evaluation forward of the policy network."""
    mode: str = checked("default", one_of(COMPILE_MODES))
    """``default``, ``reduce-overhead``, ``max-autotune`` or ``max-autotune-no-cudagraphs``."""
    fullgraph: bool = checked(False, boolean())
    """Fail on a graph break instead of falling back to eager for that part."""
    dynamic: bool = checked(False, boolean())
    """Compile for symbolic batch sizes (training batches are fixed: False)."""
    max_recompiles: int = checked(8, integer(0))
    """Stop the run with a clear error when dynamo recompiles more often than this."""


@dataclass
class DeterminismConfig:
    name: str = checked("off", label())
    """Label of the choice (the config group ``determinism``), logged as a tag."""
    torch_deterministic: bool = checked(False, boolean())
    """``torch.use_deterministic_algorithms(True)``, cudnn benchmark off, TF32 off (matmul
    and cudnn), ``CUBLAS_WORKSPACE_CONFIG`` set: applied before anything is built, in the
    trainer and in every traversal worker."""
    batch_invariant_inference: bool = checked(False, boolean())
    """Traversal and evaluation forwards compute each row with a fixed-order per-row kernel
    (lostcities/cfr/inference.py), so a row's result never depends on the rows that share
    its batch: worker count, chunk size, ``traversal.inference_batch`` and
    ``eval.batch_size`` then cannot change a result."""


@dataclass
class ExperimentConfig:
    name: str = checked("experiment", label())
    """Experiment name: the sweep's parent MLflow run and its report are named after it."""
    kind: str = checked("ab", one_of(EXPERIMENT_KINDS))
    """Which verdict rules judge the arms (lostcities/experiments/protocols.py): ``ab``: the
    iteration time of a switch (torch.compile of the trainer: >= 8 timed iterations, >= 5%
    on the 1000-iteration projection, compile's size gate); ``amp``: the advantage +
    policy training time (>= 15%, both phases timed) and AMP's health (non-finite losses,
    the fp16 loss scale); ``drift``: learning curves with evaluation on. Every kind also
    needs the curves inside the baseline arm's seed-to-seed band."""
    setting: str = checked("full", one_of(EXPERIMENT_SETTINGS))
    """``full``: the notes' protocol (the experiment file's defaults); ``short``: a CPU
    smoke run of the same sweep (``+experiment/setting=short``); ``reduced``: the
    protocol's length with less work per iteration than the experiment file's
    (``+experiment/setting=reduced``, as benchmarks/gpu_check.py runs it). The report names
    either, and neither ships or passes: their verdicts are indicative."""
    arms: list[str] = checked(rule=texts(), factory=list)
    """One string of overrides per arm, e.g. ``["+compile=off", "+compile=trainer"]``
    (several overrides in one arm are separated by spaces)."""
    arm: int = checked(0, integer(0))
    """The arm this job runs (swept by the experiment: ``experiment.arm: 0,1``)."""
    baseline: int = checked(0, integer(0))
    """Index of the arm the others are compared with."""
    warmup_iterations: int = checked(1, integer(0))
    """Iterations dropped from timing means (compile, caches, worker start-up)."""
    isolate: bool = checked(True, boolean())
    """Run every job of the sweep in a fresh process, whichever Hydra launcher runs the
    jobs (compile caches, torch thread settings and RNG state cannot leak between arms):
    lostcities/experiments/launch.py."""


@dataclass
class TeacherConfig:
    rounds: int = checked(2, integer(1))
    """Rounds of the stage: check the teacher, play its games, train a student, gate it
    (lostcities/teacher/stage.py)."""
    games: int = checked(1000, integer(1))
    """Teacher games per round: the searched agent in both seats, every decision
    recorded (about 90 per game)."""
    redeals: int = checked(64, integer(1))
    """The teacher's search: redeals of the hidden cards per decision."""
    candidates: int = checked(5, integer(1))
    """The teacher's search: the blueprint's most probable moves it tries."""
    margin: float = checked(2.0, non_negative())
    """The teacher's search: it plays the blueprint's move unless another beats it by more
    than this many standard errors (lostcities/eval/search.py)."""
    target: str = checked("search", one_of(TEACHER_TARGETS))
    """What a decision teaches: ``move`` (the teacher's move, one-hot) or ``search``
    (softmax over the candidates of (mean + prior_weight * log pi) / temperature)."""
    temperature: float = checked(2.0, positive())
    """``target=search``: the softmax's temperature, in points of score difference."""
    prior_weight: float = checked(2.0, non_negative())
    """``target=search``: weight of the blueprint's log-probability beside the mean."""
    data_rounds: int = checked(3, integer(1))
    """The student trains on the teacher data of this many latest rounds (a fresh network
    on several rounds beat fine-tuning for the strongest public Lost Cities bot)."""
    student: str = checked("fresh", one_of(STUDENT_STARTS))
    """``fresh``: a new network (seeded by run and round); ``continued``: from the current
    agent's policy net."""
    passes: float = checked(10.0, positive())
    """The student's fit: passes over its data."""
    batch_size: int = checked(256, integer(1))
    """The student's fit: minibatch size."""
    lr: float = checked(1e-3, positive())
    """The student's fit: Adam's rate, cosine-annealed to 0 over the fit."""
    check_games: int = checked(200, even_integer(2))
    """Games of the teacher against its blueprint before a round's data is played; a
    teacher that does not beat it by ``gate_margin`` standard errors stops the stage."""
    gate_games: int = checked(400, even_integer(2))
    """Games of the student against the current agent (and against the teacher)."""
    gate_margin: float = checked(1.0, non_negative())
    """A student replaces the current agent if its win rate head to head is above 1/2 by
    more than this many standard errors."""
    play: str = checked("greedy", one_of(PLAY_MODES))
    """How the blueprint, the current agent and the student play alone."""


@dataclass
class TrackingConfig:
    enabled: bool = checked(True, boolean())
    """Log to MLflow. metrics.jsonl in the run directory is written regardless."""
    tracking_uri: str | None = checked(None, optional_label())
    """MLflow store; None means $MLFLOW_TRACKING_URI if set, else sqlite:///mlflow.db
    in the working directory."""
    experiment: str = checked("lostcities", label())
    """MLflow experiment name."""
    run_name: str | None = checked(None, optional_label())
    """MLflow run name; None lets the tracker derive one from the game and network."""
    parent_run_id: str | None = checked(None, optional_label())
    """Nest this run under that MLflow run (set by experiment sweeps for their arms)."""


@dataclass
class CheckpointConfig:
    every: int = checked(10, integer(0))
    """Write a checkpoint every this many iterations (0: only at the end)."""
    dir: str = checked("checkpoints", label())
    """Directory for checkpoints, relative to the run directory."""
    keep: int = checked(3, integer(0))
    """Resumable checkpoints kept in ``checkpoint.dir``, the newest first; older ones are
    deleted after a new one is written; 0 keeps all."""
    log_artifacts: bool = checked(False, boolean())
    """Also attach the final resumable checkpoint to the MLflow run (hundreds of MB on Lost
    Cities). The small agent file (``agent.pt``: what playing needs) is always attached."""


@dataclass
class RunConfig:
    seed: int = checked(0, seed())
    """Seed of every random stream of the run."""
    iterations: int = checked(30, integer(1))
    """CFR iterations."""
    resume: str | None = checked(None, optional_label())
    """Path of a checkpoint to continue from."""
    device: str = checked("cpu", device())
    """Torch device for network training and inference: ``cpu``, ``mps``, ``cuda`` or
    ``cuda:N``."""
    threads: int = checked(1, integer(0))
    """torch intra-op threads of the trainer process (0: torch's default, one per core).
    1 by default: with 2 threads on a 2-core machine that something else also uses, torch's
    threads wait on each other and training collapsed (Kuhn: 51 s per iteration at load 6.5
    against 1.1 s with 1 thread); the measurements behind the choice are in README.md
    ("Threads"). Traversal workers always run one thread each."""
    fit_threads: int = checked(0, integer(0))
    """torch intra-op threads while the trainer fits a network (0: ``run.threads``). The
    traversal workers wait meanwhile, so on a machine of its own a run can give the fits
    every core (README.md, "Threads, memory and disk"); on a shared machine keep 0 (see
    ``run.threads``)."""
    progress: bool = checked(True, boolean())
    """Print a header line, live progress of each phase (a tqdm bar on a terminal, a plain
    line every 30 s otherwise) and a summary line per iteration; false prints nothing."""


@dataclass
class TrainConfig:
    game: GameConfig = field(default_factory=GameConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    traversal: TraversalConfig = field(default_factory=TraversalConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    value: ValueConfig = field(default_factory=ValueConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    run: RunConfig = field(default_factory=RunConfig)
    determinism: DeterminismConfig = field(default_factory=DeterminismConfig)
    amp: AmpConfig = field(default_factory=AmpConfig)
    compile: CompileConfig | None = None
    """Absent unless the ``compile`` group is added: ``+compile=trainer``."""
    experiment: ExperimentConfig | None = None
    """Absent unless a sweep adds one: ``-m +experiment=compile_ab`` (conf/experiment/)."""
    teacher: TeacherConfig | None = None
    """Absent unless added: ``+teacher=search`` (or ``+experiment=search_teacher``): after
    the iterations, rounds of search as the teacher of a policy network."""


def register_configs() -> None:
    """Register the schemas so conf/ files are validated against them.

    Only the root schema is registered: ``train_schema`` comes first in conf/train.yaml's
    defaults list, so every group (``game``, ``network``, ``amp``, ``+compile``, ...) is
    merged into a node typed by its dataclass, and a misspelt key or a wrongly typed value
    in a group file fails at compose time. Schemas registered inside a group would show up
    as choices (``game=schema``) and add no check."""
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
