"""End-to-end tests of ``privtab account`` and the top-level CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from privtab import __version__
from privtab.cli import app

runner = CliRunner()


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_version_and_help() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert __version__ in res.stdout
    res = runner.invoke(app, ["--help"])
    assert "account" in res.stdout


def test_zcdp_json_has_every_method() -> None:
    out = _json(["account", "--zcdp", "2.63", "--delta", "1e-10", "--json"])
    assert set(out["epsilon"]) == {"analytic", "optimal", "grid"}
    assert out["epsilon"]["analytic"] == pytest.approx(18.1938, abs=1e-4)
    assert out["epsilon"]["optimal"] <= out["epsilon"]["grid"] <= out["epsilon"]["analytic"]
    assert out["delta"] == 1e-10
    assert out["input"]["zcdp"] == 2.63


def test_geometric_rdp_json() -> None:
    out = _json(["account", "--rdp-geometric", "0.1", "--compose", "20", "--json"])
    assert {"optimal", "mironov"} <= set(out["epsilon"])
    assert out["epsilon"]["optimal"] <= out["epsilon"]["mironov"]
    assert out["epsilon"]["pure"] == pytest.approx(2.0)


def test_pure_and_gdp_json() -> None:
    assert _json(["account", "--pure", "1", "--group", "2", "--json"])["epsilon"] == {"pure": 2.0}
    gdp = _json(["account", "--gdp", "1", "--compose", "4", "--json"])
    assert set(gdp["epsilon"]) == {"exact"}


def test_errors_are_clear() -> None:
    res = runner.invoke(app, ["account", "--zcdp", "1", "--pure", "1"])
    assert res.exit_code == 2
    assert "exactly one" in res.stderr
    res = runner.invoke(app, ["account", "--zcdp", "-1"])
    assert res.exit_code == 2
    assert "rho must be non-negative" in res.stderr
    res = runner.invoke(app, ["account", "--zcdp", "1", "--delta", "2"])
    assert "--delta" in res.stderr
