"""pymc_dp.plots (issue 18 item 2): what each picture draws is the released numbers — the
chains' ε by draw, each release's own ε and their composition, ε against utility — and the
module asks for its extra when matplotlib is missing."""

import os
import re
import subprocess
import sys

from pathlib import Path

import numpy as np
import pymc as pm
import pytest

import matplotlib  # (the test extra installs it: no silent skip)

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import pymc_dp  # noqa: E402

from pymc_dp.accounting import Budget, LaplaceEvent, PrivacyLedger  # noqa: E402
from pymc_dp.plots import plot_budget_spent, plot_ledger, plot_privacy_utility  # noqa: E402
from pymc_dp.results import epsilon_by_draw, privacy_utility  # noqa: E402
from pymc_dp.steps.base import shared_warmup_events  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False, random_seed=4)
Y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)


def _model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        pm.Normal("y", mu, 1.0, observed=Y)
    return model


@pytest.fixture(scope="module")
def runs():
    """Two runs of the conjugate normal model at ε = 2 and 4 (a warm-up the chains share,
    2 chains each) and a non-private reference."""
    found = {}
    for eps in (2.0, 4.0):
        with _model():
            step = pymc_dp.DPPenalty(eps=eps, clip_bound=2.0)
            found[eps] = (pymc_dp.sample(step=step, draws=20, tune=10, chains=2, **SAMPLE), step)
    with _model():
        reference = pm.sample(draws=200, tune=200, chains=2, **SAMPLE)
    return found, reference


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_budget_plot_draws_each_chains_epsilon_by_iteration(runs):
    idata, step = runs[0][2.0]
    ax = plot_budget_spent(idata)
    spent = epsilon_by_draw(idata)
    lines = {line.get_label(): line for line in ax.get_lines()}
    report = pymc_dp.privacy_report(idata)
    stats = idata.sample_stats
    cost = type(step).cost_from_stats(stats)
    for chain in (0, 1):
        line = lines[f"chain {chain}"]
        np.testing.assert_array_equal(line.get_xdata(), spent["iteration"].values)
        np.testing.assert_array_equal(line.get_ydata(), spent.values[chain])
        assert line.get_xdata()[0] == 11 and line.get_xdata()[-1] == 30  # tuning included
        # ends at the chain's cost recomputed from the trace (its share of the warm-up too)
        chain_cost = PrivacyLedger([*cost.chains[chain], *shared_warmup_events(stats)])
        assert line.get_ydata()[-1] == pytest.approx(chain_cost.epsilon(step.delta), rel=1e-9)
    warmup = report.details["shared_warmup"][0]["epsilon"]  # paid before iteration 1
    assert list(lines[f"warm-up the chains share ε = {warmup:.3g}"].get_xydata()[0]) == [0, warmup]
    assert lines["budget ε = 2"].get_ydata()[0] == 2.0
    composed = lines["all chains composed ε = 2"].get_ydata()[0]
    assert composed == pytest.approx(report.epsilon, rel=1e-12)
    assert max(lines["chain 0"].get_ydata()) < composed <= 2.0 * (1 + 1e-9)
    assert "δ = " in ax.get_ylabel() and "tuning" in ax.get_xlabel()


def test_budget_plot_draws_on_the_axes_given_with_the_budget_given(runs):
    idata, _ = runs[0][4.0]
    fig, ax = plt.subplots()
    assert plot_budget_spent(idata, budget=5.0, points=3, ax=ax) is ax
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert len(lines["chain 0"].get_xdata()) == 3
    assert lines["budget ε = 5"].get_ydata()[0] == 5.0
    fig.savefig(os.devnull, format="png")  # it renders


