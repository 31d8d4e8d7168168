# cython: language_level=3
"""Deep CFR traversal kernel over the C-level ``GameState`` interface.

One ``Traverser`` runs traversals of any game; the only call out to Python
per decision node is the policy query (a batch of rows in the rollout
scheme). All randomness comes from streams keyed by
``(seed, iteration, player, traversal index, purpose)``, so a traversal's
samples depend on its ID alone, never on the worker that ran it.

Schemes
- external: textbook external sampling (the traverser tries every action,
  opponent and chance are sampled). Exact and cheap on Kuhn and Leduc,
  exponential on Lost Cities.
- rollout: the traverser's trajectory follows a fixed sampling policy
  (uniform, or ``sampling_policy``: a callback like ``policy`` that must not
  change across iterations), the opponent follows sigma and chance its true distribution. Each
  traverser decision node on the trajectory branches with probability
  ``branch_prob``; a branching node tries every legal action and estimates
  each action's value by ``rollouts`` on-policy playouts (both players on
  sigma, the hidden draw pile reshuffled per playout; the playouts of one
  branching node share random numbers across its actions). The sampling weight
  of an infoset does not change across iterations, so regret matching on
  the accumulated regrets stays unbiased (the ESCHER argument).

Action values at a branching node (``action_values``)
- playout: the value of action a is the mean of ``rollouts`` on-policy playouts
  from b.a to the end (sigma in both seats: one network forward per step once
  sigma is a network).
- learned: the value of a is the learned history value of sigma at b.a
  (``value_fn``, trained on sigma's own play: ESCHER, McAleer et al. 2022), one
  batched forward for every child of every branching node; a child at a chance
  node is advanced through it first (with the playout stream), a terminal child
  is valued exactly. A history is encoded as both seats' information states,
  the traverser's first: ``encode(p) + encode(1 - p)`` (2 * encoding_size).

Samples hold information states in the game's compact form (``GameState.compact``:
compact_size bytes, a history both seats' side by side); the memories expand them to
features when a fit draws them (lostcities/cfr/memory.py).

Value traversals (``run_values``) make the learned value's training data: the
same trajectory as a regret traversal (its streams keyed apart, purpose
PURPOSE_VALUE), then at each branching node one uniformly random legal action and
an on-policy playout of sigma to the end; every playout's first decision state,
and each later one with probability ``value_record``, is recorded from both
seats' sides with that seat's final utility as the target. Every state after
the random action is reached by sigma alone, so the targets are unbiased samples
of sigma's value there.

``lostcities/cfr/traversal.py`` is the documented wrapper;
``lostcities/reference/traversal.py`` holds the pure-Python twin that the property tests
drive beside it.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, uint8_t, uint64_t
from libc.string cimport memcpy

from lostcities._rng cimport (PURPOSE_BRANCH, PURPOSE_CHANCE, PURPOSE_DEAL, PURPOSE_OPPONENT, PURPOSE_ROLLOUT,
                              PURPOSE_TRAVERSER, PURPOSE_VALUE, Rng, rng_below, rng_choice,
                              rng_init, rng_next, rng_uniform, stream_key)
from lostcities.games._state cimport (CHANCE_PLAYER, MAX_ACTIONS, MAX_CHANCE_OUTCOMES,
                                     TERMINAL_PLAYER, GameState)

cnp.import_array()

SCHEMES = ("external", "rollout")
ACTION_VALUES = ("playout", "learned")
# Sub-stream words of a value traversal's key (after the shared PURPOSE_* ones).
VALUE_EXPLORE = 7  # the random action at each of its branching nodes
VALUE_RECORD = 8  # which later playout states are recorded


cdef class SampleBuffer:
    """Growable rows of (compact information states uint8 [w], mask uint8 [A], target
    float32 [A]); w is compact_size, or twice it for a history (both seats)."""

    cdef public object states, masks, targets
    cdef public Py_ssize_t size
    cdef uint8_t[:, ::1] s
    cdef uint8_t[:, ::1] m
    cdef float[:, ::1] y

    def __init__(self, int width, int num_actions, Py_ssize_t capacity=64):
        self.states = np.zeros((capacity, width), dtype=np.uint8)
        self.masks = np.zeros((capacity, num_actions), dtype=np.uint8)
        self.targets = np.zeros((capacity, num_actions), dtype=np.float32)
        self.s, self.m, self.y = self.states, self.masks, self.targets
        self.size = 0

    cdef Py_ssize_t add(self):
        """Reserve one row (zeroed) and return its index."""
        cdef Py_ssize_t cap = self.s.shape[0]
        if self.size == cap:
            self.states = np.concatenate([self.states, np.zeros_like(self.states)])
            self.masks = np.concatenate([self.masks, np.zeros_like(self.masks)])
            self.targets = np.concatenate([self.targets, np.zeros_like(self.targets)])
            self.s, self.m, self.y = self.states, self.masks, self.targets
        self.size += 1
        return self.size - 1

    def take(self):
        """(states, masks, targets) trimmed to the rows written."""
        n = self.size
        return self.states[:n].copy(), self.masks[:n].copy(), self.targets[:n].copy()


cdef class Traverser:
    """Runs traversals of one game with a policy callback.

    ``policy(players int8 (n,), features float32 (n, d), masks uint8 (n, A),
    out float64 (n, A))`` must write sigma (rows summing to 1 over legal
    actions) into ``out``; it is called with views of preallocated buffers.
    """

    cdef GameState prototype
    cdef object policy
    cdef readonly object sampling_policy
    cdef readonly int num_actions, dim, compact_size
    cdef readonly int scheme_id, rollouts
    cdef readonly double branch_prob, utility_scale
    cdef readonly bint win_loss
    cdef readonly uint64_t seed
    cdef list stack
    cdef list pool
    # policy query buffers: up to query_capacity rows
    cdef object q_players_arr, q_features_arr, q_masks_arr, q_out_arr
    cdef int8_t[::1] q_players
    cdef float[:, ::1] q_features
    cdef uint8_t[:, ::1] q_masks
    cdef double[:, ::1] q_out
    cdef int query_capacity
    cdef readonly int inference_batch  # most rows per policy call (0: no cap)
    # learned action values: value_fn(players int8 (n,), features float32 (n, 2d),
    # out float64 (n,)) writes sigma's value of each history for its player
    cdef object value_fn
    cdef readonly int action_values_id  # index in ACTION_VALUES
    cdef readonly double value_record
    cdef object vq_players_arr, vq_features_arr, vq_out_arr
    cdef int8_t[::1] vq_players
    cdef float[:, ::1] vq_features
    cdef double[::1] vq_out
    cdef int value_capacity
    cdef SampleBuffer vals  # value samples of the running value traversal
    cdef list val_owner  # per value sample: (playout, seat)
    cdef Rng record_rng
    cdef readonly bint debug_checks
    cdef int cur_iteration, cur_player, cur_index  # ID of the traversal running
    # per-depth scratch for the external recursion
    cdef double[:, ::1] depth_sigma, depth_values
    cdef uint8_t[:, ::1] depth_mask
    cdef Rng chance_rng, opp_rng, trav_rng, branch_rng
    cdef uint64_t explore_key  # a value traversal's random actions
    cdef uint64_t rollout_key
    cdef object playout_rngs_arr    # uint64 (playouts,): one stream state per playout
    cdef uint64_t[::1] playout_rngs
    cdef SampleBuffer adv, strat
    cdef public long nodes, terminals, branch_nodes, playouts, queries, query_rows
    cdef public long value_queries, value_rows
    # Game-operation counts since construction (benchmarks/bench_traversal.py turns them into
    # time with lostcities.games._state.op_costs); not part of a traversal's result.
    cdef public long ops_mask, ops_encode, ops_apply, ops_reshuffle

    def __init__(self, GameState prototype, policy, str scheme="external", uint64_t seed=0,
                 double branch_prob=0.1, int rollouts=1, double utility_scale=1.0,
                 bint win_loss=False, sampling_policy=None, int max_depth=4096,
                 int inference_batch=0, bint debug_checks=False, value_fn=None,
                 str action_values="playout", double value_record=0.0):
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if action_values not in ACTION_VALUES:
            raise ValueError(f"action_values must be one of {ACTION_VALUES}, got {action_values!r}")
        if action_values == "learned" and value_fn is None:
            raise ValueError("action_values='learned' needs a value_fn")
        if prototype.num_actions > MAX_ACTIONS:
            raise ValueError(f"games with more than {MAX_ACTIONS} actions are not supported")
        self.prototype = prototype.clone()
        self.policy = policy
        self.num_actions = prototype.num_actions
        self.dim = prototype.encoding_size
        self.compact_size = prototype.compact_size
        self.scheme_id = SCHEMES.index(scheme)
        self.seed = seed
        self.branch_prob = branch_prob
        self.rollouts = rollouts
        self.utility_scale = utility_scale
        self.win_loss = win_loss
        self.sampling_policy = sampling_policy
        if inference_batch < 0:
            raise ValueError(f"inference_batch must be >= 0 (0: no cap), got {inference_batch}")
        self.inference_batch = inference_batch
        self.debug_checks = debug_checks
        self.value_fn = value_fn
        self.action_values_id = ACTION_VALUES.index(action_values)
        self.value_record = value_record
        self._grow_value_queries(64)
        self.stack = [prototype.clone() for _ in range(64)]
        self.pool = []
        self._grow_queries(64)
        self.depth_sigma = np.zeros((max_depth, self.num_actions))
        self.depth_values = np.zeros((max_depth, self.num_actions))
        self.depth_mask = np.zeros((max_depth, self.num_actions), dtype=np.uint8)

    cdef void _grow_queries(self, int capacity):
        self.query_capacity = capacity
        self.q_players_arr = np.zeros(capacity, dtype=np.int8)
        self.q_features_arr = np.zeros((capacity, self.dim), dtype=np.float32)
        self.q_masks_arr = np.zeros((capacity, self.num_actions), dtype=np.uint8)
        self.q_out_arr = np.zeros((capacity, self.num_actions), dtype=np.float64)
        self.q_players = self.q_players_arr
        self.q_features = self.q_features_arr
        self.q_masks = self.q_masks_arr
        self.q_out = self.q_out_arr

    cdef void _grow_value_queries(self, int capacity):
        self.value_capacity = capacity
        self.vq_players_arr = np.zeros(capacity, dtype=np.int8)
        self.vq_features_arr = np.zeros((capacity, 2 * self.dim), dtype=np.float32)
        self.vq_out_arr = np.zeros(capacity, dtype=np.float64)
        self.vq_players = self.vq_players_arr
        self.vq_features = self.vq_features_arr
        self.vq_out = self.vq_out_arr

    cdef int _value_query(self, int n) except -1:
        """sigma's learned value for value rows [0, n), in calls of at most
        ``inference_batch`` rows (stats count logical queries, as ``_query`` does)."""
        cdef int start = 0, stop
        cdef int cap = self.inference_batch if self.inference_batch > 0 else n
        self.value_queries += 1
        self.value_rows += n
        while start < n:
            stop = min(n, start + cap)
            self.value_fn(self.vq_players_arr[start:stop], self.vq_features_arr[start:stop],
                          self.vq_out_arr[start:stop])
            start = stop
        return 0

    cdef void _encode_history(self, GameState state, int player, float* out) noexcept:
        """Both seats' information states, ``player``'s first: 2 * encoding_size floats."""
        self.ops_encode += 2
        state.encode(player, out)
        state.encode(1 - player, out + self.dim)

    cdef void _compact_history(self, GameState state, int player, uint8_t* out) noexcept:
        """The same history compactly: 2 * compact_size bytes, ``player``'s first."""
        state.compact(player, out)
        state.compact(1 - player, out + self.compact_size)

    cdef int _query(self, int n) except -1:
        """sigma for query rows [0, n), in policy calls of at most ``inference_batch`` rows.
        The stats count logical queries, so they do not depend on the cap."""
        cdef int start = 0, stop
        cdef int cap = self.inference_batch if self.inference_batch > 0 else n
        self.queries += 1
        self.query_rows += n
        while start < n:
            stop = min(n, start + cap)
            self.policy(self.q_players_arr[start:stop], self.q_features_arr[start:stop],
                        self.q_masks_arr[start:stop], self.q_out_arr[start:stop])
            start = stop
        return 0

    cdef int _checked(self, int action, const uint8_t* mask) except -1:
        """``action`` if it may be applied. A sampler returns -1 for a row with no positive
        probability (all zero or NaN); ``apply`` has no bounds checks, so never pass it on.
        With ``debug_checks`` the action must also be legal."""
        if action < 0 or (self.debug_checks and not mask[action]):
            raise ValueError(
                f"traversal ({self.cur_iteration}, {self.cur_player}, {self.cur_index}): "
                f"sampled action {action} is not legal (a strategy row with no positive "
                "probability, NaN, or mass on an illegal action)"
            )
        return action

    cdef void _load_query_row(self, GameState state, int player, const uint8_t* mask) noexcept:
        """Write ``player``'s information state at ``state`` and its mask into query row 0."""
        self.q_players[0] = player
        self.ops_encode += 1
        state.encode(player, &self.q_features[0, 0])
        memcpy(&self.q_masks[0, 0], mask, self.num_actions)

    cdef void _record_strategy(self, GameState state, int player, const uint8_t* mask) noexcept:
        """Append ``player``'s information state at ``state`` with query row 0's mask and
        sigma as a strategy sample."""
        cdef Py_ssize_t row = self.strat.add()
        cdef int a
        state.compact(player, &self.strat.s[row, 0])
        for a in range(self.num_actions):
            self.strat.m[row, a] = mask[a]
            self.strat.y[row, a] = <float>self.q_out[0, a]

    cdef inline double _utility(self, double payoff) noexcept:
        """The traverser's payoff as the learning target: scaled score
        difference, or +1/0/-1 with win_loss."""
        if self.win_loss:
            payoff = (payoff > 0) - (payoff < 0)
        return payoff * self.utility_scale

    cdef GameState _at(self, int depth):
        while depth >= len(self.stack):
            self.stack.append(self.prototype.clone())
        return <GameState>self.stack[depth]

    def run(self, int iteration, int player, int index):
        """One traversal with ID (iteration, player, index).

        Returns (advantage samples, strategy samples, stats); samples are
        (compact information states uint8 (n, compact_size), masks uint8 (n, A), targets
        float32 (n, A))
        with targets = regrets for advantage samples and sigma for strategy
        samples.
        """
        cdef GameState root = self._at(0)
        cdef Rng deal_rng
        cdef uint64_t t = iteration, p = player, k = index
        self.cur_iteration, self.cur_player, self.cur_index = iteration, player, index
        rng_init(&deal_rng, stream_key(self.seed, t, p, k, PURPOSE_DEAL))
        rng_init(&self.chance_rng, stream_key(self.seed, t, p, k, PURPOSE_CHANCE))
        rng_init(&self.opp_rng, stream_key(self.seed, t, p, k, PURPOSE_OPPONENT))
        rng_init(&self.trav_rng, stream_key(self.seed, t, p, k, PURPOSE_TRAVERSER))
        rng_init(&self.branch_rng, stream_key(self.seed, t, p, k, PURPOSE_BRANCH))
        self.rollout_key = stream_key(self.seed, t, p, k, PURPOSE_ROLLOUT)
        self.adv = SampleBuffer(self.compact_size, self.num_actions)
        self.strat = SampleBuffer(self.compact_size, self.num_actions)
        self._reset_stats()
        root.reset(&deal_rng)
        if self.scheme_id == 0:
            self._external(0, player)
        else:
            self._rollout_scheme(player, False)
        return self.adv.take(), self.strat.take(), self._stats()

    def run_values(self, int iteration, int player, int index):
        """One value traversal with ID (iteration, player, index) (module docstring).

        Returns (value samples, stats): compact histories uint8 (n, 2 * compact_size)
        (the recorded seat's information state first), targets float32 (n,) (that seat's
        final utility). Draws from streams keyed apart from the regret traversal of the
        same ID (purpose PURPOSE_VALUE)."""
        if self.scheme_id != 1:
            raise ValueError("value traversals need scheme='rollout'")
        cdef GameState root = self._at(0)
        cdef Rng deal_rng
        cdef uint64_t t = iteration, p = player, k = index
        cdef uint64_t key = stream_key(self.seed, t, p, k, PURPOSE_VALUE)
        self.cur_iteration, self.cur_player, self.cur_index = iteration, player, index
        rng_init(&deal_rng, stream_key(key, PURPOSE_DEAL, 0, 0, 0))
        rng_init(&self.chance_rng, stream_key(key, PURPOSE_CHANCE, 0, 0, 0))
        rng_init(&self.opp_rng, stream_key(key, PURPOSE_OPPONENT, 0, 0, 0))
        rng_init(&self.trav_rng, stream_key(key, PURPOSE_TRAVERSER, 0, 0, 0))
        rng_init(&self.branch_rng, stream_key(key, PURPOSE_BRANCH, 0, 0, 0))
        rng_init(&self.record_rng, stream_key(key, VALUE_RECORD, 0, 0, 0))
        self.rollout_key = stream_key(key, PURPOSE_ROLLOUT, 0, 0, 0)
        self.explore_key = stream_key(key, VALUE_EXPLORE, 0, 0, 0)
        self.adv = SampleBuffer(self.compact_size, self.num_actions)
        self.strat = SampleBuffer(self.compact_size, self.num_actions)
        self.vals = SampleBuffer(2 * self.compact_size, 1)
        self.val_owner = []
        self._reset_stats()
        root.reset(&deal_rng)
        self._rollout_scheme(player, True)
        states, _, targets = self.vals.take()
        stats = self._stats()
        stats["value_samples"] = len(targets)
        return (states, targets[:, 0].copy()), stats

    cdef void _reset_stats(self) noexcept:
        self.nodes = self.terminals = 0
        self.branch_nodes = self.playouts = self.queries = self.query_rows = 0
        self.value_queries = self.value_rows = 0

    cdef dict _stats(self):
        stats = {
            "nodes": self.nodes, "terminals": self.terminals, "branch_nodes": self.branch_nodes,
            "playouts": self.playouts, "queries": self.queries, "query_rows": self.query_rows,
        }
        if self.action_values_id == 1:
            stats["value_queries"] = self.value_queries
            stats["value_rows"] = self.value_rows
        return stats

    # --- external sampling -----------------------------------------------------
    cdef double _external(self, int depth, int traverser) except? -1e300:
        cdef GameState state = self._at(depth)
        cdef GameState child = self._at(depth + 1)
        cdef int cur = state.current_player()
        cdef int n, a, row
        cdef int[MAX_CHANCE_OUTCOMES] outcomes
        cdef double[MAX_CHANCE_OUTCOMES] probs
        cdef double[2] ret
        cdef double value
        self.nodes += 1
        if cur == TERMINAL_PLAYER:
            self.terminals += 1
            state.returns(ret)
            return self._utility(ret[traverser])
        if cur == CHANCE_PLAYER:
            n = state.chance_outcomes(outcomes, probs)
            child.copy_from(state)
            self.ops_apply += 1
            child.apply(outcomes[rng_choice(&self.chance_rng, probs, n)])
            return self._external(depth + 1, traverser)
        # decision node: one policy query for sigma(I)
        cdef uint8_t* mask = &self.depth_mask[depth, 0]
        cdef double* sigma = &self.depth_sigma[depth, 0]
        cdef double* values = &self.depth_values[depth, 0]
        self.ops_mask += 1
        state.legal_mask(mask)
        self._load_query_row(state, cur, mask)
        self._query(1)
        memcpy(sigma, &self.q_out[0, 0], self.num_actions * sizeof(double))
        if cur == traverser:
            value = 0.0
            for a in range(self.num_actions):
                values[a] = 0.0
                if mask[a]:
                    child = self._at(depth + 1)
                    child.copy_from(state)
                    self.ops_apply += 1
                    child.apply(a)
                    values[a] = self._external(depth + 1, traverser)
                    value += sigma[a] * values[a]
            row = self.adv.add()
            state.compact(cur, &self.adv.s[row, 0])
            for a in range(self.num_actions):
                self.adv.m[row, a] = mask[a]
                if mask[a]:
                    self.adv.y[row, a] = <float>(values[a] - value)
            return value
        self._record_strategy(state, cur, mask)  # query row 0 still holds this node
        a = self._checked(rng_choice(&self.opp_rng, sigma, self.num_actions), mask)
        child.copy_from(state)
        self.ops_apply += 1
        child.apply(a)
        return self._external(depth + 1, traverser)

    # --- sampled trajectory + branching with on-policy rollouts -------------------
    cdef GameState _pooled(self, Py_ssize_t i):
        while i >= len(self.pool):
            self.pool.append(self.prototype.clone())
        return <GameState>self.pool[i]

    cdef int _rollout_scheme(self, int traverser, bint values) except -1:
        """The trajectory, then the branching nodes' regrets (a regret traversal) or the
        value playouts from them (``values``: a value traversal)."""
        cdef GameState state = self._at(0)
        cdef int cur, n, a, b, r, A = self.num_actions
        cdef int[MAX_ACTIONS] legal
        cdef int[MAX_CHANCE_OUTCOMES] outcomes
        cdef double[MAX_CHANCE_OUTCOMES] probs
        cdef uint8_t* mask = &self.depth_mask[0, 0]
        cdef list branches = []          # indices into pool of saved branch states
        cdef Py_ssize_t used = 0, row
        # 1) the trajectory
        while True:
            cur = state.current_player()
            self.nodes += 1
            if cur == TERMINAL_PLAYER:
                self.terminals += 1
                break
            if cur == CHANCE_PLAYER:
                n = state.chance_outcomes(outcomes, probs)
                self.ops_apply += 1
                state.apply(outcomes[rng_choice(&self.chance_rng, probs, n)])
                continue
            if cur == traverser:
                if rng_uniform(&self.branch_rng) < self.branch_prob:
                    self._pooled(used).copy_from(state)
                    branches.append(used)
                    used += 1
                self.ops_mask += 1
                if self.sampling_policy is None:  # uniform over the legal actions
                    n = state.legal_actions(legal)
                    a = legal[rng_below(&self.trav_rng, n)]
                else:  # a fixed policy, the same at every iteration
                    state.legal_mask(mask)
                    self._load_query_row(state, cur, mask)
                    self.sampling_policy(self.q_players_arr[:1], self.q_features_arr[:1],
                                         self.q_masks_arr[:1], self.q_out_arr[:1])
                    a = self._checked(rng_choice(&self.trav_rng, &self.q_out[0, 0], A), mask)
                self.ops_apply += 1
                state.apply(a)
                continue
            self.ops_mask += 1
            state.legal_mask(mask)
            self._load_query_row(state, cur, mask)
            self._query(1)
            if not values:
                self._record_strategy(state, cur, mask)
            a = self._checked(rng_choice(&self.opp_rng, &self.q_out[0, 0], A), mask)
            self.ops_apply += 1
            state.apply(a)
        if not branches:
            return 0
        if values:
            return self._value_playouts(branches, used, traverser)
        # 2) sigma at every branch node, in one batched query
        cdef int nb = len(branches)
        self.branch_nodes = nb
        if nb > self.query_capacity:
            self._grow_queries(2 * nb)
        for b in range(nb):
            state = self._pooled(branches[b])
            self.q_players[b] = traverser
            self.ops_mask += 1
            state.legal_mask(&self.q_masks[b, 0])
            self.ops_encode += 1
            state.encode(traverser, &self.q_features[b, 0])
        self._query(nb)
        sigma_arr = np.asarray(self.q_out_arr[:nb]).copy()
        mask_arr = np.asarray(self.q_masks_arr[:nb]).copy()
        cdef double[:, ::1] sigma = sigma_arr
        cdef uint8_t[:, ::1] bmask = mask_arr
        # 3) playouts: for each branch b, legal action a, repeat r: start at b.a
        # Common random numbers: the playouts of every action of branch b, repeat r,
        # share one stream, so q(a) - q(a') compares actions under the same luck
        # (each q(a) stays unbiased; their differences get far less noisy).
        owners = []                       # (branch, action) per playout
        cdef Py_ssize_t start = used
        cdef Rng prng
        keys = []
        for b in range(nb):
            for a in range(A):
                if bmask[b, a]:
                    for r in range(self.rollouts):
                        rng_init(&prng, stream_key(self.rollout_key, b, r, 0, 0))
                        state = self._pooled(used)
                        state.copy_from(self._pooled(branches[b]))
                        self.ops_apply += 1
                        state.apply(a)
                        self.ops_reshuffle += 1
                        state.reshuffle(&prng)
                        keys.append(prng.state)
                        owners.append((b, a))
                        used += 1
        cdef Py_ssize_t np_ = used - start
        self.playouts = np_
        self.playout_rngs_arr = np.array(keys, dtype=np.uint64)
        self.playout_rngs = self.playout_rngs_arr
        if self.action_values_id == 1:
            values_arr = self._child_values(start, np_, traverser)
        else:
            values_arr = self._playouts(start, np_, traverser, False)
        cdef double[::1] action_value = values_arr
        # 4) regrets = mean playout value per action - sigma-weighted value
        q_arr = np.zeros((nb, A))
        cdef double[:, ::1] q = q_arr
        cdef Py_ssize_t j
        cdef double v
        for j in range(np_):
            b, a = owners[j]
            q[b, a] += action_value[j] / self.rollouts
        for b in range(nb):
            v = 0.0
            for a in range(A):
                v += sigma[b, a] * q[b, a]
            row = self.adv.add()
            self._pooled(branches[b]).compact(traverser, &self.adv.s[row, 0])
            for a in range(A):
                self.adv.m[row, a] = bmask[b, a]
                if bmask[b, a]:
                    self.adv.y[row, a] = <float>(q[b, a] - v)
        return 0

    cdef int _value_playouts(self, list branches, Py_ssize_t used, int traverser) except -1:
        """A value traversal's playouts: at branching node b, one uniformly random legal
        action (stream (explore key, b)), the hidden pile reshuffled (stream (rollout key,
        b)), then sigma in both seats to the end, states recorded (``_playouts``); each
        recorded state's target is its seat's final utility."""
        cdef int nb = len(branches), b, n
        cdef int[MAX_ACTIONS] legal
        cdef Rng explore
        cdef GameState state
        cdef Py_ssize_t start = used, j
        keys = []
        for b in range(nb):
            rng_init(&explore, stream_key(self.explore_key, b, 0, 0, 0))
            state = self._pooled(used)
            state.copy_from(self._pooled(branches[b]))
            self.ops_mask += 1
            n = state.legal_actions(legal)
            self.ops_apply += 1
            state.apply(legal[rng_below(&explore, n)])
            keys.append(stream_key(self.rollout_key, b, 0, 0, 0))
            used += 1
        self.branch_nodes = nb
        self.playouts = nb
        self.playout_rngs_arr = np.array(keys, dtype=np.uint64)
        self.playout_rngs = self.playout_rngs_arr
        for b in range(nb):
            self.ops_reshuffle += 1
            self._pooled(start + b).reshuffle(<Rng*>&self.playout_rngs[b])
        values_arr = self._playouts(start, nb, traverser, True)
        cdef double[::1] value = values_arr
        cdef Py_ssize_t row
        for row in range(self.vals.size):
            j, seat = self.val_owner[row]
            self.vals.y[row, 0] = <float>(value[j] if seat == traverser else -value[j])
        return 0

    cdef int _past_chance(self, GameState state, Rng* rng) except? -100:
        """Advance ``state`` through its chance nodes with ``rng`` (a playout's stream);
        returns the player to act there, or TERMINAL_PLAYER. Counts the nodes passed."""
        cdef int cur, n
        cdef int[MAX_CHANCE_OUTCOMES] outcomes
        cdef double[MAX_CHANCE_OUTCOMES] probs
        while True:
            cur = state.current_player()
            if cur != CHANCE_PLAYER:
                break
            self.nodes += 1
            n = state.chance_outcomes(outcomes, probs)
            self.ops_apply += 1
            state.apply(outcomes[rng_choice(rng, probs, n)])
        self.nodes += 1
        return cur

    cdef object _child_values(self, Py_ssize_t start, Py_ssize_t count, int traverser):
        """sigma's learned values of pool[start:start+count] (the children of the
        branching nodes) for the traverser: chance nodes are advanced with each child's
        playout stream, a terminal child is valued exactly, the rest in one batched
        value query. Returns float64 (count,)."""
        values_arr = np.zeros(count)
        cdef double[::1] values = values_arr
        cdef Py_ssize_t j, n_rows = 0
        cdef GameState state
        cdef int cur
        cdef double[2] ret
        if count > self.value_capacity:
            self._grow_value_queries(2 * count)
        rows_arr = np.zeros(count, dtype=np.intp)
        cdef Py_ssize_t[::1] rows = rows_arr
        for j in range(count):
            state = self._pooled(start + j)
            cur = self._past_chance(state, <Rng*>&self.playout_rngs[j])
            if cur == TERMINAL_PLAYER:
                self.terminals += 1
                state.returns(ret)
                values[j] = self._utility(ret[traverser])
                continue
            self.vq_players[n_rows] = traverser
            self._encode_history(state, traverser, &self.vq_features[n_rows, 0])
            rows[n_rows] = j
            n_rows += 1
        if n_rows > 0:
            self._value_query(<int>n_rows)
            for j in range(n_rows):
                values[rows[j]] = self.vq_out[j]
        return values_arr

    cdef int _record_value_rows(self, GameState state, Py_ssize_t playout, int cur) except -1:
        """Both seats' views of ``state`` as value samples of ``playout`` (targets later)."""
        cdef Py_ssize_t row
        cdef int seat
        for seat in (cur, 1 - cur):
            row = self.vals.add()
            self._compact_history(state, seat, &self.vals.s[row, 0])
            self.vals.m[row, 0] = 1
            self.val_owner.append((playout, seat))
        return 0

    cdef object _playouts(self, Py_ssize_t start, Py_ssize_t count, int traverser, bint record):
        """Play pool[start:start+count] to the end in lockstep, both players on
        sigma, one batched query per step. Returns the traverser's values. With
        ``record`` (a value traversal), each playout's first decision state and each later
        one with probability ``value_record`` become value samples."""
        values_arr = np.zeros(count)
        cdef double[::1] values = values_arr
        live_arr = np.ones(count, dtype=np.uint8)
        cdef uint8_t[::1] live = live_arr
        cdef Py_ssize_t alive = count, j, n_rows
        cdef GameState state
        cdef int cur, a
        cdef double[2] ret
        if count > self.query_capacity:
            self._grow_queries(2 * count)
        rows_arr = np.zeros(count, dtype=np.intp)
        cdef Py_ssize_t[::1] rows = rows_arr
        first_arr = np.ones(count, dtype=np.uint8)  # a playout's first decision is still ahead
        cdef uint8_t[::1] first = first_arr
        while alive > 0:
            n_rows = 0
            for j in range(count):
                if not live[j]:
                    continue
                state = self._pooled(start + j)
                cur = self._past_chance(state, <Rng*>&self.playout_rngs[j])
                if cur == TERMINAL_PLAYER:
                    self.terminals += 1
                    state.returns(ret)
                    values[j] = self._utility(ret[traverser])
                    live[j] = 0
                    alive -= 1
                    continue
                if record and (first[j] or rng_uniform(&self.record_rng) < self.value_record):
                    self._record_value_rows(state, j, cur)
                first[j] = 0
                self.q_players[n_rows] = cur
                self.ops_mask += 1
                state.legal_mask(&self.q_masks[n_rows, 0])
                self.ops_encode += 1
                state.encode(cur, &self.q_features[n_rows, 0])
                rows[n_rows] = j
                n_rows += 1
            if n_rows == 0:
                break
            self._query(<int>n_rows)
            for j in range(n_rows):
                state = self._pooled(start + rows[j])
                a = self._checked(
                    rng_choice(<Rng*>&self.playout_rngs[rows[j]], &self.q_out[j, 0],
                               self.num_actions),
                    &self.q_masks[j, 0])
                self.ops_apply += 1
                state.apply(a)
        return values_arr
