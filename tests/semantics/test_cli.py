"""End-to-end tests of ``privtab semantics`` (CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privtab.cli import app

runner = CliRunner()


def _json(args: list[str]) -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict = json.loads(res.stdout)  # type: ignore[type-arg]
    return out


def test_zcdp_json_reproduces_table2() -> None:
    out = _json(["semantics", "--zcdp", "2.63", "--levels", "0.01,0.05,0.1"])
    p = out["power"]
    assert p["levels"] == [0.01, 0.05, 0.1]
    assert [round(x, 2) for x in p["zcdp_bound"]] == [0.70, 0.95, 0.96]
    assert [round(x, 2) for x in p["gaussian"]] == [0.49, 0.74, 0.84]
    assert {"zcdp_profile_bound", "discrete_gaussian"} <= set(p)
    assert out["bounds"]["gaussian"]["kind"] == "mechanism"
    assert out["guarantee"] == {"type": "zcdp", "rho": 2.63, "text": "2.63-zCDP"}
    assert out["posterior"]["ratios"][0] == 1.25


def test_pure_approx_gdp_and_rdp_file(tmp_path: Path) -> None:
    assert _json(["semantics", "--pure", "1"])["power"]["pure_bound"][1] == pytest.approx(
        0.13591409142295227
    )
    assert "approx_bound" in _json(["semantics", "--approx", "1,1e-6"])["power"]
    assert "gdp" in _json(["semantics", "--gdp", "1"])["power"]
    f = tmp_path / "curve.csv"
    f.write_text("alpha,tau\n" + "".join(f"{a},{0.5 * a}\n" for a in (1.5, 2, 4, 8, 16, 32, 64)))
    out = _json(["semantics", "--rdp-file", str(f)])
    assert out["guarantee"]["type"] == "rdp"
    z = _json(["semantics", "--zcdp", "0.5"])["power"]["zcdp_bound"]
    assert all(r >= q - 1e-9 for r, q in zip(out["power"]["rdp_bound"], z, strict=True))


def test_release_json(tmp_path: Path) -> None:
    rel = tmp_path / "release.json"
    rel.write_text(json.dumps({"tables": "...", "guarantee": {"zcdp": {"rho": 2.63}}}))
    out = _json(["semantics", "--release", str(rel)])
    assert [round(x, 2) for x in out["power"]["zcdp_bound"]] == [0.70, 0.95, 0.96]
    rel.write_text(json.dumps({"guarantee": {"pure": {"epsilon": "x"}}}))
    res = runner.invoke(app, ["semantics", "--release", str(rel)])
    assert res.exit_code == 2
    assert "guarantee.pure.epsilon" in res.output


def test_topdown_json() -> None:
    out = _json(["semantics", "topdown"])
    assert out["rho_per_block"] == pytest.approx(2.63)
    assert out["rho_per_block_by_universe"] == pytest.approx({"persons": 2.56, "housing": 0.07})
    assert out["scenarios"]["A"] == pytest.approx(0.11150074378640834)
    assert set(out["scenarios"]) == set("ABCDEFGH")
    a = _json(["semantics", "topdown", "--scenario", "A"])
    assert list(a["scenarios"]) == ["A"]
    assert a["details"]["A"]["power"]["zcdp_bound"][0] == pytest.approx(0.0373862607, abs=1e-5)
    c = _json(["semantics", "topdown", "--concern", "race"])
    assert c["scenarios"]["custom"] == pytest.approx(1.010290094946216)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["semantics"], "exactly one of"),
        (["semantics", "--zcdp", "1", "--pure", "1"], "exactly one of"),
        (["semantics", "--zcdp", "-1"], "rho"),
        (["semantics", "--pure", "1", "--levels", "0.5,2"], "--levels"),
        (["semantics", "--approx", "1"], "EPSILON,DELTA"),
        (["semantics", "topdown", "--scenario", "Q"], "unknown scenario"),
        (["semantics", "topdown", "--concern", "religion"], "unknown attribute"),
        (["semantics", "--rdp-file", "/nonexistent.csv"], "cannot read"),
    ],
)
def test_errors_are_clear(args: list[str], message: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert message in res.output


def test_html_written_atomically(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    res = runner.invoke(app, ["semantics", "--pure", "1", "--html", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.count('class="report-figure"') == 4
    body = text.split("<body>")[1]
    # self-contained: nothing is loaded from elsewhere (links in the references are links)
    assert 'src="http' not in body
    assert "url(http" not in body
    assert "<script" not in body
    assert "Bailie &amp; Gong 2024, Theorem 6.4" in body  # a full reference for the seed
    assert '<li id="ref-inferential">James Bailie, Ruobin Gong.' in body
    assert not list(out.parent.glob(".*tmp"))


def test_the_posterior_sentence_quotes_the_bound_for_any_attacker() -> None:
    """Issue 31: the report said "at most 10.0 % (best bound shown)", quoting the bound
    that holds only for an attacker who knows everyone else. It now quotes the smallest
    bound that holds for any attacker (recomputed here from the rows without an
    assumption) and names the assumption of the other, with its own value."""
    import html

    from privtab.accounting import ZCDP
    from privtab.report.references import Citations

    # private on purpose: the figure's paragraph is the sentence under test
    from privtab.semantics.report import _bayes_figure, pct_up
    from privtab.semantics.summary import POSTERIOR_ROWS, posterior_bounds

    g = ZCDP(2.643)
    rows = {k: float(v[0]) for k, v in posterior_bounds(g, [10.0]).items()
            if k not in ("ratios", "epsilons")}  # fmt: skip
    general = min(rows["arbitrary_prior"], rows["pbdp"])
    assert rows["rest_known"] < 0.2 < general  # the one the sentence used to quote
    text = html.unescape(_bayes_figure(g, Citations()).paragraph)
    assert f"10 times stronger is at most {pct_up(general)}." in text
    assert (
        f"If the attacker already knows every other person's record, the bound is "
        f"{pct_up(rows['rest_known'])}" in text
    )
    assert "best bound shown" not in text
    assert POSTERIOR_ROWS["gaussian_pbdp"].kind == "mechanism"  # never quoted as a bound
