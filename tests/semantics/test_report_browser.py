"""The HTML report renders in headless Chromium with no console error and every figure.

Chromium comes from Debian's ``chromium`` package (``make browsers``, a dependency of
``make test``); without it these tests are skipped with a message. The screenshot test
keeps an image of the first screen in ``docs/img/semantics-report.png`` and compares a
fresh render with it by size and non-blankness (not pixel by pixel). Set
``PRIVTAB_UPDATE_SCREENSHOTS=1`` to refresh the kept image.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from privtab.accounting import GDP, ZCDP, ApproxDP, Guarantee, PureDP
from privtab.accounting.curves import geometric_rdp
from privtab.semantics.allocation import builtin_allocation
from privtab.semantics.report import guarantee_report_html, topdown_report_html, write_html

from .chromium import CHROMIUM, render

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed: run `make browsers` (Debian package)"
)

KEPT = Path(__file__).resolve().parents[2] / "docs" / "img" / "semantics-report.png"
FIGURES_JS = (
    "JSON.stringify(Array.from(document.querySelectorAll('figure.report-figure')).map("
    "f => [f.id, f.querySelector('img').naturalWidth, f.querySelector('img').complete,"
    " f.querySelector('p.explain').textContent.length]))"
)


def _check(png: bytes) -> np.ndarray:
    img = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64)
    assert img.shape == (900, 1280)
    assert img.std() > 10  # not blank
    assert (img < 128).mean() > 0.005  # there is dark text / lines
    return img


def _figures(value: str) -> dict[str, tuple[int, bool, int]]:
    import json

    return {f[0]: (f[1], f[2], f[3]) for f in json.loads(value)}


# The reports are built once per module (each takes seconds of matplotlib): the figure and
# headline tests read the same pages.
@pytest.fixture(scope="module")
def zcdp_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = guarantee_report_html(ZCDP(2.63), [0.01, 0.05, 0.1], [1.25, 2, 10])
    return write_html(tmp_path_factory.mktemp("reports") / "zcdp.html", text)


@pytest.fixture(scope="module")
def topdown_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    a = builtin_allocation()
    text = topdown_report_html(a, list(a.scenarios.values()), [0.01, 0.05, 0.1], [2, 10])
    return write_html(tmp_path_factory.mktemp("reports") / "topdown.html", text)


def test_guarantee_report_renders_without_errors(zcdp_page: Path) -> None:
    r = render(zcdp_page.as_uri(), FIGURES_JS)
    assert r.errors == []
    figs = _figures(r.value)
    assert set(figs) == {"fig-power", "fig-epsilon-delta", "fig-bayes", "fig-discrete-gaussian"}
    for ident, (width, complete, text) in figs.items():
        assert complete, ident
        assert width > 0, ident
        assert text > 150, ident  # a plain-language paragraph per figure
    _check(r.screenshot)
    if os.environ.get("PRIVTAB_UPDATE_SCREENSHOTS") == "1" or not KEPT.exists():
        KEPT.parent.mkdir(parents=True, exist_ok=True)
        KEPT.write_bytes(r.screenshot)
    kept = _check(KEPT.read_bytes())
    fresh = _check(r.screenshot)
    assert kept.shape == fresh.shape
    # same page layout: the mean darkness of the first screen agrees roughly
    assert abs(kept.mean() - fresh.mean()) < 15


BASE_FIGURES = {"fig-power", "fig-epsilon-delta", "fig-bayes"}


@pytest.mark.parametrize(
    ("guarantee", "expected"),
    [
        # pure ε also draws the prior-to-posterior figure (Thm 6.4, Examples 4.4 and 4.5)
        (PureDP(1.0), BASE_FIGURES | {"fig-prior-posterior"}),
        (ApproxDP(1.0, 1e-6), BASE_FIGURES),
        (GDP(2.29), BASE_FIGURES),
        (geometric_rdp(0.5), BASE_FIGURES),
    ],
    ids=["pure", "approx", "gdp", "rdp"],
)
def test_other_guarantee_reports_render_every_figure(
    tmp_path: Path, guarantee: Guarantee, expected: set[str]
) -> None:
    page = write_html(
        tmp_path / "g.html", guarantee_report_html(guarantee, [0.01, 0.05, 0.1], [1.25, 2, 10])
    )
    r = render(page.as_uri(), FIGURES_JS)
    assert r.errors == []
    figs = _figures(r.value)
    assert set(figs) == expected
    for ident, (width, complete, text) in figs.items():
        assert complete, ident
        assert width > 0, ident
        assert text > 150, ident
    _check(r.screenshot)


def test_topdown_report_renders_without_errors(topdown_page: Path) -> None:
    r = render(topdown_page.as_uri(), FIGURES_JS)
    assert r.errors == []
    figs = _figures(r.value)
    assert set(figs) == {"fig-concern-rho", "fig-concern-power", "fig-concern-bayes"}
    assert all(w > 0 and c for w, c, _ in figs.values())
    _check(r.screenshot)


def test_console_errors_are_detected() -> None:
    """The harness itself: a page with a script error must not pass."""
    r = render("data:text/html,<script>console.error('x'); nope()</script>", "1")
    assert len(r.errors) >= 2


HEADLINE_JS = (
    "JSON.stringify([document.querySelector('.headline').getBoundingClientRect().bottom,"
    " document.querySelector('.headline').innerText])"
)


@pytest.mark.parametrize("which", ["zcdp", "topdown"])
def test_headline_with_epsilon_and_delta_on_first_screen(
    request: pytest.FixtureRequest, which: str
) -> None:
    page: Path = request.getfixturevalue(f"{which}_page")
    r = render(page.as_uri(), HEADLINE_JS)
    assert r.errors == []
    bottom, head = json.loads(r.value)
    assert 0 < bottom <= 900
    assert "δ = 10⁻¹⁰" in head
    assert "ε ≤" in head
    if which == "zcdp":  # CKS optimal conversion of ρ = 2.63, rounded up
        assert "ρ = 2.63 zero-concentrated differential privacy" in head
        assert "ε ≤ 17.44" in head  # 17.4306 (Bun–Steinke's formula would give 17.92)
