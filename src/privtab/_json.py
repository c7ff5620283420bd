"""JSON-ready values: NaN → null, ±inf → "inf"/"-inf", numpy scalars and Fractions → numbers;
result objects as plain dicts (:func:`fields_dict`)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

__all__ = ["Record", "fields_dict", "jsonable"]


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


def fields_dict(obj: Any, *names: str, **extra: Any) -> dict[str, Any]:
    """A result object as a plain dict: the attributes ``names`` (default: the fields of the
    dataclass ``obj``, in declaration order), then ``extra``.

    Each value is made plain one level deep: an array (anything with ``tolist``) becomes a
    list, a tuple a list, an object with ``to_dict`` its dict, a dataclass its
    :func:`fields_dict`; anything else is kept as it is (no rounding, NaN kept). The one
    way the result types of privtab write their ``to_dict``.
    """
    keys = names or tuple(f.name for f in dataclasses.fields(obj))
    out = {k: _plain(getattr(obj, k)) for k in keys}
    out.update(extra)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields_dict(value)
    if hasattr(value, "tolist") and hasattr(value, "ndim") and value.ndim > 0:
        return value.tolist()
    return value


class Record:
    """Base of the dataclass result types whose JSON form is their fields: :meth:`to_dict`
    is :func:`fields_dict` of the object."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (arrays as lists; see :func:`fields_dict`)."""
        return fields_dict(self)
