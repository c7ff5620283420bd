"""JSON-ready values: NaN → null, ±inf → "inf"/"-inf", numpy scalars and Fractions → numbers."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

__all__ = ["jsonable"]


def jsonable(obj: Any) -> Any:
    """``obj`` with every value JSON can hold exactly (recursively through dicts and lists)."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Fraction):
        return float(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return jsonable(obj.item())
    return obj
