"""``config.json`` of SafeTab-P: reading, validation and a typed model.

The file is read unchanged (the 2020 production file ``NMFv7-2020/config.json`` ships in
:mod:`privtab.data.resources`). Numbers are parsed as exact decimals, so budgets are exact
rationals: the US production budget sums to ρ = 4.944 exactly, not to a float near it.

Rules (each violation is a :class:`~privtab.data.errors.Problem` naming the key and value):

- every key of the production schema is present, no unknown key, no key twice;
- ``privacy_defn`` is ``zcdp`` (budgets are ρ, discrete Gaussian noise) or ``puredp``
  (budgets are ε, geometric noise);
- every budget is a number: 0 (the level is switched off, as the production AIANNH level 1)
  or within [:data:`MIN_BUDGET`, :data:`MAX_BUDGET`] = [10⁻¹², 10⁶] — see below; every run
  that is switched on has at least one positive budget (else there is nothing to release);
- ``privacy_budget_p_stage_1_fraction`` lies strictly between 0 and 1;
- ``thresholds_p`` has, for every (geography, iteration level) of each scope that is run,
  exactly three strictly increasing integers of magnitude at most 10¹² (stage 2: below the
  first → total only; then Sex × Age4, Sex × Age9, Sex × Age23) — the Census code accepted
  non-decreasing lists of three or more, but equal thresholds make a statistic level
  unreachable and extra ones are never used, so both are reported as errors here; noisy
  counts are integers, so a fractional threshold is a mistake;
- ``max_race_codes`` is an integer in 1..8, ``zero_suppression_chance`` 0 or in
  [10⁻⁴⁰, 1) — read exactly (``0.99999999999999999999`` is that decimal, not the float 1.0),
  its thresholds decided exactly;
- ``allow_negative_counts``, ``run_us``, ``run_pr`` are booleans and at least one run is on;
- ``state_filter_us`` is a non-empty list of distinct FIPS codes of the 50 states + DC;
- ``reader`` is ``cef`` or ``csv`` (kept for provenance: privtab reads files itself).

Numbers must be JSON numbers (not strings, not ``true``/``false``, not ``NaN`` or
``Infinity``); a value such as ``1e400`` is read exactly and refused by its range. A number
with more than 40 significant digits or a decimal exponent beyond ±1000 is refused as such
(``invalid_number``), before any arithmetic on it. The file itself must be a regular UTF-8
file of at most 1 MiB, nested at most 32 deep.

**Why budgets are bounded.** Every number privtab publishes about a release (noise scale,
exact 95 % margins of error, the privacy-loss analyses) is computed exactly or with
certified bounds, and each such computation must finish. A per-count parameter of
ρ = 10⁻³⁰ means σ ≈ 7·10¹⁴, and the exact tail sums of that discrete Gaussian do not
finish; a budget of 10³⁰ protects nothing (ε in the billions) and overflows the float
fields of ``release.json``. [10⁻¹², 10⁶] contains every budget that makes sense for
counts (the 2020 production budgets are 0.008 … 2.134; ρ = 10⁻¹² per level already means
noise of standard deviation ≈ 10⁶ per count) while keeping all computations bounded.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from privtab.data.errors import ProblemLog, checked
from privtab.data.json_config import (
    ABSENT,
    frac,
    is_number,
    parse_json_object,
    read_json_text,
    value_problem,
)
from privtab.data.levels import (
    ITERATION_LEVELS,
    PR_LEVELS,
    US_LEVELS,
    US_STATE_FIPS,
    GeoLevel,
    PopulationGroupLevel,
    Scope,
    levels_of,
)

PrivacyDefinition = Literal["zcdp", "puredp"]

STAGE_1_KEY = "privacy_budget_p_stage_1_fraction"
THRESHOLDS_KEY = "thresholds_p"
OPTIONAL_KEYS = ("zero_suppression_chance",)
MAX_RACE_CODES_LIMIT = 8
"""The person file has eight race columns QRACE1..QRACE8."""
MIN_BUDGET = Fraction(1, 10**12)
"""The smallest positive budget accepted (see the module docstring: bounded computation)."""
MAX_BUDGET = Fraction(10**6)
"""The largest budget accepted (see the module docstring)."""
MAX_THRESHOLD = 10**12
"""Thresholds are integers of magnitude at most this (counts of persons are < 10¹⁰)."""
MIN_ZERO_SUPPRESSION_CHANCE = Fraction(1, 10**40)
"""The smallest positive ``zero_suppression_chance``: with at most
:data:`MAX_NUMBER_DIGITS` digits, ``1 − chance`` is at least this too, and the exact
threshold decisions (certified arithmetic, :func:`privtab.tabulate.suppression.
exact_quantile`) are made for every chance in between."""


def budget_key(geo: GeoLevel, iteration_level: int) -> str:
    """The ``config.json`` key of a level's budget, e.g. ``privacy_budget_p_level_2_county``."""
    return f"privacy_budget_p_level_{iteration_level}_{geo.config_name}"


