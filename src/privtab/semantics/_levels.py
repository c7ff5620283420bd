"""Validation and shaping of significance levels and other probability inputs."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from privtab.semantics._numeric import FloatArray

__all__ = ["as_probability", "shape_out"]


def as_probability(name: str, value: ArrayLike) -> FloatArray:
    """``value`` as a float array of probabilities; ``ValueError`` naming ``name`` if not."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a number or an array of numbers, got {value!r}") from exc
    if np.any(np.isnan(arr)) or np.any(arr < 0.0) or np.any(arr > 1.0):
        bad = arr[np.isnan(arr) | (arr < 0.0) | (arr > 1.0)].ravel()[0]
        raise ValueError(f"{name} must lie in [0, 1], got {float(bad)!r}")
    return arr


def shape_out(result: FloatArray, *inputs: ArrayLike) -> float | FloatArray:
    """A Python float when every input was a scalar, else the array."""
    if all(np.ndim(i) == 0 for i in inputs):
        return float(np.asarray(result).reshape(()))
    return np.asarray(result, dtype=np.float64)
