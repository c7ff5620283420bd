"""``report.html`` of a real (seeded, so NOT private) release of the small synthetic nation.

What a policy maker and a data user meet: the red banner and the headline sentence on the
first screen (headless Chromium, no console error), plain names everywhere (no snake_case
outside code), levels in words, a reference list holding every work cited, legends outside
the axes, text columns left-aligned, and the data-users section with real example rows
and iteration names.
"""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from privtab.data import GeoLevel, production_config_dir, read_reference
from privtab.random import SeededSource
from privtab.report import legend_outside, new_figure, round_up, table_html
from privtab.tabulate import RunOptions, run_release
from privtab.tabulate.report_text import GEOGRAPHIES, level_words

from ..semantics.chromium import CHROMIUM, render

pytestmark = pytest.mark.filterwarnings("ignore::privtab.mechanisms.InsecureReleaseWarning")

SNAKE = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b")


@pytest.fixture(scope="module")
def release(synth_small: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    config, data = synth_small
    out = tmp_path_factory.mktemp("report") / "rel"
    run_release(
        config, data, out, RunOptions(source=SeededSource(5), allow_insecure=True, pld_grid=1e-2)
    )
    return out


def _visible_text(page: str) -> str:
    """The page's text outside <code>, <pre>, <style>, tags and attribute values."""
    body = page.split("<body>", 1)[1]
    body = re.sub(r"<(code|pre|style)[^>]*>.*?</\1>", " ", body, flags=re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", body))


def test_report_opens_with_banner_and_headline(release: Path) -> None:
    page = (release / "report.html").read_text()
    doc = json.loads((release / "release.json").read_text())
    body = page.split("<body>", 1)[1]
    assert body.index('class="banner"') < body.index('class="headline"') < body.index("<h2")
    best = max(
        min(a["epsilon"] for a in run["privacy"].values() if a.get("valid", True))
        for run in doc["runs"].values()
    )
    rho = doc["guarantee"]["zcdp"]["rho"]
    head = htmllib.unescape(re.search(r'class="headline">(.*?)</p>', body).group(1))
    assert f"ρ = {rho:g} zero-concentrated differential privacy" in head
    assert f"for δ = 10⁻¹⁰ that means ε ≤ {round_up(best)}" in head
    assert "NOT private" in head  # a seeded release says so in the headline too


def test_report_uses_plain_words_and_full_references(release: Path) -> None:
    page = (release / "report.html").read_text()
    text = _visible_text(page)
    assert SNAKE.findall(text) == []
    for word in ("county × detailed iterations", "Puerto Rico municipio × regional iterations"):
        assert word in text
    cited = set(re.findall(r'href="#ref-([a-z-]+)"', page))
    listed = set(re.findall(r'<li id="ref-([a-z-]+)">', page))
    assert cited == listed
    assert {"safetab", "semantics", "doroshenko"} <= cited
    assert "Sam Haney, William Sexton, Ashwin Machanavajjhala, Michael Hay, Gerome Miklau" in page
    assert "seed Thm" not in text
    assert "seed Theorem" not in text


def test_data_users_section_has_named_example_rows(release: Path) -> None:
    page = (release / "report.html").read_text()
    users = page.split("id='data-users'", 1)[1]
    ref = read_reference(production_config_dir())
    codes = re.findall(r"<td>(\d{4}) ([^<]+)</td>", users)
    assert len(codes) >= 2
    for code, name in codes:
        assert htmllib.unescape(name) == ref.iterations[code].name
    assert "MOE95" in users
    assert "95% confidence" in users
    assert "privtab analyze ci --release" in users
    assert "SEX 1 (male)" in users  # the T2 cells of one group


def test_every_geography_has_words() -> None:
    assert set(GEOGRAPHIES) == {g.value for g in GeoLevel}
    assert level_words("(COUNTY, 2)") == "county × detailed iterations"
    assert level_words("(PR-COUNTY, 1)") == "Puerto Rico municipio × regional iterations"
    assert level_words("(USA, 1)") == "nation × regional iterations"


@pytest.mark.parametrize("where", ["right", "top"])
def test_legend_is_outside_the_axes(where: str) -> None:
    fig, ax = new_figure(6.0, 3.0)
    for i in range(6):
        ax.plot([0, 1], [i, i + 1], label=f"a long enough label number {i}")
    legend_outside(ax, where=where)
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent()
    axes = ax.get_window_extent()
    assert not box.overlaps(axes)


def test_text_columns_left_numbers_right() -> None:
    t = table_html(["run", "ε", "δ"], [["Puerto Rico run", "16.80", "10⁻¹⁰"], ["US", "1,234", "0"]])
    assert '<th>run</th><th class="num">ε</th>' in t
    assert "<td>Puerto Rico run</td>" in t
    assert '<td class="num">16.80</td>' in t


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browsers`")
def test_report_renders_with_headline_on_first_screen(release: Path) -> None:
    js = (
        "JSON.stringify({h: document.querySelector('.headline').getBoundingClientRect().bottom,"
        " b: document.querySelector('.banner').getBoundingClientRect().bottom,"
        " t: document.querySelector('.headline').innerText,"
        " figs: Array.from(document.querySelectorAll('figure img')).map("
        "i => i.complete && i.naturalWidth > 0)})"
    )
    r = render((release / "report.html").as_uri(), js)
    assert r.errors == []
    v: dict[str, Any] = json.loads(r.value)
    assert 0 < v["b"] < v["h"] <= 900  # banner, then the headline, on the first screen
    assert "ε ≤" in v["t"]
    assert "δ = 10⁻¹⁰" in v["t"]
    assert v["figs"] == [True, True, True]


# ------------------------------------------------------------------ semantics --release


def test_semantics_release_covers_every_run(release: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from privtab.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["semantics", "--release", str(release), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    runs = out["runs"]
    assert set(runs) == {"US", "PR"}
    assert runs["PR"]["name"] == "Puerto Rico run"
    assert runs["US"]["name"].startswith("United States run")
    assert all(len(r["release_pld"]) == 3 for r in runs.values())
    assert out["power"]["release_pld"] == runs["US"]["release_pld"]  # the worst-case run
    assert runs["PR"]["release_pld"][1] < runs["US"]["release_pld"][1]
    page = tmp_path / "sem.html"
    res = runner.invoke(app, ["semantics", "--release", str(release), "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert "PR: worst case" in res.stdout
    assert "US: worst case" in res.stdout
    text = page.read_text()
    title = re.search(r"<h1>(.*?)</h1>", text).group(1)
    assert title == f"What the SafeTab-P release {release} protects against"
    for run in runs.values():
        assert f"<h2>{htmllib.escape(run['name'])}: ρ = " in text
    assert text.count("this run&#x27;s worst-case person</th>") == 2  # the release_pld column
    assert 'class="banner"' in text  # a seeded release
    assert SNAKE.findall(_visible_text(text)) == []


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browsers`")
def test_semantics_release_report_renders(release: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from privtab.cli import app

    page = tmp_path / "sem.html"
    res = CliRunner().invoke(app, ["semantics", "--release", str(release), "--html", str(page)])
    assert res.exit_code == 0, res.output
    js = (
        "JSON.stringify([document.querySelector('.headline').getBoundingClientRect().bottom,"
        " document.querySelector('.headline').innerText])"
    )
    r = render(page.as_uri(), js)
    assert r.errors == []
    bottom, text = json.loads(r.value)
    assert bottom <= 900
    assert "ε ≤" in text
    assert "δ = 10⁻¹⁰" in text


def test_the_report_says_what_its_guarantee_means(release: Path) -> None:
    """Issue 31: the report pointed to ``privtab semantics --release`` instead of saying
    what its ε means. It now gives the attack-success and posterior bounds itself, from
    privtab.semantics (recomputed here), and no total-only MOE where a level has none."""
    import html as html_module

    from privtab.accounting import ZCDP
    from privtab.semantics.report import pct_up, posterior_at_ratio
    from privtab.semantics.summary import power_bounds, tightest_power

    doc = json.loads((release / "release.json").read_text())
    page = html_module.unescape((release / "report.html").read_text())
    g = ZCDP(doc["guarantee"]["zcdp"]["rho"])
    p05 = float(tightest_power(power_bounds(g, [0.05]))[0])
    general, assumed = posterior_at_ratio(g, 10.0)
    assert f"succeeds at most {pct_up(p05)} of the time" in page
    assert "10 times stronger than it would be had their record been replaced" in page
    assert f"is at most {pct_up(general)} ({pct_up(assumed[0][1])} if the attacker" in page
    levels = [
        (scope, lv)
        for scope, run in doc["runs"].items()
        for lv in run["levels"]
        if lv.get("status") == "tabulated"
    ]
    none = [lv["level"] for _, lv in levels if lv["stat_levels"].get("-1", 0) == 0]
    assert none  # sub-state levels have no TotalOnly group
    rows = re.findall(r"<tr>(.*?)</tr>", (release / "report.html").read_text(), re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, re.S) for r in rows]
    level_rows = {c[1].rsplit(" ", 2)[-2] + " " + c[1].rsplit(" ", 2)[-1]: c for c in cells
                  if len(c) == 10}  # fmt: skip
    assert level_rows
    for key, c in level_rows.items():
        has = key not in none
        assert (c[-1] != "—") == has, (key, c)
