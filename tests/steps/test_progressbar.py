"""The progress bar shows the privacy each chain has spent so far (issue 18 item 3): a column
for every private step, which at a chain's last draw equals (or, for minibatch steps, bounds
from above within rounding of the release count) the chain's cost recomputed from its trace."""

import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.accounting import PrivacyLedger
from pymc_dp.steps.base import shared_warmup_events

Y = np.random.default_rng(0).normal(1.0, 1.0, size=3000)


def _model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        pm.Normal("y", mu, 1.0, observed=Y)
    return model


STEPS = {
    "DPPenalty": lambda: pymc_dp.DPPenalty(eps=10.0, clip_bound=2.0),
    "DPPenalty warm-up": lambda: pymc_dp.DPPenalty(eps=10.0, method="mcmc"),
    "MinibatchDPPenalty": lambda: pymc_dp.MinibatchDPPenalty(
        eps=10.0, batch_size=100, clip_bound=2.0),
    "DPBarker": lambda: pymc_dp.DPBarker(eps=10.0, batch_size=200, method="mcmc"),
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_the_column_shows_each_chains_spending(name, tmp_path, monkeypatch):
    monkeypatch.setenv("PYMC_DP_LEDGER_DIR", str(tmp_path))
    model = _model()
    with model:
        step = STEPS[name]()
        columns, fields = step._progressbar_config(2)
        assert "chain ε (budget 10)" == columns[-1].get_table_column().header
        assert fields["dp_epsilon_spent"] == ["0", "0"]
        idata = pymc_dp.sample(step=step, draws=30, tune=30, chains=2, cores=1,
                               random_seed=3, progressbar=False)
    (update,) = step._make_progressbar_update_functions()
    stats = idata.sample_stats
    for chain in range(2):
        last = {k: stats[k].values[chain, -1].item() for k in stats.data_vars
                if k.startswith("dp_")}
        shown = float(update(last)["dp_epsilon_spent"])
        cost = type(step).cost_from_stats(stats)
        ledger = PrivacyLedger([*cost.chains[chain], *shared_warmup_events(stats)])
        exact = ledger.epsilon(step.delta)
        assert shown >= exact * (1 - 2e-3)  # (shown to 3 digits)
        assert shown <= exact * 1.2 + 1e-9
        assert exact <= step.epsilon


def test_a_run_with_the_progress_bar_shows_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYMC_DP_LEDGER_DIR", str(tmp_path))
    with _model():
        pymc_dp.sample(step=pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0), draws=20, tune=20,
                       chains=1, cores=1, random_seed=0, progressbar=True)
