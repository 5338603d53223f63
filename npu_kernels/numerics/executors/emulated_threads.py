"""How the emulated executor uses threads: row-parallel kernels and flash attention's cascade stages run on
up to `threads` Python threads (numpy releases the GIL in its loops; a split never changes a bit), and the
small attention matmuls run with a single-threaded BLAS in each of them.
"""

from __future__ import annotations

import ctypes
import glob
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator

import numpy as np

PARALLEL_MIN_ELEMENTS = 1 << 18  # below this, threads cost more than they save


def _openblas_local_threads():
    """numpy's OpenBLAS `openblas_set_num_threads_local` (a per-thread setting), or None when absent."""
    here = os.path.dirname(np.__file__)
    for lib in glob.glob(os.path.join(here, os.pardir, "numpy.libs", "*openblas*")):
        try:
            fn = ctypes.CDLL(lib).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


_SET_LOCAL_THREADS = _openblas_local_threads()


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run this thread's BLAS calls single-threaded (no effect on other threads).

    The attention matmuls are small (64-wide); OpenBLAS's own threads only add wake-up stalls there, and
    stall badly when the cores are shared. The executor parallelises over cascade stages instead.
    """
    if _SET_LOCAL_THREADS is None:
        yield
        return
    old = _SET_LOCAL_THREADS(1)
    try:
        yield
    finally:
        _SET_LOCAL_THREADS(old)


def default_threads() -> int:
    """The emulated executor's default thread count: 2, or fewer CPUs."""
    return max(1, min(2, os.cpu_count() or 1))


def run_parallel(jobs: list, threads: int) -> None:
    """Run independent jobs (numpy releases the GIL in its loops) on up to `threads` threads."""
    if threads <= 1 or len(jobs) <= 1:
        for job in jobs:
            job()
        return
    # pair heavy with light jobs: causal stages shrink with their first key, so deal them out 0, n-1, 1, ...
    order = [jobs[i // 2] if i % 2 == 0 else jobs[-(i // 2) - 1] for i in range(len(jobs))]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for f in [pool.submit(job) for job in order]:
            f.result()
