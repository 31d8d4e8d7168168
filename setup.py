"""Build the Cython kernels. Everything else lives in pyproject.toml."""

from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# Every private kernel ``lostcities/**/_*.pyx`` is an extension module of the same dotted name.
KERNELS = sorted(
    str(path.with_suffix("")).replace("/", ".") for path in Path("lostcities").rglob("_*.pyx")
)

extensions = [
    Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[numpy.get_include()],
        # No FMA contraction of a * b + c: every kernel's float arithmetic then rounds
        # exactly like its Python/numpy twin, on any CPU.
        extra_compile_args=["-O3", "-ffp-contract=off"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in KERNELS
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    )
)
