"""A synthetic nation for every product: 50 states, DC and PR, one population.

``synthesize(out, persons, states=..., seed=..., fmt="txt"|"parquet")`` streams person
records, GRF-C, household records, CEF units and CEF persons of the same persons in bounded
memory and writes them atomically; see :mod:`privtab.data.synth.model` (geography, persons)
and :mod:`privtab.data.synth.population` (households, housing units, group quarters) for
the model and ``docs/data.md`` for the files.
"""

from privtab.data.synth.generate import (
    DEFAULT_CHUNK_ROWS,
    SYNTH_GRFC_COLUMNS,
    UNIT_PERSONS,
    Nation,
    SynthResult,
    synthesize,
)
from privtab.data.synth.model import FlatCategorical, cenrace_table, major_groups
from privtab.data.synth.states import STATES, StateModel, resolve_states

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "STATES",
    "SYNTH_GRFC_COLUMNS",
    "UNIT_PERSONS",
    "FlatCategorical",
    "Nation",
    "StateModel",
    "SynthResult",
    "cenrace_table",
    "major_groups",
    "resolve_states",
    "synthesize",
]
