"""A synthetic nation for SafeTab-P: person records + GRF-C for 50 states, DC and PR.

``synthesize(out, persons, states=..., seed=..., fmt="txt"|"parquet")`` streams the records
in bounded memory and writes them atomically; see :mod:`privtab.data.synth.model` for the
model and ``docs/data.md`` for its description.
"""

from privtab.data.synth.generate import (
    DEFAULT_CHUNK_ROWS,
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
