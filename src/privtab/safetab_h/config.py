"""``config.json`` of SafeTab-H: reading, validation and a typed model.

The file is the production one, read unchanged (``configs/safetab-h/NMFv5/config.json`` of
``DAS_2020_DDHCB_Production_Code`` ships in :mod:`privtab.data.resources`:
:func:`~privtab.data.resources.production_config_dir_h`). Numbers are parsed as exact
decimals, so budgets are exact rationals: the US budgets sum to ρ = 8.895302 exactly.

Keys (production's ``CONFIG_PARAMS_H``): ``privacy_budget_h_t3_level_{1,2}_<geo>`` and
``privacy_budget_h_t4_level_{1,2}_<geo>`` for the six US geographies (usa, state, county,
tract, place, aiannh) and the four PR ones (pr_state, pr_county, pr_tract, pr_place);
``thresholds_h_t3`` and ``thresholds_h_t4`` (per ``"(GEO, level)"``), ``max_race_codes``,
``allow_negative_counts``, ``run_us``, ``run_pr``, ``reader``, ``state_filter_us``,
``privacy_defn``. Rules (each violation a :class:`~privtab.data.errors.Problem` naming the
key and value):

- the file read as every product's config is (:mod:`privtab.data.json_config`: a regular
  UTF-8 file of at most 1 MiB, nested at most 32 deep, numbers exact with at most 40
  significant digits and an exponent within ±1000 — else ``invalid_number``);
- every key present, no unknown key, no key twice;
- ``privacy_defn`` ``zcdp`` (budgets are ρ, discrete Gaussian noise) or ``puredp`` (ε,
  geometric noise);
- every budget a number: 0 (the query is not made, as production's AIANNH level 1) or in
  [10⁻¹², 10⁶] (:data:`privtab.data.config.MIN_BUDGET` … ``MAX_BUDGET``: every number
  privtab states about a release is then computed exactly and in bounded time); every run
  that is switched on has a positive budget (production: at least one over the file);
- ``thresholds_h_t3``: for every (geography, level) of the runs switched on, at least three
  non-decreasing integers (production's rule; only the first three are read — equal ones
  make a table unreachable, as in production); ``thresholds_h_t4``: exactly one integer;
  no unknown ``(GEO, level)`` key; magnitudes at most 10¹²;
- ``max_race_codes`` an integer in 1..8; ``allow_negative_counts``, ``run_us``, ``run_pr``
  booleans, at least one run on; ``state_filter_us`` a list of distinct FIPS codes of the
  50 states + DC, not empty for a US run; ``reader`` ``cef`` or ``csv`` (provenance only).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from privtab.data.config import (
    MAX_BUDGET,
    MAX_THRESHOLD,
    MIN_BUDGET,
    PrivacyDefinition,
    check_run_flags,
    check_state_filter,
)
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
    PR_STATE_FIPS,
    US_LEVELS,
    GeoLevel,
    PopulationGroupLevel,
    Scope,
    levels_of,
)

__all__ = [
    "BUDGET_KEYS",
    "REQUIRED_KEYS",
    "TABLES",
    "HConfig",
    "Table",
    "budget_key",
    "load_config",
    "parse_config",
    "read_config",
]

Table = Literal["t3", "t4"]
TABLES: tuple[Table, ...] = ("t3", "t4")
QueryKey = tuple[Table, GeoLevel, int]
"""(table, geography level, iteration level): one production query."""
THRESHOLD_KEYS = {"t3": "thresholds_h_t3", "t4": "thresholds_h_t4"}


def budget_key(table: Table, geo: GeoLevel, iteration_level: int) -> str:
    """``privacy_budget_h_t3_level_2_county`` …"""
    return f"privacy_budget_h_{table}_level_{iteration_level}_{geo.config_name}"


def threshold_key(geo: GeoLevel, iteration_level: int) -> str:
    return f"({geo.value}, {iteration_level})"


BUDGET_KEYS: dict[str, QueryKey] = {
    budget_key(t, g, i): (t, g, i)
    for t in TABLES
    for g in (*US_LEVELS, *PR_LEVELS)
    for i in ITERATION_LEVELS
}
REQUIRED_KEYS: tuple[str, ...] = (
    "max_race_codes",
    *BUDGET_KEYS,
    *THRESHOLD_KEYS.values(),
    "allow_negative_counts",
    "run_us",
    "run_pr",
    "reader",
    "state_filter_us",
    "privacy_defn",
)


@dataclass(frozen=True)
class HConfig:
    """A validated SafeTab-H configuration (budgets exact, in the unit of
    ``privacy_defn``: ρ under zCDP, ε under pure DP)."""

    privacy_defn: PrivacyDefinition
    budgets: Mapping[QueryKey, Fraction]
    thresholds_t3: Mapping[PopulationGroupLevel, tuple[int, int, int]]
    thresholds_t4: Mapping[PopulationGroupLevel, int]
    max_race_codes: int
    allow_negative_counts: bool
    run_us: bool
    run_pr: bool
    state_filter_us: tuple[str, ...]
    reader: str
    source: str

    @property
    def scopes(self) -> tuple[Scope, ...]:
        """The runs switched on, in production order (US, then PR)."""
        return tuple(s for s, on in ((Scope.US, self.run_us), (Scope.PR, self.run_pr)) if on)

    def levels(self, scope: Scope) -> tuple[PopulationGroupLevel, ...]:
        """Each geography level of a run × iteration levels 1, 2 (production's order)."""
        return tuple((g, i) for g in levels_of(scope) for i in ITERATION_LEVELS)

    def budget(self, table: Table, geo: GeoLevel, iteration_level: int) -> Fraction:
        return self.budgets[(table, geo, iteration_level)]

    def total_budget(self, scope: Scope) -> Fraction:
        """Σ of a run's budgets: ρ = 8.895302 (US), 4.754134 (PR) for NMFv5."""
        return sum(
            (self.budgets[(t, g, i)] for t in TABLES for g, i in self.levels(scope)), Fraction(0)
        )

    def run_states(self, scope: Scope) -> tuple[str, ...]:
        """The states of a run: ``state_filter_us`` (US) or ``72`` (PR)."""
        return self.state_filter_us if scope is Scope.US else (PR_STATE_FIPS,)

    def states(self) -> tuple[str, ...]:
        """The states of every run switched on."""
        return tuple(s for scope in self.scopes for s in self.run_states(scope))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (budgets as floats and exact fractions as strings)."""
        return {
            "source": self.source,
            "privacy_defn": self.privacy_defn,
            "budgets": {
                f"{t},{g.value},{i}": {"value": float(b), "exact": str(b)}
                for (t, g, i), b in self.budgets.items()
            },
            "thresholds_h_t3": {
                f"{g.value},{i}": list(v) for (g, i), v in self.thresholds_t3.items()
            },
            "thresholds_h_t4": {f"{g.value},{i}": v for (g, i), v in self.thresholds_t4.items()},
            "max_race_codes": self.max_race_codes,
            "allow_negative_counts": self.allow_negative_counts,
            "run_us": self.run_us,
            "run_pr": self.run_pr,
            "state_filter_us": list(self.state_filter_us),
            "reader": self.reader,
        }


def read_config(path: str | Path) -> HConfig:
    """Read and validate a SafeTab-H ``config.json``; raise
    :class:`privtab.data.InputValidationError` on any problem."""
    return checked(lambda log: load_config(path, log))


def load_config(path: str | Path, log: ProblemLog) -> HConfig | None:
    """Read and validate ``config.json``, adding problems to ``log`` (``None`` if any).
    The file is read as every product's config is
    (:mod:`privtab.data.json_config`: a regular UTF-8 file of at most 1 MiB, nested at most
    32 deep, no key twice, numbers exact and of bounded size)."""
    text = read_json_text(path, log)
    if text is None:
        return None
    parsed = parse_json_object(text, str(path), log)
    if parsed is None:
        return None
    raw, clean = parsed
    cfg = parse_config(raw, str(path), log)
    return cfg if clean else None


def parse_config(
    raw: Mapping[str, Any], source: str = "<dict>", log: ProblemLog | None = None
) -> HConfig | None:
    """Validate a config mapping (values as :func:`json.loads` gives them, numbers as
    ``Decimal`` or ``int``); ``None`` when problems were found (they are in ``log``;
    without a ``log`` an :class:`~privtab.data.errors.InputValidationError` is raised)."""
    own = log is None
    log = ProblemLog() if log is None else log
    before = sum(log.counts.values())
    _Checker(raw, source, log).run()
    if sum(log.counts.values()) > before:
        if own:
            log.raise_if_any()
        return None
    known = {
        threshold_key(g, i): (g, i) for g in (*US_LEVELS, *PR_LEVELS) for i in ITERATION_LEVELS
    }
    t3 = raw[THRESHOLD_KEYS["t3"]]
    t4 = raw[THRESHOLD_KEYS["t4"]]
    return HConfig(
        privacy_defn=raw["privacy_defn"],
        budgets={q: frac(raw[k]) for k, q in BUDGET_KEYS.items()},
        thresholds_t3={
            known[k]: (int(v[0]), int(v[1]), int(v[2])) for k, v in t3.items() if k in known
        },
        thresholds_t4={known[k]: int(v[0]) for k, v in t4.items() if k in known},
        max_race_codes=int(raw["max_race_codes"]),
        allow_negative_counts=bool(raw["allow_negative_counts"]),
        run_us=bool(raw["run_us"]),
        run_pr=bool(raw["run_pr"]),
        state_filter_us=tuple(raw["state_filter_us"]),
        reader=str(raw["reader"]),
        source=source,
    )


class _Checker:
    def __init__(self, raw: Mapping[str, Any], source: str, log: ProblemLog) -> None:
        self.raw = raw
        self.source = source
        self.log = log

    def bad(self, kind: str, key: str, value: Any, message: str) -> None:
        self.log.add(value_problem(self.source, kind, key, value, message))

    def run(self) -> None:
        for k in sorted(set(self.raw) - set(REQUIRED_KEYS)):
            self.bad("unknown_key", k, self.raw[k], "unknown config key (not part of SafeTab-H)")
        for k in REQUIRED_KEYS:
            if k not in self.raw:
                self.bad("missing_key", k, ABSENT, "required config key is missing")
        self._choices()
        self._budgets()
        self._flags()
        self._state_filter()
        for table in TABLES:
            self._thresholds(table)

    def _choices(self) -> None:
        v = self.raw.get("privacy_defn", ABSENT)
        if v is not ABSENT and v not in ("zcdp", "puredp"):
            self.bad("invalid_value", "privacy_defn", v, "must be 'zcdp' or 'puredp'")
        v = self.raw.get("reader", ABSENT)
        if v is not ABSENT and v not in ("cef", "csv"):
            self.bad("invalid_value", "reader", v, "must be 'cef' or 'csv'")
        v = self.raw.get("max_race_codes", ABSENT)
        if v is ABSENT:
            return
        if isinstance(v, bool) or not isinstance(v, int):
            self.bad("invalid_type", "max_race_codes", v, "must be an integer")
        elif not 1 <= v <= 8:
            self.bad("out_of_range", "max_race_codes", v, "must be between 1 and 8 (QRACE1..8)")

    def _budgets(self) -> None:
        positive = {Scope.US: 0, Scope.PR: 0}
        for k, (_, geo, _) in BUDGET_KEYS.items():
            v = self.raw.get(k, ABSENT)
            if v is ABSENT:
                continue
            if not is_number(v):
                self.bad("invalid_type", k, v, "a budget must be a finite number (0 = no query)")
            elif v < 0:
                self.bad("negative_budget", k, v, "a budget must be non-negative (0 = no query)")
            elif v > 0 and not MIN_BUDGET <= frac(v) <= MAX_BUDGET:
                self.bad(
                    "out_of_range",
                    k,
                    v,
                    "a positive budget must lie in [1e-12, 1e6], so that every computation "
                    "on it is exact and finishes (use 0 for no query)",
                )
            elif v > 0:
                positive[geo.scope] += 1
        for scope, flag in ((Scope.US, "run_us"), (Scope.PR, "run_pr")):
            keys = [k for k, (_, g, _) in BUDGET_KEYS.items() if g.scope is scope]
            complete = all(k in self.raw and is_number(self.raw[k]) for k in keys)
            if self.raw.get(flag) is True and complete and positive[scope] == 0:
                self.bad(
                    "no_budget",
                    flag,
                    True,
                    f"every budget of the {scope.value} run is 0: nothing to release (give a "
                    f"query a positive budget, or set {flag} to false)",
                )

    def _flags(self) -> None:
        check_run_flags(self.raw, self.bad)

    def _state_filter(self) -> None:
        check_state_filter(self.raw, self.bad)

    def _thresholds(self, table: Table) -> None:
        key = THRESHOLD_KEYS[table]
        v = self.raw.get(key, ABSENT)
        if v is ABSENT:
            return
        if not isinstance(v, dict):
            self.bad("invalid_type", key, v, "must be an object of '(GEO, level)' keys")
            return
        known = {threshold_key(g, i) for g in (*US_LEVELS, *PR_LEVELS) for i in ITERATION_LEVELS}
        for k in sorted(set(v) - known):
            self.bad("unknown_key", f"{key}.{k}", v[k], "unknown key (expected '(GEO, level)')")
        runs = [s for s, f in ((Scope.US, "run_us"), (Scope.PR, "run_pr")) if self.raw.get(f)]
        needed = {threshold_key(g, i) for s in runs for g in levels_of(s) for i in (1, 2)}
        for k in sorted(needed - set(v)):
            self.bad("missing_key", f"{key}.{k}", ABSENT, "thresholds of a level are missing")
        for k in sorted(set(v) & known):
            self._threshold_list(table, f"{key}.{k}", v[k])

    def _threshold_list(self, table: Table, col: str, ts: Any) -> None:
        if not isinstance(ts, list) or not all(is_number(t) for t in ts):
            self.bad("invalid_type", col, ts, "must be a list of integers")
        elif not all(frac(t).denominator == 1 for t in ts):
            self.bad("invalid_type", col, ts, "thresholds must be integers (counts are integers)")
        elif not all(abs(frac(t)) <= MAX_THRESHOLD for t in ts):
            self.bad("out_of_range", col, ts, "thresholds must lie in [-1e12, 1e12]")
        elif table == "t4" and len(ts) != 1:
            self.bad("thresholds_count", col, ts, f"exactly one threshold, got {len(ts)}")
        elif table == "t3" and len(ts) < 3:
            self.bad("thresholds_count", col, ts, f"at least three thresholds, got {len(ts)}")
        elif not all(a <= b for a, b in itertools.pairwise(ts)):
            self.bad("thresholds_not_increasing", col, ts, "thresholds must be non-decreasing")
