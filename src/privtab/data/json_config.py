"""Reading a product's ``config.json`` safely: the file, its JSON and its numbers.

Every product's configuration (SafeTab-P's ``NMFv7-2020/config.json``, SafeTab-H's
``NMFv5``) is a small JSON object written by an operator. Before any product rule is checked,
the file itself must be readable without running away:

- a **regular file** (not a FIFO, a device such as ``/dev/zero`` or a folder) of at most
  :data:`MAX_CONFIG_BYTES` bytes, in **UTF-8** (an undecodable byte is reported by line and
  column; a byte-order mark is stripped with a warning);
- JSON nested at most :data:`MAX_JSON_DEPTH` deep (checked in linear time before
  :func:`json.loads`, whose recursion would otherwise fail), with **no key twice**;
- **numbers read exactly** (decimals as :class:`~decimal.Decimal`, so budgets are exact
  rationals), and a number with more than :data:`MAX_NUMBER_DIGITS` significant digits or a
  decimal exponent beyond ±:data:`MAX_NUMBER_EXPONENT` kept as an :class:`Unusable` value
  that the product's checker reports by the key that holds it (``invalid_number``) before
  any arithmetic on it — ``Fraction("1e999999999")`` would never finish.

Every problem is a located :class:`~privtab.data.errors.Problem` (file, key, value) in the
caller's :class:`~privtab.data.errors.ProblemLog`; nothing here names a product.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from privtab.data._tables import check_regular_file, decode_utf8
from privtab.data.errors import Problem, ProblemLog, warn_input

MAX_CONFIG_BYTES = 1 << 20
"""The largest ``config.json`` read (1 MiB; the production file has 2.5 kB)."""
MAX_JSON_DEPTH = 32
"""The deepest nesting of arrays and objects accepted (the schema has 3 levels)."""
MAX_NUMBER_DIGITS = 40
"""Numbers in ``config.json`` have at most this many significant digits …"""
MAX_NUMBER_EXPONENT = 1000
"""… and a decimal exponent within ±this: exact arithmetic on every accepted number ends
quickly (``1e-999999999`` as a Fraction would need a billion-digit denominator)."""


def read_json_text(path: str | Path, log: ProblemLog) -> str | None:
    """The text of config file ``path``: a regular file of at most
    :data:`MAX_CONFIG_BYTES` bytes, in UTF-8 (a byte-order mark is stripped with a
    warning). ``None`` if it cannot be read (the problem is in ``log``)."""
    path = Path(path)
    if not check_regular_file(path, log, MAX_CONFIG_BYTES):
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        log.add(Problem(str(path), "unreadable", f"cannot read the file: {exc.strerror}"))
        return None
    text = decode_utf8(str(path), raw, log)
    if text is None:
        return None
    if text.startswith("\ufeff"):
        warn_input(str(path), "UTF-8 byte-order mark at the start of the file ignored")
        text = text[1:]
    return text


def parse_json_object(
    text: str, source: str, log: ProblemLog
) -> tuple[dict[str, Any], bool] | None:
    """JSON ``text`` as an object with exact numbers (module docstring), and whether it is
    clean — ``False`` when a key appears twice (each reported in ``log``; the object is
    still returned so that its values can be checked too). ``None`` when the text is not
    a JSON object or nests too deep (the problem is in ``log``)."""
    dup: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                dup.append(k)
            out[k] = v
        return out

    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        log.add(
            Problem(
                source,
                "invalid_json",
                f"the JSON nests arrays and objects {depth} deep, more than the "
                f"{MAX_JSON_DEPTH} levels a config may have (it has at most 3)",
            )
        )
        return None
    try:
        raw = json.loads(
            text, parse_float=_parse_float, parse_int=_parse_int, object_pairs_hook=pairs
        )
    except json.JSONDecodeError as exc:
        log.add(
            Problem(
                source,
                "invalid_json",
                f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                row=None,
            )
        )
        return None
    for k in dup:
        log.add(Problem(source, "duplicate_key", "key appears more than once", column=k))
    if not isinstance(raw, dict):
        log.add(Problem(source, "invalid_json", "the config must be a JSON object"))
        return None
    return raw, not dup


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text`` (brackets inside strings are
    not counted). Linear time, no recursion: checked before :func:`json.loads`, whose
    recursion on deep input would otherwise fail."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


@dataclass(frozen=True)
class Unusable:
    """A JSON number too long or too large to compute with (see :func:`parse_json_object`)."""

    text: str

    def __str__(self) -> str:
        if len(self.text) <= 40:
            return self.text
        return f"{self.text[:20]}…{self.text[-8:]} ({len(self.text):,} characters)"


def _parse_int(text: str) -> int | Unusable:
    return Unusable(text) if len(text.lstrip("-")) > MAX_NUMBER_DIGITS else int(text)


def _parse_float(text: str) -> Decimal | Unusable:
    value = Decimal(text)
    if len(value.as_tuple().digits) > MAX_NUMBER_DIGITS or not (
        -MAX_NUMBER_EXPONENT <= value.adjusted() <= MAX_NUMBER_EXPONENT
    ):
        return Unusable(text)
    return value


def is_number(x: Any) -> bool:
    """A finite number that exact arithmetic can use (see :func:`unusable`)."""
    if isinstance(x, bool) or unusable(x):
        return False
    if isinstance(x, int):
        return True
    if isinstance(x, Decimal):
        return x.is_finite()
    return isinstance(x, float) and math.isfinite(x)


def unusable(x: Any) -> bool:
    """A number too long or too large to compute with exactly: more than
    :data:`MAX_NUMBER_DIGITS` digits or an exponent beyond ±:data:`MAX_NUMBER_EXPONENT`
    (also a list that holds one)."""
    if isinstance(x, Unusable):
        return True
    if isinstance(x, list):
        return any(unusable(v) for v in x)
    if isinstance(x, int) and not isinstance(x, bool):
        return bool(abs(x) >= 10**MAX_NUMBER_DIGITS)
    if isinstance(x, Decimal) and x.is_finite():
        return len(x.as_tuple().digits) > MAX_NUMBER_DIGITS or not (
            -MAX_NUMBER_EXPONENT <= x.adjusted() <= MAX_NUMBER_EXPONENT
        )
    return False


def frac(x: Any) -> Fraction:
    if isinstance(x, float):
        return Fraction(repr(x))  # the decimal the user wrote, not the binary float
    return Fraction(x)


SHOWN = 200
"""Characters of a value shown in a message (the rest is elided, its length stated)."""


def show(x: Any) -> str:
    """A value as the user wrote it, at most about :data:`SHOWN` characters."""
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= 10**MAX_NUMBER_DIGITS:
        text = f"an integer of about {int(x.bit_length() * math.log10(2)) + 1:,} digits"
    elif isinstance(x, Decimal | str | Unusable):
        text = str(x)
    elif isinstance(x, list):
        text = "[" + ", ".join(show(v) for v in x[:50]) + (", …]" if len(x) > 50 else "]")
    else:
        try:
            text = json.dumps(x, default=str)
        except (TypeError, ValueError):
            text = repr(x)
    if len(text) > SHOWN:
        return f"{text[: SHOWN - 40]}… ({len(text):,} characters)"
    return text


def value_problem(source: str, kind: str, key: str, value: Any, message: str) -> Problem:
    """The problem of config value ``value`` at ``key`` (``value`` :data:`ABSENT`: a
    missing key). A value of the wrong type that is an :func:`unusable` number is
    reported as ``invalid_number`` with the limits, whatever the key expected."""
    shown = None if value is ABSENT else show(value)
    if kind == "invalid_type" and unusable(value):
        kind = "invalid_number"
        message = (
            f"a number here may have at most {MAX_NUMBER_DIGITS} significant digits and a "
            f"decimal exponent within ±{MAX_NUMBER_EXPONENT} (exact arithmetic on it "
            "must finish)"
        )
    return Problem(source, kind, message, column=key, value=shown)


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()
"""A key that is not in the config (distinct from every JSON value, ``null`` included)."""


__all__ = [
    "ABSENT",
    "MAX_CONFIG_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_NUMBER_DIGITS",
    "MAX_NUMBER_EXPONENT",
    "Unusable",
    "frac",
    "is_number",
    "json_depth",
    "parse_json_object",
    "read_json_text",
    "show",
    "unusable",
    "value_problem",
]
