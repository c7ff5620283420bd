"""Small TopDown releases shared by the modules that read a release's outputs (the tree
GLS of ``privtab topdown gls``, ``privtab topdown accuracy``): one population of three
states (two US states and Puerto Rico) and its releases with noisy measurements, noise
off and seeded, made once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from privtab.mechanisms import InsecureReleaseWarning
from privtab.random import SeededSource
from privtab.topdown.run import TopDownOptions, run_release
from tests.topdown._support import population, write_c1

SMALL_STATES = ("01", "09", "72")


def write_small_population(folder: Path, seed: int) -> Path:
    """The C1 files of ``population(seed)`` of :data:`SMALL_STATES` in ``folder``."""
    pop = population(seed, states=SMALL_STATES)
    write_c1(pop.grfc, folder / "GRF-C.txt")
    write_c1(pop.units, folder / "cef-units.txt")
    write_c1(pop.persons, folder / "cef-persons.txt")
    return folder


def small_release(data: Path, out: Path, **kw: object) -> Path:
    """A test release of ``data`` with noisy measurements, no report."""
    opts = TopDownOptions(allow_insecure=True, nmf=True, report=False, **kw)  # type: ignore[arg-type]
    with pytest.warns(InsecureReleaseWarning):
        run_release(data, out, opts, progress=lambda _m: None)
    return out


@pytest.fixture(scope="session")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_population(tmp_path_factory.mktemp("td-small-data"), 5)


@pytest.fixture(scope="session")
def small_exact_release(small_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_release(small_data, tmp_path_factory.mktemp("td-small-exact") / "release",
                         noise=False)  # fmt: skip


@pytest.fixture(scope="session")
def small_seeded_release(small_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_release(small_data, tmp_path_factory.mktemp("td-small-seeded") / "release",
                         source=SeededSource(404))  # fmt: skip
