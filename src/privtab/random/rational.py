"""Exact rational parameters.

Every sampler parameter (a scale, a variance, a probability, an exponent) is converted to a
:class:`fractions.Fraction` before use, so the distribution sampled is exactly the one the
parameter names:

* ``int`` and :class:`~fractions.Fraction` are taken as they are;
* a ``float`` (or numpy float) is its exact binary value — ``0.1`` is
  ``3602879701896397/36028797018963968``, which is the number the caller's float holds;
* a ``str`` is parsed exactly by :class:`~fractions.Fraction` (``"0.1"`` is ``1/10`` and
  ``"1/3"`` is one third): pass a string when a decimal value is meant literally;
* a :class:`decimal.Decimal` is its exact decimal value.

No rounding happens here. Where a *derived* quantity must be rounded (e.g. to bound a
denominator), :func:`round_rational` rounds in the direction the caller names and reports
whether it changed the value, so that rounding can always be steered towards more noise.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction
from typing import Literal, TypeAlias

import numpy as np

RationalLike: TypeAlias = int | float | Fraction | Decimal | str | np.integer | np.floating

__all__ = ["RationalLike", "as_rational", "round_rational"]


def as_rational(
    value: RationalLike,
    name: str = "value",
    *,
    positive: bool = False,
    nonnegative: bool = False,
    at_most: Fraction | int | None = None,
) -> Fraction:
    """Convert ``value`` to an exact :class:`~fractions.Fraction` and validate it.

    Raises :class:`ValueError` naming ``name`` when the value is not a finite real number,
    or violates ``positive`` / ``nonnegative`` / ``at_most``.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got the boolean {value!r}")
    try:
        if isinstance(value, Fraction):
            out = value
        elif isinstance(value, int | np.integer):
            out = Fraction(int(value))
        elif isinstance(value, float | np.floating):
            f = float(value)
            if not math.isfinite(f):
                raise ValueError(f"{name} must be finite, got {f!r}")
            out = Fraction(f)
        elif isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"{name} must be finite, got {value!r}")
            _check_size(Decimal(value), name)
            out = Fraction(value)
        elif isinstance(value, str):
            out = Fraction(_checked_text(value.strip(), name))
        elif isinstance(value, numbers.Rational):
            out = Fraction(int(value.numerator), int(value.denominator))
        else:
            raise TypeError
    except (TypeError, ZeroDivisionError) as exc:
        raise ValueError(f"{name} must be a finite real number, got {value!r}") from exc
    except ValueError as exc:
        if name in str(exc):
            raise
        raise ValueError(f"{name} must be a finite real number, got {value!r}") from exc
    if positive and out <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if nonnegative and out < 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    if at_most is not None and out > at_most:
        raise ValueError(f"{name} must be at most {at_most}, got {value!r}")
    return out


MAX_DIGITS = 1000
"""Decimal input (a string or :class:`~decimal.Decimal`) may have at most this many digits
and a decimal exponent within ±this: ``"1e999999999"`` would otherwise be turned into a
billion-digit integer (minutes of work and gigabytes before any check can refuse it)."""


def _check_size(d: Decimal, name: str) -> None:
    if d.is_finite() and (
        len(d.as_tuple().digits) > MAX_DIGITS or not -MAX_DIGITS <= d.adjusted() <= MAX_DIGITS
    ):
        raise ValueError(
            f"{name} must have at most {MAX_DIGITS} digits and a decimal exponent within "
            f"±{MAX_DIGITS}, got {_short(str(d))}"
        )


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}… ({len(text):,} characters)"


def _checked_text(text: str, name: str) -> str:
    """``text`` (a decimal or ``"p/q"``) once each part is of a size :class:`Fraction` can
    read quickly (see :data:`MAX_DIGITS`)."""
    from decimal import InvalidOperation

    for part in text.split("/", 1):
        try:
            d = Decimal(part.strip().replace("_", ""))
        except InvalidOperation:
            continue  # not a number: Fraction's own error names it
        if not d.is_finite():
            continue
        try:
            _check_size(d, name)
        except ValueError:
            raise ValueError(
                f"{name} must have at most {MAX_DIGITS} digits and a decimal exponent within "
                f"±{MAX_DIGITS}, got {_short(text)}"
            ) from None
    return text


def round_rational(
    value: Fraction, max_denominator: int, direction: Literal["up", "down"]
) -> tuple[Fraction, bool]:
    """Round ``value`` to a fraction with denominator ≤ ``max_denominator``.

    ``direction="up"`` returns the smallest such fraction ≥ ``value`` and ``"down"`` the
    largest ≤ ``value``. Returns ``(rounded, changed)``.
    """
    if max_denominator < 1:
        raise ValueError(f"max_denominator must be ≥ 1, got {max_denominator}")
    if value.denominator <= max_denominator:
        return value, False
    scaled = value * max_denominator
    num = math.ceil(scaled) if direction == "up" else math.floor(scaled)
    return Fraction(num, max_denominator), True
