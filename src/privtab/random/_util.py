"""Small helpers shared by the samplers: sizes and chunked filling."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from privtab.random._kernels import CHUNK, check_float_log
from privtab.random.sources import RandomSource, resolve_source

__all__ = ["Size", "exact_int64", "fill_chunks", "shape_of"]

Size = int | tuple[int, ...]
_T = TypeVar("_T", bound=np.generic)


def shape_of(size: Size) -> tuple[tuple[int, ...], int]:
    """Validate ``size`` (an int or a tuple of ints) → ``(shape, number of elements)``."""
    dims = (size,) if not isinstance(size, tuple) else size
    shape: list[int] = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or int(d) < 0:
            raise ValueError(f"size must be a non-negative int or a tuple of them, got {size!r}")
        shape.append(int(d))
    return tuple(shape), math.prod(shape)


def fill_chunks(n: int, dtype: type[_T], fill: Callable[[NDArray[_T]], None]) -> NDArray[_T]:
    """Allocate ``n`` elements and fill them ``CHUNK`` at a time with ``fill(view)``."""
    out: NDArray[_T] = np.empty(n, dtype=dtype)
    for start in range(0, n, CHUNK):
        fill(out[start : start + CHUNK])
    return out


def exact_int64(
    size: Size,
    source: RandomSource | None,
    fill: Callable[[NDArray[np.int64], RandomSource], None],
) -> NDArray[np.int64]:
    """An ``int64`` array of shape ``size`` filled chunk by chunk by ``fill(block, src)``,
    drawing from ``source`` (the secure default when ``None``) once the float ``log`` the
    exact kernels rely on is checked: the one driver of the integer noise samplers."""
    shape, count = shape_of(size)
    src = resolve_source(source)
    check_float_log()
    return fill_chunks(count, np.int64, lambda block: fill(block, src)).reshape(shape)
