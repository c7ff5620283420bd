"""Shared helpers of the TopDown tests: certificate excerpts and a small synthetic population
in the C1 layout (CONTRACTS.md C1), built independently of privtab's code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

CERTS = Path(__file__).parent / "data" / "certificates"

#: GQ type codes by major type (production code list; CONTRACTS.md C1).
GQ_CODES = {1: "101", 2: "201", 3: "301", 4: "401", 5: "501", 6: "601", 7: "701"}


def add_facility(
    units: list[dict[str, Any]],
    persons: list[dict[str, Any]],
    rng: np.random.Generator,
    mafid: int,
    geo: dict[str, Any],
    t: int,
    n: int,
) -> None:
    """Append a group-quarters facility of major type ``t`` (unit ``mafid`` at ``geo``) and
    its ``n`` residents (ages drawn from ``rng``: 65+ in nursing facilities) to the CEF-like
    ``units`` and ``persons`` rows."""
    units.append(dict(MAFID=str(mafid), **geo, RTYPE="4", QGQTYP=GQ_CODES[t],
                      HH_STATUS="0", FINAL_POP=str(n)))  # fmt: skip
    for e in range(n):
        age = int(rng.integers(65 if t == 3 else 0, 100))
        persons.append(dict(MAFID=str(mafid), EPNUM=str(e + 1), **geo,
                            RELSHIP="37" if t <= 4 else "38", QGQTYP=GQ_CODES[t],
                            QAGE=f"{age:03d}"))  # fmt: skip


@dataclass
class Certificate:
    rho: Fraction
    epsilon: Fraction
    delta: Fraction
    levels: list[str]
    geolevel: dict[str, Fraction]
    queries: dict[str, dict[str, Fraction | None]]
    per_attribute: dict[str, float]
    per_geography: dict[str, float]


def _frac(token: str) -> Fraction | None:
    return None if token == "NaN" else Fraction(token)


def certificate(name: str) -> Certificate:
    """Parse a certificate excerpt (``US-Persons`` …) with plain regular expressions."""
    text = (CERTS / f"{name}.txt").read_text(encoding="utf-8")

    def find(pattern: str) -> Fraction:
        m = re.search(pattern, text)
        assert m is not None, pattern
        return Fraction(m.group(1))

    rho = find(r"ρ = (\d+/\d+)")
    eps = find(r"Total zCDP-implied ε = (\d+/\d+)")
    delta = find(r"δ = (\d+/\d+)")
    lines = text.splitlines()
    i = lines.index(" Geography level Budget proportion") + 1
    geo: dict[str, Fraction] = {}
    while lines[i].strip():
        lv, val = lines[i].split()
        geo[lv] = Fraction(val)
        i += 1
    j = next(k for k, line in enumerate(lines) if line.startswith("Within-geolevel query"))
    levels = lines[j + 1].split()
    queries: dict[str, dict[str, Fraction | None]] = {}
    k = j + 2
    while not lines[k].startswith("Per-attribute"):
        tokens = lines[k].split()
        name_ = " ".join(tokens[: -len(levels)])
        queries[name_] = {
            lv: _frac(t) for lv, t in zip(levels, tokens[-len(levels) :], strict=False)
        }
        k += 1
    tail = "\n".join(lines[k:])
    attrs = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"\b(hhgq|votingage|hispanic|cenrace|h1)\s+(\d+\.\d+)", tail)
    }
    geos = {
        m.group(1): float(m.group(2)) for m in re.finditer(r"(Block-within-\w+)\s+(\d+\.\d+)", tail)
    }
    return Certificate(rho, eps, delta, levels, geo, queries, attrs, geos)


@dataclass
class Population:
    grfc: pl.DataFrame
    units: pl.DataFrame
    persons: pl.DataFrame


def _block_rows(rng: np.random.Generator, states: list[str]) -> list[dict[str, str]]:
    rows = []
    for st in states:
        for cou in ("001", "003"):
            for tract in ("000100", "000200", "020100"):
                n = int(rng.integers(1, 24))
                for b in range(n):
                    blk = f"{1 + b // 9}{b % 9:03d}"
                    aian = "9999"
                    if st == "01" and cou == "003" and b % 4 == 0:
                        aian = "0150"  # federally recognised: an AIAN part
                    elif st == "01" and b % 7 == 3:
                        aian = "8100"  # tribal designated statistical area: not on the spine list
                    rows.append(
                        {
                            "TABBLKST": st,
                            "TABBLKCOU": cou,
                            "TABTRACTCE": tract,
                            "TABBLKGRPCE": blk[0],
                            "TABBLK": blk,
                            "PLACEFP": f"{int(rng.integers(0, 3)) * 100:05d}",
                            "COUSUBFP": f"{int(rng.integers(1, 3)) * 10:05d}",
                            "AIANNHCE": aian,
                        }
                    )
    return rows


def population(seed: int = 1, states: tuple[str, ...] = ("01", "09")) -> Population:
    """A small population: GRF-C, cef-units and cef-persons frames (text columns), with
    every C1 consistency rule kept (persons of a GQ only in its facility's block, no minors
    in nursing facilities, at least one person per facility, none in vacant units)."""
    rng = np.random.default_rng(seed)
    blocks = _block_rows(rng, list(states))
    units, persons = [], []
    mafid = 100000000
    for b in blocks:
        geo = {k: b[k] for k in ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")}
        if rng.random() < 0.15:
            continue  # a block without units
        for _ in range(int(rng.integers(0, 5))):
            mafid += 1
            occupied = rng.random() < 0.8
            size = int(rng.integers(1, 5)) if occupied else 0
            units.append(dict(MAFID=str(mafid), **geo, RTYPE="2", QGQTYP=None,
                              HH_STATUS="1" if occupied else "2", FINAL_POP=str(size)))  # fmt: skip
            for e in range(size):
                age = int(rng.integers(0 if e else 18, 90))
                persons.append(dict(MAFID=str(mafid), EPNUM=str(e + 1), **geo,
                                    RELSHIP="20" if e == 0 else "21", QGQTYP=None,
                                    QAGE=f"{age:03d}"))  # fmt: skip
        if rng.random() < 0.3:
            t = int(rng.integers(1, 8))
            mafid += 1
            size = int(rng.integers(1, 6))
            add_facility(units, persons, rng, mafid, geo, t, size)
    for p in persons:
        p["QSEX"] = str(int(rng.integers(1, 3)))
        p["CENHISP"] = str(int(rng.integers(1, 3)))
        p["CENRACE"] = f"{int(rng.integers(1, 64)):02d}"
    grfc = pl.DataFrame(blocks)
    unit_cols = ["MAFID", "TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "RTYPE", "QGQTYP",
                 "HH_STATUS", "FINAL_POP"]  # fmt: skip
    person_cols = ["MAFID", "EPNUM", "TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK", "RELSHIP",
                   "QGQTYP", "QSEX", "QAGE", "CENHISP", "CENRACE"]  # fmt: skip
    u = pl.DataFrame(units, schema=dict.fromkeys(unit_cols, pl.Utf8))
    p = pl.DataFrame(persons, schema=dict.fromkeys(person_cols, pl.Utf8))
    return Population(grfc, u, p)


def write_c1(frame: pl.DataFrame, path: Path) -> Path:
    """A C1 text file: pipe-delimited, header, ``Null`` for a missing value."""
    frame.write_csv(path, separator="|", null_value="Null")
    return path
