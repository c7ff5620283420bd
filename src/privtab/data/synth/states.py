"""Model inputs of the synthetic nation: the 50 states, DC and Puerto Rico.

Public facts, rounded (2020 Census): resident population, number of counties (county
equivalents), and shares of the population that is Hispanic or Latino and, alone, Black,
Asian, American Indian / Alaska Native and Native Hawaiian / Pacific Islander. ``aiannh`` is
the modelled share of a state's tracts inside American Indian, Alaska Native or Native
Hawaiian areas (high in Oklahoma and Alaska, where tribal statistical areas and village
areas cover much of the state; zero in DC and Puerto Rico). These numbers shape the
synthetic population; they are not used by any privacy computation.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StateModel:
    fips: str
    usps: str
    population: float
    """2020 resident population, millions."""
    counties: int
    hispanic: float
    black: float
    asian: float
    aian: float
    nhpi: float
    aiannh: float


_ROWS = """
01 AL  5.024  67 0.053 0.257 0.015 0.006 0.001 0.002
02 AK  0.733  30 0.077 0.030 0.065 0.148 0.017 0.350
04 AZ  7.152  15 0.307 0.045 0.037 0.045 0.002 0.120
05 AR  3.012  75 0.085 0.149 0.017 0.009 0.004 0.002
06 CA 39.538  58 0.394 0.054 0.155 0.016 0.004 0.020
08 CO  5.774  64 0.219 0.040 0.035 0.013 0.002 0.005
09 CT  3.606   8 0.173 0.106 0.048 0.004 0.001 0.003
10 DE  0.990   3 0.105 0.216 0.042 0.005 0.001 0.002
11 DC  0.690   1 0.113 0.445 0.046 0.005 0.001 0.000
12 FL 21.538  67 0.265 0.145 0.030 0.004 0.001 0.002
13 GA 10.712 159 0.105 0.310 0.045 0.005 0.001 0.001
15 HI  1.455   5 0.111 0.016 0.367 0.003 0.104 0.040
16 ID  1.839  44 0.130 0.007 0.014 0.013 0.002 0.030
17 IL 12.813 102 0.182 0.139 0.060 0.004 0.001 0.002
18 IN  6.786  92 0.082 0.093 0.026 0.003 0.001 0.002
19 IA  3.190  99 0.068 0.041 0.025 0.004 0.002 0.002
20 KS  2.938 105 0.130 0.056 0.030 0.009 0.001 0.005
21 KY  4.506 120 0.046 0.080 0.017 0.002 0.001 0.001
22 LA  4.658  64 0.069 0.314 0.018 0.007 0.001 0.002
23 ME  1.362  16 0.020 0.018 0.012 0.006 0.000 0.010
24 MD  6.177  24 0.118 0.294 0.067 0.005 0.001 0.001
25 MA  7.030  14 0.126 0.070 0.072 0.003 0.000 0.002
26 MI 10.077  83 0.056 0.137 0.034 0.006 0.000 0.010
27 MN  5.706  87 0.061 0.070 0.052 0.011 0.001 0.030
28 MS  2.961  82 0.036 0.364 0.011 0.006 0.000 0.003
29 MO  6.155 115 0.049 0.113 0.022 0.005 0.002 0.002
30 MT  1.084  56 0.046 0.005 0.009 0.065 0.001 0.100
31 NE  1.962  93 0.120 0.048 0.027 0.010 0.001 0.010
32 NV  3.105  17 0.287 0.102 0.087 0.013 0.008 0.030
33 NH  1.377  10 0.043 0.015 0.026 0.002 0.000 0.002
34 NJ  9.289  21 0.216 0.123 0.102 0.005 0.000 0.002
35 NM  2.118  33 0.477 0.021 0.018 0.100 0.001 0.150
36 NY 20.201  62 0.195 0.148 0.086 0.007 0.000 0.005
37 NC 10.439 100 0.107 0.206 0.033 0.012 0.001 0.010
38 ND  0.779  53 0.043 0.034 0.016 0.050 0.001 0.080
39 OH 11.799  88 0.044 0.124 0.025 0.002 0.000 0.001
40 OK  3.959  77 0.119 0.073 0.023 0.087 0.002 0.550
41 OR  4.237  36 0.144 0.020 0.046 0.013 0.005 0.020
42 PA 13.003  67 0.081 0.105 0.039 0.002 0.000 0.001
44 RI  1.097   5 0.166 0.057 0.036 0.006 0.000 0.010
45 SC  5.118  46 0.069 0.250 0.018 0.004 0.001 0.005
46 SD  0.887  66 0.045 0.020 0.015 0.090 0.000 0.120
47 TN  6.911  95 0.069 0.157 0.020 0.003 0.001 0.001
48 TX 29.146 254 0.393 0.118 0.054 0.007 0.001 0.002
49 UT  3.272  29 0.151 0.012 0.025 0.011 0.011 0.020
50 VT  0.643  14 0.024 0.014 0.018 0.003 0.000 0.002
51 VA  8.631 133 0.105 0.186 0.071 0.005 0.001 0.002
53 WA  7.705  39 0.137 0.040 0.094 0.014 0.008 0.060
54 WV  1.794  55 0.019 0.036 0.008 0.002 0.000 0.001
55 WI  5.894  72 0.076 0.062 0.031 0.009 0.000 0.020
56 WY  0.577  23 0.102 0.009 0.009 0.022 0.001 0.050
72 PR  3.286  78 0.989 0.070 0.002 0.005 0.000 0.000
"""


def _parse() -> tuple[StateModel, ...]:
    out = []
    for line in _ROWS.strip().splitlines():
        f = line.split()
        out.append(
            StateModel(
                fips=f[0],
                usps=f[1],
                population=float(f[2]),
                counties=int(f[3]),
                hispanic=float(f[4]),
                black=float(f[5]),
                asian=float(f[6]),
                aian=float(f[7]),
                nhpi=float(f[8]),
                aiannh=float(f[9]),
            )
        )
    return tuple(out)


STATES: tuple[StateModel, ...] = _parse()
BY_FIPS: dict[str, StateModel] = {s.fips: s for s in STATES}
BY_USPS: dict[str, StateModel] = {s.usps: s for s in STATES}


def resolve_states(spec: str | list[str] | None) -> tuple[StateModel, ...]:
    """States from a list/comma string of FIPS codes or USPS abbreviations (None: all 52).

    Keywords: ``US`` (50 states + DC), ``PR``, ``ALL``.
    """
    if spec is None:
        return STATES
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    chosen: dict[str, StateModel] = {}
    for raw in items:
        item = raw.strip().upper()
        if not item:
            continue
        if item == "ALL":
            group = list(STATES)
        elif item == "US":
            group = [s for s in STATES if s.fips != "72"]
        elif item in BY_USPS:
            group = [BY_USPS[item]]
        elif item.zfill(2) in BY_FIPS:
            group = [BY_FIPS[item.zfill(2)]]
        else:
            raise ValueError(
                f"unknown state {raw!r}: use 2-digit FIPS codes or USPS abbreviations "
                "(e.g. 01,AK,72), or US / PR / ALL"
            )
        for s in group:
            chosen[s.fips] = s
    if not chosen:
        raise ValueError("no state selected")
    return tuple(sorted(chosen.values(), key=lambda s: s.fips))


__all__ = ["BY_FIPS", "BY_USPS", "STATES", "StateModel", "resolve_states"]
