"""Small helpers shared by the samplers: sizes and chunked filling."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from privtab.random._kernels import CHUNK

__all__ = ["Size", "fill_chunks", "shape_of"]

Size = int | tuple[int, ...]


def shape_of(size: Size) -> tuple[tuple[int, ...], int]:
    """Validate ``size`` (an int or a tuple of ints) → ``(shape, number of elements)``."""
    dims = (size,) if not isinstance(size, tuple) else size
    shape: list[int] = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or int(d) < 0:
            raise ValueError(f"size must be a non-negative int or a tuple of them, got {size!r}")
        shape.append(int(d))
    return tuple(shape), math.prod(shape)


def fill_chunks(
    n: int, dtype: type[np.generic], fill: Callable[[NDArray[np.generic]], None]
) -> NDArray[np.generic]:
    """Allocate ``n`` elements and fill them ``CHUNK`` at a time with ``fill(view)``."""
    out = np.empty(n, dtype=dtype)
    for start in range(0, n, CHUNK):
        fill(out[start : start + CHUNK])
    return out
