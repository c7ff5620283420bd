"""``privtab._json.fields_dict``: the one way result objects write their ``to_dict``.

Tested on purpose as a private helper: every result type's JSON form depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

# private on purpose: fields_dict is the shared helper behind every result's to_dict
from privtab._json import Record, fields_dict


@dataclass(frozen=True)
class _Inner:
    a: int
    b: int

    @property
    def total(self) -> int:
        return self.a + self.b


@dataclass(frozen=True)
class _Guarantee:
    value: float

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "g", "value": self.value}


@dataclass(frozen=True)
class _Result:
    values: NDArray[np.float64]
    alphas: tuple[float, ...]
    inner: _Inner
    guarantee: _Guarantee
    scalar: float
    label: str | None = None


def _result() -> _Result:
    return _Result(np.array([1.5, 2.0]), (0.1, 0.2), _Inner(1, 2), _Guarantee(0.5), float("nan"))


def test_fields_in_order_made_plain() -> None:
    d = fields_dict(_result())
    assert list(d) == ["values", "alphas", "inner", "guarantee", "scalar", "label"]
    assert d["values"] == [1.5, 2.0]
    assert isinstance(d["values"], list)
    assert d["alphas"] == [0.1, 0.2]
    assert isinstance(d["alphas"], list)
    assert d["inner"] == {"a": 1, "b": 2}
    assert d["guarantee"] == {"kind": "g", "value": 0.5}
    assert np.isnan(d["scalar"])  # kept as it is: no JSON mapping here
    assert d["label"] is None


def test_names_choose_and_order_extra_appends_or_overrides_in_place() -> None:
    r = _result()
    d = fields_dict(r, "label", "scalar", extra=1)
    assert list(d) == ["label", "scalar", "extra"]
    d = fields_dict(r, inner=fields_dict(r.inner, "a", "b", "total"), passed=True)
    assert list(d) == ["values", "alphas", "inner", "guarantee", "scalar", "label", "passed"]
    assert d["inner"] == {"a": 1, "b": 2, "total": 3}


def test_zero_dimensional_array_kept() -> None:
    @dataclass
    class _Z:
        x: Any

    z = np.float64(2.5)
    assert fields_dict(_Z(z))["x"] is z


def test_record_to_dict_is_fields_dict() -> None:
    @dataclass(frozen=True)
    class _R(Record):
        lower: NDArray[np.float64]
        level: float

    assert _R(np.array([0.5]), 0.9).to_dict() == {"lower": [0.5], "level": 0.9}
