"""The privacy ledger: spending, refusal, reporting."""

from __future__ import annotations

import contextlib
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privtab.accounting import (
    GDP,
    ZCDP,
    ApproxDP,
    BudgetExceededError,
    ExactGuarantee,
    PrivacyLedger,
    PureDP,
    compose,
    zcdp_epsilon,
)
from privtab.accounting.conversions import randomized_response_rdp, rdp_epsilon
from privtab.accounting.curves import geometric_rdp
from privtab.mechanisms import Geometric


def test_ten_exact_tenths_fit_a_budget_of_one() -> None:
    ledger = PrivacyLedger(PureDP(1.0))
    for i in range(10):
        ledger.charge(ExactGuarantee.pure(Fraction(1, 10)), f"query {i}")
    assert ledger.spent_exact == (Fraction(1),)
    assert ledger.spent == PureDP(1.0)
    assert ledger.remaining == PureDP(0.0)
    with pytest.raises(BudgetExceededError, match="query 11"):
        ledger.charge(PureDP(1e-12), "query 11")
    assert len(ledger.entries) == 10


def test_ten_geometric_tenths_are_refused_on_a_budget_of_one() -> None:
    """Geometric(0.1) is ε-DP for the binary value of 0.1 (1/10 + 5.55e-18): ten of them
    exceed ε = 1, so the tenth is refused (shortest-decimal rounding let it through)."""
    ledger = PrivacyLedger(PureDP(1.0))
    mech = Geometric(0.1)
    for i in range(9):
        ledger.charge(mech.guarantee, f"query {i}")
    assert not ledger.can_afford(mech.guarantee)
    with pytest.raises(BudgetExceededError, match=r"query 9.*exact values compared"):
        ledger.charge(mech.guarantee, "query 9")
    assert len(ledger.entries) == 9
    assert ledger.spent_exact == (9 * Fraction(0.1),)
    # the same holds in a zCDP budget: (ε²/2)·10 with the binary ε exceeds 10·(1/10)²/2
    z = PrivacyLedger(ExactGuarantee.zcdp(Fraction(1, 20)))
    for _ in range(9):
        z.charge(mech.guarantee)
    assert not z.can_afford(mech.guarantee)
    exact = PrivacyLedger(ExactGuarantee.zcdp(Fraction(1, 20)))
    for _ in range(10):
        exact.charge(ExactGuarantee.pure(Fraction(1, 10)))
    assert exact.spent_exact == (Fraction(1, 20),)


def test_reported_totals_never_understate() -> None:
    """spent and every charged float are ≥ the exact cost; remaining is ≤ the exact rest."""
    ledger = PrivacyLedger(ZCDP(5.0))
    for x in ("0.1", "0.2", "1/3", "0.7"):
        c = ledger.charge(ExactGuarantee.zcdp(x))
        assert Fraction(c.charged.rho) >= Fraction(x)  # type: ignore[union-attr]
    exact = Fraction(1, 10) + Fraction(2, 10) + Fraction(1, 3) + Fraction(7, 10)
    assert ledger.spent_exact == (exact,)
    assert Fraction(ledger.spent.rho) >= exact  # type: ignore[union-attr]
    assert Fraction(ledger.remaining.rho) <= 5 - exact  # type: ignore[union-attr]
    g = PrivacyLedger(GDP(1.0), adaptive=False)
    g.charge(GDP(0.1))
    assert Fraction(g.spent.mu) ** 2 >= Fraction(0.1) ** 2  # type: ignore[union-attr]
    assert Fraction(g.remaining.mu) ** 2 <= 1 - Fraction(0.1) ** 2  # type: ignore[union-attr]


def test_over_budget_records_nothing() -> None:
    ledger = PrivacyLedger(ZCDP(1.0))
    ledger.charge(ZCDP(0.6), "a")
    with pytest.raises(BudgetExceededError, match="nothing was recorded"):
        ledger.charge(ZCDP(0.5), "b")
    assert [e.label for e in ledger.entries] == ["a"]
    assert ledger.spent == ZCDP(0.6)
    assert ledger.can_afford(ZCDP(0.4))
    assert not ledger.can_afford(ZCDP(0.41))


def test_conversions_into_budget_definition() -> None:
    ledger = PrivacyLedger(ZCDP(1.0))
    ledger.charge(PureDP(1.0), "pure as zcdp")  # eps^2/2 = 0.5
    ledger.charge(GDP(0.5), "gdp as zcdp")  # mu^2/2 = 0.125
    assert ledger.spent.rho == pytest.approx(0.625)  # type: ignore[union-attr]
    assert ledger.epsilon_at(1e-10) == pytest.approx(zcdp_epsilon(0.625, 1e-10))
    with pytest.raises(TypeError, match="cannot be spent"):
        ledger.charge(ApproxDP(0.1, 1e-9))
    pure = PrivacyLedger(PureDP(1.0))
    with pytest.raises(TypeError, match="cannot be spent"):
        pure.charge(ZCDP(0.01))


