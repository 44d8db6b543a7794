import multiprocessing as mp
import os

import pytest

from pymc_dp.accounting import GaussianEvent, gaussian_epsilon, max_iterations
from pymc_dp.accounting.guard import BudgetGuard
from pymc_dp.errors import PrivacyBudgetExceeded

EPS, DELTA, Z = 1.0, 1e-5, 20.0
ONE = GaussianEvent(name="ratio", count=10, noise_multiplier=Z)


def _try_reserve(args):
    guard, attempts = args
    ok = 0
    for _ in range(attempts):
        try:
            guard.reserve([ONE])
            ok += 1
        except PrivacyBudgetExceeded:
            pass
    return ok


def test_reservations_stop_exactly_at_the_budget(tmp_path):
    guard = BudgetGuard(EPS, DELTA, ledger_dir=tmp_path)
    fits = max_iterations(EPS, DELTA, ONE.mu)
    for _ in range(fits):
        guard.reserve([ONE], chain="x")
    with pytest.raises(PrivacyBudgetExceeded, match="No data was read"):
        guard.reserve([ONE])
    assert len(guard.reservations()) == fits
    assert guard.spent().epsilon(DELTA) <= EPS
    assert gaussian_epsilon((fits + 1) * ONE.mu, DELTA) > EPS


def test_concurrent_processes_never_overspend(tmp_path):
    guard = BudgetGuard(EPS, DELTA, ledger_dir=tmp_path)
    fits = max_iterations(EPS, DELTA, ONE.mu)
    with mp.get_context("fork").Pool(4) as pool:
        granted = sum(pool.map(_try_reserve, [(guard, fits)] * 4))
    assert granted == fits
    assert guard.spent().epsilon(DELTA) <= EPS


def test_a_lost_ledger_refuses_to_guess(tmp_path):
    guard = BudgetGuard(EPS, DELTA, ledger_dir=tmp_path)
    os.remove(guard.path)
    with pytest.raises(PrivacyBudgetExceeded, match="missing"):
        guard.reserve([ONE])


def test_a_cost_that_is_not_a_number_is_refused(tmp_path, monkeypatch):
    # `cost > ε` is False for NaN: the guard compares so that a cost it could not compute
    # never counts as one that fits.
    from pymc_dp.accounting.ledger import PrivacyLedger

    guard = BudgetGuard(EPS, DELTA, ledger_dir=tmp_path)
    monkeypatch.setattr(PrivacyLedger, "epsilon", lambda self, delta: float("nan"))
    with pytest.raises(PrivacyBudgetExceeded, match="No data was read"):
        guard.reserve([ONE])
    assert guard.reservations() == []
