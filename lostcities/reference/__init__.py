"""Pure-Python reference twins of the Cython kernels, used by tests and benchmarks only."""