def test_adaptivity_rules() -> None:
    with pytest.raises(ValueError, match="adaptive=False"):
        PrivacyLedger(GDP(1.0))
    with pytest.raises(ValueError, match="adaptive=False"):
        PrivacyLedger(ApproxDP(1.0, 1e-9), accountant="rdp")
    g = PrivacyLedger(GDP(1.0), adaptive=False)
    g.charge(GDP(0.6))
    assert not g.can_afford(GDP(0.8))  # binary 0.6² + 0.8² exceeds 1 by 1.1e-16
    g.charge(GDP(0.5))
    assert g.remaining.mu == pytest.approx(0.39**0.5)  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="budget"):
        PrivacyLedger(geometric_rdp(1.0))


def test_rdp_accountant_is_tighter_than_basic() -> None:
    budget = ApproxDP(5.0, 1e-9)
    rdp = PrivacyLedger(budget, accountant="rdp", adaptive=False)
    basic = PrivacyLedger(budget)
    n_rdp = n_basic = 0
    while rdp.can_afford(ZCDP(0.05)):
        rdp.charge(ZCDP(0.05))
        n_rdp += 1
    while basic.can_afford(PureDP(0.3)):
        basic.charge(PureDP(0.3))
        n_basic += 1
    assert n_rdp > 0
    assert n_basic == 16
    assert rdp.epsilon_at(1e-9) <= 5.0
    d = rdp.to_dict(delta=1e-9)
    assert d["accountant"] == "rdp"
    assert len(d["charges"]) == n_rdp


def test_approx_budget_basic_composition() -> None:
    ledger = PrivacyLedger(ApproxDP(1.0, 1e-6))
    ledger.charge(ApproxDP(0.5, 5e-7))
    ledger.charge(PureDP(0.5))
    assert ledger.remaining == ApproxDP(0.0, 5e-7)
    with pytest.raises(BudgetExceededError):
        ledger.charge(ApproxDP(0.0, 6e-7))


@given(st.lists(st.floats(min_value=0.0, max_value=0.5, allow_nan=False), max_size=40))
@settings(max_examples=100)
def test_spent_never_exceeds_budget(charges: list[float]) -> None:
    ledger = PrivacyLedger(PureDP(2.0))
    for c in charges:
        with contextlib.suppress(BudgetExceededError):
            ledger.charge(PureDP(c))
    exact = sum((Fraction(e.guarantee.epsilon) for e in ledger.entries), Fraction(0))  # type: ignore[union-attr]
    assert exact <= 2
    assert ledger.spent_exact == (exact,)
    assert ledger.spent.epsilon <= 2.0  # type: ignore[union-attr]


def test_epsilon_at_uses_renyi_composition_when_not_adaptive() -> None:
    """The reported total takes the tightest valid route: for a fixed sequence of 100 pure
    ε = 0.1 charges, composing randomized-response curves beats the sum ε = 10."""
    fixed = PrivacyLedger(PureDP(20.0), adaptive=False)
    adaptive = PrivacyLedger(PureDP(20.0))
    for i in range(100):
        fixed.charge(PureDP(0.1), f"q{i}")
        adaptive.charge(PureDP(0.1), f"q{i}")
    assert adaptive.epsilon_at(1e-10) == pytest.approx(10.0)  # a filter: the sum only
    rdp = rdp_epsilon(compose([randomized_response_rdp(0.1)] * 100), 1e-10)
    assert fixed.epsilon_at(1e-10) == pytest.approx(rdp, rel=1e-12)
    assert 6.0 < fixed.epsilon_at(1e-10) < 7.0
    # δ = 0 leaves only the pure route; budget enforcement is unchanged
    assert fixed.epsilon_at(0.0) == pytest.approx(10.0)
    assert fixed.spent.epsilon == pytest.approx(10.0)  # type: ignore[union-attr]
    # pure charges in a zCDP ledger: never worse than ε²/2 accounting, never worse than Σε
    z = PrivacyLedger(ZCDP(5.0), adaptive=False)
    for _ in range(9):
        z.charge(PureDP(0.4))
    assert z.epsilon_at(1e-10) <= min(zcdp_epsilon(0.72, 1e-10), 3.6 + 1e-6)
