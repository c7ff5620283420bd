"""Small TopDown releases shared by the modules that read a release's outputs (the tree
GLS of ``privtab topdown gls``, ``privtab topdown accuracy``, ``--postprocess gls-round``):
one population of three states (two US states and Puerto Rico) and its releases with noisy
measurements, noise off and seeded, made once per session; and the population of the
pinned seeded release (test_release.py, test_release_identity.py) with that release.
Every user only reads them (a test that edits a release copies it first); the small
population and its two releases are built once per test session and shared by the
pytest-xdist workers (tests/conftest.py :func:`shared_folder`: both workers read them, and
each built its own: 2 x 6 CPU-s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from privtab.mechanisms import InsecureReleaseWarning
from privtab.random import SeededSource
from privtab.topdown.run import TopDownOptions, TopDownResult, run_release
from tests.conftest import shared_folder
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
    return shared_folder(
        tmp_path_factory, "td-small-data", lambda folder: write_small_population(folder, 5)
    )


@pytest.fixture(scope="session")
def small_exact_release(small_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(folder: Path) -> None:
        small_release(small_data, folder / "release", noise=False)

    return shared_folder(tmp_path_factory, "td-small-exact", build) / "release"


@pytest.fixture(scope="session")
def small_seeded_release(small_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(folder: Path) -> None:
        small_release(small_data, folder / "release", source=SeededSource(404))

    return shared_folder(tmp_path_factory, "td-small-seeded", build) / "release"


PINNED_STATES = ("01", "09", "72")


@pytest.fixture(scope="session")
def pinned_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C1 files of ``population(3)`` of :data:`PINNED_STATES`."""
    d = tmp_path_factory.mktemp("td-pinned-data")
    pop = population(3, states=PINNED_STATES)
    write_c1(pop.grfc, d / "GRF-C.txt")
    write_c1(pop.units, d / "cef-units.txt")
    write_c1(pop.persons, d / "cef-persons.txt")
    return d


@pytest.fixture(scope="session")
def pinned_seeded_release(
    pinned_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, TopDownResult]:
    """The release of ``pinned_data`` with seed 2026 and a report (its MDF and tables are
    pinned by digest: test_release_identity.PINNED)."""
    out = tmp_path_factory.mktemp("td-seeded") / "release"
    opts = TopDownOptions(allow_insecure=True, report=True, source=SeededSource(2026))
    with pytest.warns(InsecureReleaseWarning):
        res = run_release(pinned_data, out, opts, progress=lambda _m: None)
    return out, res