def test_ledger_chart_bars_are_each_releases_own_epsilon_and_the_line_their_composition(runs):
    idata, _ = runs[0][2.0]
    report = pymc_dp.privacy_report(idata)
    ax = plot_ledger(report)
    rows = report.releases()
    heights = [bar.get_height() for bar in ax.patches]
    assert heights == [r["epsilon"] for r in rows]
    assert [t.get_text() for t in ax.get_xticklabels()] == [r["label"] for r in rows]
    composed = ax.get_lines()[0]
    assert composed.get_ydata()[-1] == pytest.approx(report.epsilon, rel=1e-9)
    assert report.epsilon < sum(heights)  # composed, not added: the chart does not stack them
    budget = [line for line in ax.get_lines() if line.get_label() == "budget ε = 2"]
    assert budget and budget[0].get_ydata()[0] == 2.0
    # the same from the result itself
    again = plot_ledger(idata)
    assert [bar.get_height() for bar in again.patches] == heights


def test_ledger_chart_of_a_budget(tmp_path):
    budget = Budget("plots", epsilon=3.0, delta=1e-4, store=str(tmp_path / "b.db"), create=True)
    budget.reserve([LaplaceEvent(name="count", epsilon=0.5)], owner="a count")
    with _model():
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, budget=budget)
        pymc_dp.sample(step=step, draws=10, tune=5, chains=2, **SAMPLE)
    ax = plot_ledger(budget)
    report = pymc_dp.privacy_report(budget)
    assert [bar.get_height() for bar in ax.patches] == [
        r["epsilon"] for r in report.details["releases"]]
    assert ax.get_lines()[0].get_ydata()[-1] == pytest.approx(report.epsilon, rel=1e-9)
    colours = {tuple(bar.get_facecolor()) for bar in ax.patches}
    assert len(colours) == 3  # other release, warm-up, chains


def test_a_report_recomputed_from_a_trace_has_no_ledger_chart():
    with _model() as model:
        step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, warmup=False, scaling=0.02, chains=1)
        trace = pm.sample(draws=10, tune=5, chains=1, step=step, **SAMPLE)
    released = pymc_dp.release(trace, model=model)
    with pytest.raises(ValueError, match="no release with its own cost"):
        plot_ledger(released)
    ax = plot_budget_spent(released)  # its spending by draw is still there
    assert ax.get_lines()[0].get_ydata()[-1] == pytest.approx(
        pymc_dp.privacy_report(released).epsilon, rel=1e-9)


def test_privacy_utility_curve_draws_the_table(runs):
    found, reference = runs
    results = {f"run {eps}": idata for eps, (idata, _) in found.items()}
    ax = plot_privacy_utility(results, reference)
    table = privacy_utility(results, reference)
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), table["epsilon"].values)
    np.testing.assert_allclose(line.get_xdata(), [2.0, 4.0], rtol=1e-6)
    np.testing.assert_array_equal(line.get_ydata(), table["distance"].max("parameter").values)
    assert ax.get_xscale() == "log" and "reference sd" in ax.get_ylabel()
    # from the table, without a reference: widths, averaged
    widths = privacy_utility(results)
    ax = plot_privacy_utility(widths, combine="mean")
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(),
                                  widths["width"].mean("parameter").values)
    with pytest.raises(ValueError, match="combine"):
        plot_privacy_utility(widths, combine="sum")
    with pytest.raises(ValueError, match="already|were used"):
        plot_privacy_utility(widths, reference)


def test_without_matplotlib_the_import_names_the_extra():
    code = ("import sys\nsys.modules['matplotlib'] = None\n"
            "import pymc_dp.results\n"  # the numbers need no matplotlib
            "try:\n    import pymc_dp.plots\nexcept ImportError as e:\n    print(e)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                 "")])}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "pip install 'pymc_dp[plots]'" in run.stdout


def test_the_docs_page_runs_as_written(tmp_path, monkeypatch):
    # (the site build executes it too, tests/test_docs_site.py; this is the fast check)
    page = (ROOT / "docs" / "plots.md").read_text()
    cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", page, re.S)
    assert len(cells) == 4
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYMC_DP_LEDGER_DIR", str(tmp_path))
    plt.close("all")
    namespace = {}
    for cell in cells:
        exec(compile(cell, "docs/plots.md", "exec"), namespace)
    assert len(plt.get_fignums()) == 3  # one chart per section
    plt.close("all")
