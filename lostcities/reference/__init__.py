"""Pure-Python reference twins of the Cython kernels, used by tests and benchmarks only.

Every Cython kernel (``lostcities/**/_*.pyx``) is a fast path with a slow, readable twin
that computes the same thing; property tests (hypothesis) drive both with random play and
require identical results. The rule: a change to a kernel changes its twin in the same
commit, and a new kernel comes with a twin here.

Kernel, its twin here, and the property test that drives both:

- ``games/_lost_cities.pyx`` (the game): ``lost_cities_rules.RulesState``;
  tests/games/test_lost_cities.py
- ``GameState.compact`` / ``expand`` in ``games/_lost_cities.pyx``, ``_kuhn.pyx`` and
  ``_leduc.pyx`` (compact information states, expanded to features):
  ``compact.lost_cities_compact`` / ``lost_cities_expand`` and the Kuhn and Leduc pairs;
  tests/games/test_compact.py
- ``cfr/_traverse.pyx`` (traversals): ``traversal.PyTraverser``; tests/cfr/test_traversal.py
- ``cfr/_heuristic.pyx`` (sigma_1): ``heuristic.lost_cities_heuristic_reference``;
  tests/cfr/test_heuristic_kernel.py
- ``cfr/_heuristic.pyx`` (search playouts): ``playouts.heuristic_playouts_reference``;
  tests/eval/test_search.py
- ``cfr/_rowwise.pyx`` (row-wise MLP): ``rowwise.rowwise_mlp_reference``;
  tests/cfr/test_rowwise_inference.py
- ``_rng.pxd`` (keyed streams): ``lostcities.rng.Stream`` (also used in production), draw
  by draw through every test above

The small games' kernels (``games/_kuhn.pyx``, ``games/_leduc.pyx``) are small enough to be
checked against exact answers instead: every history enumerated (tests/games/exact_tree.py),
known state counts, returns and game values (tests/games/test_kuhn.py, test_leduc.py).
Nothing in the package imports this one; only tests and benchmarks do.
"""
