"""Vectorised, certified floating-point comparisons (the fast paths of the samplers).

Each kernel takes 63-bit prefixes ``v`` of independent uniforms ``V ∈ [v·2⁻⁶³, (v+1)·2⁻⁶³)``
and decides a comparison for every element *for all V in that interval*, using float64
arithmetic with a rigorous error bound. Elements the bound cannot decide are flagged
"ambiguous" and finished exactly by :mod:`privtab.random.exact`.

Error model (the only assumption about the platform)
----------------------------------------------------
numpy's float64 ``log`` is accurate to within ``2⁻⁴⁰`` absolute on ``[1, 2⁶³]`` (where its
values lie in ``[0, 43.7]``). Real implementations are within a few units in the last
place (``2⁻⁴⁷`` there), i.e. the assumption has a safety factor of more than 100;
:func:`check_float_log` verifies it against mpmath on this machine before the first sample
is drawn and refuses to sample if it fails. Every other operation is a correctly rounded
IEEE-754 operation (relative error ``≤ 2⁻⁵³``). The bounds below add each source of error
and then round the total up generously; the derivations are in ``docs/random.md``.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CHUNK",
    "LN2_63",
    "accept_exp_neg",
    "check_float_log",
    "floor_scaled_neglog",
    "prefixes63",
]

#: Elements processed per vectorised step (keeps temporaries in cache).
CHUNK = 1 << 16
#: 63·ln 2 rounded to float64 (error < 2⁻⁴⁸).
LN2_63 = 63.0 * math.log(2.0)
_LOG_ABS_ERROR = 2.0**-40  # the assumed bound on numpy's log error (see module doc)
_SLACK_ABS = 2.0**-38  # ≥ 4 × (log error + constant rounding): absolute slack
_SLACK_REL = 2.0**-50  # ≥ 4 × relative rounding of the final products

_checked = False
_check_lock = threading.Lock()


def check_float_log() -> None:
    """Verify the error model on this machine (once per process).

    Evaluates numpy's vectorised ``log`` at ~1000 points spread over ``[1, 2⁶³]`` (every
    binade, including the ends) and compares with mpmath at 100 bits. Raises
    :class:`RuntimeError` if any error exceeds ``2⁻⁴⁴`` (16 times below the assumed bound,
    so a marginal platform is refused rather than trusted).
    """
    global _checked
    if _checked:
        return
    with _check_lock:
        if _checked:
            return
        from mpmath import log as mlog
        from mpmath import mp, mpf

        fracs = np.array([0.0, 1 / 3, 0.5, 0.7071067811865476, 0.999999999, 0.123456789])
        pts = [1.0, 2.0**63 - 1024.0, 2.0**63]
        for k in range(63):
            pts.extend(float(2.0**k * (1.0 + f)) for f in fracs)
            pts.append(float(2.0**k * 1.6180339887498949))
            pts.extend(float(2.0**k * (1.0 + j / 16.0)) for j in range(1, 16, 5))
        x = np.array([p for p in pts if 1.0 <= p <= 2.0**63], dtype=np.float64)
        x = np.concatenate([x, np.flip(x)])  # both orders, long enough for SIMD paths
        got = np.log(x)
        with mp.workprec(100):
            worst = max(
                abs(mlog(mpf(float(a))) - mpf(float(b))) for a, b in zip(x, got, strict=True)
            )
        if worst > 2.0**-44:
            raise RuntimeError(
                f"numpy's float64 log is off by {float(worst):.3g} on this platform; "
                "privtab's certified sampling assumes < 2^-40 and refuses to sample"
            )
        _checked = True


def prefixes63(words: NDArray[np.uint64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Split 64-bit words into 63-bit prefixes ``v`` (int64) and their float64 values."""
    v = (words >> np.uint64(1)).view(np.int64)
    return v, v.astype(np.float64)


def floor_scaled_neglog(
    vf: NDArray[np.float64], s: float, offset: float
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """``⌊y(V)⌋`` for ``y(V) = s·(κ − ln V)`` and every ``V`` in each element's interval.

    ``offset`` is ``63·ln 2 + κ`` rounded to float64 (|error| ≤ 2⁻⁴⁶, κ ∈ [0, ln 2]) and ``s``
    the positive scale rounded to float64. Returns the floors (float64, exact integers)
    and a mask of ambiguous elements whose floor must be resolved exactly.

    Bound: with ``L = log(v)`` (error ≤ 2⁻⁴⁰ + 2⁻⁵³ from rounding ``v``), ``D = offset − L``
    (error ≤ 2⁻⁴⁰ + 2⁻⁴⁶ + D·2⁻⁵³), ``y = s·D`` (relative ≤ 2⁻⁵²) and the spread of
    ``y`` over the interval ``t·ln(1 + 1/v) ≤ s/v``:
    ``|y_float − y(V)| ≤ s·(2⁻³⁹ + 1/v) + y·2⁻⁵²``; we use ``s·(2⁻³⁸ + 1.001/v) + y·2⁻⁵⁰``,
    which also covers the rounding of ``y ± err``. ``v = 0`` gives ``inf``/``nan``, which is
    flagged ambiguous.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(vf)
        np.subtract(offset, y, out=y)
        y *= s
        err = np.divide(1.001 * s, vf)
        err += s * _SLACK_ABS
        err += y * _SLACK_REL
        lo = np.subtract(y, err)
        np.floor(lo, out=lo)
        y += err
        np.floor(y, out=y)
        amb = lo != y
    return lo, amb


def accept_exp_neg(
    vf: NDArray[np.float64], q: NDArray[np.float64], q_err: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Decide ``V < e^{−q}`` for every ``V`` in each element's interval.

    ``q`` is a float approximation of the exact exponent with ``|q − q_exact| ≤ q_err``.
    Returns ``(accept, ambiguous)``; elements neither accepted nor ambiguous are rejected.

    With ``w = 63·ln 2 − log(v)`` (≈ −ln V): ``|w − (−ln V)| ≤ 2⁻³⁹ + w·2⁻⁵² + 1/v`` over the
    interval, and the decision ``w − q ≷ 0`` is certain when ``|w − q|`` exceeds the sum
    of both errors (plus the rounding of the subtraction, ≤ (w + q)·2⁻⁵²).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.log(vf)
        np.subtract(LN2_63, w, out=w)
        err = np.divide(1.001, vf)
        err += _SLACK_ABS
        err += w * _SLACK_REL
        err += q_err
        err += q * _SLACK_REL
        w -= q
        accept = w > err
        np.negative(err, out=err)
        amb = w >= err
        amb &= ~accept
    return accept, amb