def threshold_key(geo: GeoLevel, iteration_level: int) -> str:
    """The ``thresholds_p`` key of a level, e.g. ``(COUNTY, 2)``."""
    return f"({geo.value}, {iteration_level})"


BUDGET_KEYS: dict[str, PopulationGroupLevel] = {
    budget_key(g, i): (g, i) for g in (*US_LEVELS, *PR_LEVELS) for i in ITERATION_LEVELS
}
REQUIRED_KEYS: tuple[str, ...] = (
    "max_race_codes",
    *BUDGET_KEYS,
    STAGE_1_KEY,
    THRESHOLDS_KEY,
    "allow_negative_counts",
    "run_us",
    "run_pr",
    "reader",
    "state_filter_us",
    "privacy_defn",
)
KNOWN_KEYS: frozenset[str] = frozenset((*REQUIRED_KEYS, *OPTIONAL_KEYS))


@dataclass(frozen=True)
class SafeTabConfig:
    """A validated SafeTab-P configuration.

    Budgets are per population-group level (geography level × iteration level 1|2), in the
    unit of ``privacy_defn`` (ρ for zCDP, ε for pure DP), as exact rationals. Thresholds are
    per level, three strictly increasing numbers.
    """

    privacy_defn: PrivacyDefinition
    budgets: Mapping[PopulationGroupLevel, Fraction]
    stage_1_fraction: Fraction
    thresholds: Mapping[PopulationGroupLevel, tuple[Fraction, Fraction, Fraction]]
    max_race_codes: int
    zero_suppression_chance: Fraction | None
    allow_negative_counts: bool
    run_us: bool
    run_pr: bool
    state_filter_us: tuple[str, ...]
    reader: str
    source: str
    """Where the config was read from (path or ``<dict>``)."""

    @property
    def scopes(self) -> tuple[Scope, ...]:
        """The runs switched on, in production order (US, then PR)."""
        return tuple(s for s, on in ((Scope.US, self.run_us), (Scope.PR, self.run_pr)) if on)

    def levels(self, scope: Scope) -> tuple[PopulationGroupLevel, ...]:
        """Population-group levels of a run: each geography level × iteration levels 1, 2."""
        return tuple((g, i) for g in levels_of(scope) for i in ITERATION_LEVELS)

    def budget(self, geo: GeoLevel, iteration_level: int) -> Fraction:
        return self.budgets[(geo, iteration_level)]

    def total_budget(self, scope: Scope) -> Fraction:
        """Sum of the budgets of a run's levels (ρ = 4.944 for the 2020 US production run)."""
        return sum((self.budgets[lv] for lv in self.levels(scope)), Fraction(0))

    def threshold(self, geo: GeoLevel, iteration_level: int) -> tuple[Fraction, ...]:
        return self.thresholds[(geo, iteration_level)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (budgets as floats and exact fractions as strings)."""
        return {
            "source": self.source,
            "privacy_defn": self.privacy_defn,
            "budgets": {
                f"{g.value},{i}": {"value": float(b), "exact": str(b)}
                for (g, i), b in self.budgets.items()
            },
            "stage_1_fraction": str(self.stage_1_fraction),
            "thresholds": {
                f"{g.value},{i}": [float(t) for t in ts] for (g, i), ts in self.thresholds.items()
            },
            "max_race_codes": self.max_race_codes,
            "zero_suppression_chance": (
                None
                if self.zero_suppression_chance is None
                else float(self.zero_suppression_chance)
            ),
            "zero_suppression_chance_exact": (
                None if self.zero_suppression_chance is None else str(self.zero_suppression_chance)
            ),
            "allow_negative_counts": self.allow_negative_counts,
            "run_us": self.run_us,
            "run_pr": self.run_pr,
            "state_filter_us": list(self.state_filter_us),
            "reader": self.reader,
        }


def read_config(path: str | Path) -> SafeTabConfig:
    """Read and validate ``config.json``; raise :class:`InputValidationError` on any problem."""
    return checked(lambda log: load_config(path, log))


def load_config(path: str | Path, log: ProblemLog) -> SafeTabConfig | None:
    """Read and validate ``config.json``, adding problems to ``log``.

    The file must be a regular UTF-8 file of at most 1 MiB (a byte-order mark is stripped
    with a warning: :func:`privtab.data.json_config.read_json_text`). Returns ``None`` if
    the file has any problem (they are all in ``log``).
    """
    text = read_json_text(path, log)
    return None if text is None else parse_config_text(text, source=str(path), log=log)


def parse_config_text(text: str, source: str, log: ProblemLog) -> SafeTabConfig | None:
    """Parse JSON text with exact decimals and duplicate-key detection, then validate.

    Numbers are read as exact decimals; one with more than 40 significant digits or a
    decimal exponent beyond ±1000 is kept as an unusable value and reported by the key that
    holds it (``invalid_number``), so that no computation on it can run away. Nesting
    deeper than 32 is refused (:func:`privtab.data.json_config.parse_json_object`).
    Returns ``None`` (problems in ``log``) if anything is wrong.
    """
    parsed = parse_json_object(text, source, log)
    if parsed is None:
        return None
    raw, clean = parsed
    cfg = parse_config(raw, source=source, log=log)
    return cfg if clean else None


def parse_config(
    raw: Mapping[str, Any], source: str = "<dict>", log: ProblemLog | None = None
) -> SafeTabConfig | None:
    """Validate a config mapping (values as produced by :func:`json.loads`).

    Returns the typed config, or ``None`` when problems were found (they are in ``log``;
    without a ``log`` an :class:`~privtab.data.errors.InputValidationError` is raised).
    """
    own = log is None
    log = ProblemLog() if log is None else log
    before = sum(log.counts.values())
    _Checker(raw, source, log).run()
    if sum(log.counts.values()) > before:
        if own:
            log.raise_if_any()
        return None
    thresholds = {
        lv: tuple(frac(x) for x in raw[THRESHOLDS_KEY][threshold_key(*lv)])
        for lv in BUDGET_KEYS.values()
        if threshold_key(*lv) in raw[THRESHOLDS_KEY]
    }
    zsc = raw.get("zero_suppression_chance")
    return SafeTabConfig(
        privacy_defn=raw["privacy_defn"],
        budgets={lv: frac(raw[k]) for k, lv in BUDGET_KEYS.items()},
        stage_1_fraction=frac(raw[STAGE_1_KEY]),
        thresholds=thresholds,  # type: ignore[arg-type]
        max_race_codes=int(raw["max_race_codes"]),
        zero_suppression_chance=None if zsc is None else frac(zsc),
        allow_negative_counts=bool(raw["allow_negative_counts"]),
        run_us=bool(raw["run_us"]),
        run_pr=bool(raw["run_pr"]),
        state_filter_us=tuple(raw["state_filter_us"]),
        reader=str(raw["reader"]),
        source=source,
    )


def check_run_flags(raw: Mapping[str, Any], bad: Callable[[str, str, Any, str], None]) -> None:
    """The run flags every product's config has (``allow_negative_counts``, ``run_us``,
    ``run_pr``): booleans, and not both runs off. Problems go to ``bad(kind, key, value,
    message)``."""
    for k in ("allow_negative_counts", "run_us", "run_pr"):
        v = raw.get(k, ABSENT)
        if v is not ABSENT and not isinstance(v, bool):
            bad("invalid_type", k, v, "must be true or false")
    if raw.get("run_us") is False and raw.get("run_pr") is False:
        bad("no_run", "run_us", False, "run_us and run_pr are both false")


def check_state_filter(raw: Mapping[str, Any], bad: Callable[[str, str, Any, str], None]) -> None:
    """``state_filter_us``: a list of distinct FIPS codes of the 50 states and DC, not
    empty for a US run. Problems go to ``bad(kind, key, value, message)``."""
    k = "state_filter_us"
    v = raw.get(k, ABSENT)
    if v is ABSENT:
        return
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        bad("invalid_type", k, v, "must be a list of 2-digit state FIPS strings")
        return
    if not v and raw.get("run_us") is True:
        bad("invalid_value", k, v, "must not be empty for a US run")
    seen: set[str] = set()
    for s in v:
        if s in seen:
            bad("duplicate_value", k, s, "state listed twice")
        seen.add(s)
        if s not in US_STATE_FIPS:
            bad("invalid_value", k, s, "not the FIPS code of one of the 50 states or DC")


class _Checker:
    def __init__(self, raw: Mapping[str, Any], source: str, log: ProblemLog) -> None:
        self.raw = raw
        self.source = source
        self.log = log

    def bad(self, kind: str, key: str, value: Any, message: str) -> None:
        self.log.add(value_problem(self.source, kind, key, value, message))

    def run(self) -> None:
        raw = self.raw
        for k in sorted(set(raw) - KNOWN_KEYS):
            self.bad("unknown_key", k, raw[k], "unknown config key (not part of SafeTab-P)")
        for k in REQUIRED_KEYS:
            if k not in raw:
                self.bad("missing_key", k, ABSENT, "required config key is missing")
        self._privacy_defn()
        self._budgets()
        self._stage_1()
        self._max_race_codes()
        self._zero_suppression()
        self._flags()
        self._state_filter()
        self._reader()
        self._thresholds()

    def _privacy_defn(self) -> None:
        v = self.raw.get("privacy_defn", ABSENT)
        if v is not ABSENT and v not in ("zcdp", "puredp"):
            self.bad("invalid_value", "privacy_defn", v, "must be 'zcdp' or 'puredp'")

    def _budgets(self) -> None:
        positive: dict[Scope, int] = {Scope.US: 0, Scope.PR: 0}
        for k, (geo, _) in BUDGET_KEYS.items():
            v = self.raw.get(k, ABSENT)
            if v is ABSENT:
                continue
            if not is_number(v):
                self.bad("invalid_type", k, v, "a budget must be a finite number (0 = level off)")
            elif v < 0:
                self.bad("negative_budget", k, v, "a budget must be non-negative (0 = level off)")
            elif v > 0 and not MIN_BUDGET <= frac(v) <= MAX_BUDGET:
                self.bad(
                    "out_of_range",
                    k,
                    v,
                    "a positive budget must lie in [1e-12, 1e6], so that every computation "
                    "on it is exact and finishes (use 0 to switch the level off)",
                )
            if is_number(v) and v > 0:
                positive[geo.scope] += 1
        for scope, flag in ((Scope.US, "run_us"), (Scope.PR, "run_pr")):
            keys = [k for k, (g, _) in BUDGET_KEYS.items() if g.scope is scope]
            if (
                self.raw.get(flag) is True
                and positive[scope] == 0
                and all(k in self.raw for k in keys)
            ):
                self.bad(
                    "no_budget",
                    flag,
                    True,
                    f"every budget of the {scope.value} run is 0 or invalid: nothing to "
                    f"release (give a level a positive budget, or set {flag} to false)",
                )

    def _stage_1(self) -> None:
        v = self.raw.get(STAGE_1_KEY, ABSENT)
        if v is ABSENT:
            return
        if not is_number(v):
            self.bad("invalid_type", STAGE_1_KEY, v, "must be a number")
        elif not 0 < v < 1:
            self.bad("out_of_range", STAGE_1_KEY, v, "must lie strictly between 0 and 1")

    def _max_race_codes(self) -> None:
        v = self.raw.get("max_race_codes", ABSENT)
        if v is ABSENT:
            return
        if isinstance(v, bool) or not isinstance(v, int):
            self.bad("invalid_type", "max_race_codes", v, "must be an integer")
        elif not 1 <= v <= MAX_RACE_CODES_LIMIT:
            self.bad(
                "out_of_range",
                "max_race_codes",
                v,
                f"must be between 1 and {MAX_RACE_CODES_LIMIT} (columns QRACE1..QRACE8)",
            )

    def _zero_suppression(self) -> None:
        v = self.raw.get("zero_suppression_chance", ABSENT)
        if v is ABSENT:
            return
        if not is_number(v):
            self.bad("invalid_type", "zero_suppression_chance", v, "must be a number")
        elif not 0 <= v < 1:
            self.bad("out_of_range", "zero_suppression_chance", v, "must lie in [0, 1)")
        elif 0 < v < MIN_ZERO_SUPPRESSION_CHANCE:
            self.bad(
                "out_of_range",
                "zero_suppression_chance",
                v,
                "a positive chance must be at least 1e-40 (its threshold is decided exactly; "
                "use 0 to switch zero suppression off)",
            )

    def _flags(self) -> None:
        check_run_flags(self.raw, self.bad)

    def _state_filter(self) -> None:
        check_state_filter(self.raw, self.bad)

    def _reader(self) -> None:
        v = self.raw.get("reader", ABSENT)
        if v is not ABSENT and v not in ("cef", "csv"):
            self.bad("invalid_value", "reader", v, "must be 'cef' or 'csv'")

    def _thresholds(self) -> None:
        v = self.raw.get(THRESHOLDS_KEY, ABSENT)
        if v is ABSENT:
            return
        if not isinstance(v, dict):
            self.bad("invalid_type", THRESHOLDS_KEY, v, "must be an object")
            return
        known = {threshold_key(*lv) for lv in BUDGET_KEYS.values()}
        for k in sorted(set(v) - known):
            self.bad(
                "unknown_key",
                f"{THRESHOLDS_KEY}.{k}",
                v[k],
                "unknown thresholds key (expected '(GEO, level)')",
            )
        scopes = [s for s, f in ((Scope.US, "run_us"), (Scope.PR, "run_pr")) if self.raw.get(f)]
        required = {threshold_key(g, i) for s in scopes for g in levels_of(s) for i in (1, 2)}
        for k in sorted(required - set(v)):
            self.bad(
                "missing_key", f"{THRESHOLDS_KEY}.{k}", ABSENT, "thresholds of a level are missing"
            )
        for k in sorted(set(v) & known):
            ts = v[k]
            col = f"{THRESHOLDS_KEY}.{k}"
            if not isinstance(ts, list) or not all(is_number(t) for t in ts):
                self.bad("invalid_type", col, ts, "must be a list of three integers")
            elif not all(frac(t).denominator == 1 for t in ts):
                self.bad(
                    "invalid_type", col, ts, "thresholds must be integers (counts are integers)"
                )
            elif not all(abs(frac(t)) <= MAX_THRESHOLD for t in ts):
                self.bad("out_of_range", col, ts, "thresholds must lie in [-1e12, 1e12]")
            elif len(ts) != 3:
                self.bad(
                    "thresholds_count",
                    col,
                    ts,
                    f"exactly three thresholds are needed, got {len(ts)}",
                )
            elif not all(a < b for a, b in itertools.pairwise(ts)):
                self.bad(
                    "thresholds_not_increasing", col, ts, "thresholds must be strictly increasing"
                )


__all__ = [
    "BUDGET_KEYS",
    "KNOWN_KEYS",
    "MAX_BUDGET",
    "MAX_THRESHOLD",
    "MIN_BUDGET",
    "REQUIRED_KEYS",
    "PrivacyDefinition",
    "SafeTabConfig",
    "budget_key",
    "load_config",
    "parse_config",
    "parse_config_text",
    "read_config",
    "threshold_key",
]
