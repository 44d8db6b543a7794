"""SIR epidemic parameters from a privatized infection curve, by SMC-ABC.

The synthetic setting of Xiong, Ju & Zhang (section 4.1, appendix E.1.1): a stochastic SIR
epidemic in a closed population of K = 10⁶ people starting from one infected person, over
160 days; the number infected I(t) at L = 10 days (0, 17, …, 153, as the authors' code
records them) is released by their binomial mechanism (Prop 4), s_i ~ Binomial(n, (I(t_i) +
m) / (K + 2m)) with n = m = 1000: ε = nL/m = 10 (one person changes each I(t_i) by at most
1). Ground truth θ* = (β, γ) = (e^−0.5, e^−3), R0 = β/γ ≈ 12.2 (a measles-like outbreak).
Priors, as in the authors' code (the paper's second arguments are variances):
log β ~ N(log 0.4, 0.5), log γ ~ N(log 0.125, 0.2).

By default the observed release is the one the paper publishes (its s_dp^o times n);
``--own-release SEED`` releases instead a curve this script simulates at θ* (an epidemic that
takes off) through ``pymc_dp.mechanisms.infection_curve_release``.

The posterior is SMC-ABC as the paper does it, with the privacy mechanism inside the
simulator: ``smc_abc_model(..., kernel="gaussian")`` builds a ``pm.Simulator`` whose
simulator runs ``--simulations`` stochastic epidemics (midpoint chain binomial with adaptive
steps, ``pymc_dp.testing.epidemics.simulate_sir``), applies the release's own mechanism to each
curve, and compares them with the release through a Gaussian kernel of ``--bandwidth``
counts; ``pm.sample_smc`` samples it. ``--kernel mechanism`` uses the mechanism's density as
the kernel instead (the exact posterior, no bandwidth). ``--ode`` adds the comparator the
issue mentions: the same SMC with the deterministic ODE curve in place of the stochastic
simulator.

The script prints the 95 % intervals of β, γ and R0 and whether they cover θ*.

Run: .venv/bin/python examples/sir_privatized.py        (about 7 CPU-minutes; twice that with --ode)
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import numpy as np
import pymc as pm

from pymc_dp.mechanisms import (
    PrivatizedDataModel,
    Release,
    infection_curve_release,
    ledger_of,
    smc_abc_model,
)
from pymc_dp.testing.epidemics import SIR_RECORD_DAYS, simulate_sir, sir_ode

POPULATION = 1_000_000                    # K
N_TRIALS = 1000                           # n of Prop 4
EPSILON = 10.0                            # ε = n L / m, so m = 1000
LOG_THETA_TRUE = np.array([-0.5, -3.0])   # θ* = (log β, log γ)
PRIOR_MEAN = np.log([0.4, 0.125])
PRIOR_VAR = np.array([0.5, 0.2])          # variances (the authors' code)
#: The paper's published s_dp^o (appendix E.1.1), proportions of the n = 1000 trials.
PAPER_SDP = np.array([0.0010, 0.0310, 0.6140, 0.2630, 0.1230, 0.0470, 0.0180, 0.0090,
                      0.0050, 0.0030])
LAST_DAY = int(SIR_RECORD_DAYS[-1])


def paper_release() -> Release:
    """The paper's published release, loaded as an analyst loads a published release."""
    m = N_TRIALS * SIR_RECORD_DAYS.size / EPSILON
    return Release.from_dict({
        "name": "infection_curve", "kind": "infection_curve",
        "value": np.round(PAPER_SDP * N_TRIALS).tolist(), "epsilon": EPSILON,
        "population": POPULATION, "n_trials": N_TRIALS, "m": m,
    })


def own_release(seed: int, steps: dict) -> Release:
    """A release made here: a simulated epidemic at θ* (one that takes off) through the
    library's infection-curve mechanism, with the paper's n, ε (so m) and K."""
    rng = np.random.default_rng(seed)
    beta, gamma = np.exp(LOG_THETA_TRUE)
    while True:
        curve = simulate_sir(rng, beta, gamma, population=POPULATION, days=LAST_DAY,
                             record_days=SIR_RECORD_DAYS, size=1, **steps)[0]
        if curve.max() > 1000:  # the paper's curve shows an outbreak
            break
    return infection_curve_release(curve, population=POPULATION, n_trials=N_TRIALS,
                                   epsilon=EPSILON, rng=rng, name="infection_curve")


def params():
    """log β and log γ with the authors' priors (variances 0.5 and 0.2)."""
    pm.Normal("log_beta", PRIOR_MEAN[0], np.sqrt(PRIOR_VAR[0]))
    pm.Normal("log_gamma", PRIOR_MEAN[1], np.sqrt(PRIOR_VAR[1]))


def make_simulator(steps: dict, ode: bool = False):
    """``simulator(rng, params, size)`` for :class:`PrivatizedDataModel`: the confidential
    curves I(t_i) of ``size`` epidemics (the mechanism is applied by the route). ``steps``:
    ``{"max_step": h}`` or ``{"steps_per_day": k}`` for :func:`simulate_sir`."""
    def simulator(rng, values, size):
        beta, gamma = np.exp(values["log_beta"]), np.exp(values["log_gamma"])
        if ode:
            curve = sir_ode(beta, gamma, population=POPULATION, days=LAST_DAY)[SIR_RECORD_DAYS]
            return {"infection_curve": np.tile(np.clip(np.round(curve), 0, POPULATION),
                                               (size, 1))}
        curves = simulate_sir(rng, beta, gamma, population=POPULATION, days=LAST_DAY,
                              record_days=SIR_RECORD_DAYS, size=size, **steps)
        return {"infection_curve": curves}
    return simulator


def make_spec(release: Release, steps: dict, ode: bool = False) -> PrivatizedDataModel:
    """The analyst's model: priors, the simulator of confidential curves, the release."""
    return PrivatizedDataModel(params=params, simulator=make_simulator(steps, ode),
                               releases={"infection_curve": release}, n=POPULATION)


def intervals(idata) -> dict[str, tuple[float, float, float]]:
    """Posterior mean and central 95 % interval of β, γ and R0 (all chains pooled)."""
    lb = idata.posterior["log_beta"].values.ravel()
    lg = idata.posterior["log_gamma"].values.ravel()
    out = {}
    for name, x in (("beta", np.exp(lb)), ("gamma", np.exp(lg)), ("R0", np.exp(lb - lg))):
        lo, hi = np.quantile(x, [0.025, 0.975])
        out[name] = (float(np.mean(x)), float(lo), float(hi))
    return out


def run(spec, args, label: str) -> bool:
    kwargs = {"kernel": args.kernel, "simulations": args.simulations}
    if args.kernel == "gaussian":
        kwargs["bandwidth"] = args.bandwidth
    start = time.perf_counter()
    with smc_abc_model(spec, **kwargs):
        idata = pm.sample_smc(args.draws, chains=args.chains, cores=1, progressbar=False,
                              random_seed=args.seed, compute_convergence_checks=False)
    took = time.perf_counter() - start
    stages = idata.sample_stats["beta"].size // args.chains  # PyMC keeps one per stage
    unique = len({tuple(p) for p in np.column_stack([
        idata.posterior[v].values.ravel() for v in ("log_beta", "log_gamma")])})
    beta, gamma = np.exp(LOG_THETA_TRUE)
    truth = {"beta": beta, "gamma": gamma, "R0": beta / gamma}
    print(f"\n{label}: {args.chains} chains x {args.draws} particles ({unique} distinct at "
          f"the end), {stages} stages, {took:.0f} s")
    print(f"  {'':6s}{'truth':>9s}{'mean':>9s}{'2.5%':>9s}{'97.5%':>9s}  covered")
    all_covered = True
    for name, (mean, lo, hi) in intervals(idata).items():
        covered = lo <= truth[name] <= hi
        all_covered &= covered
        print(f"  {name:6s}{truth[name]:9.4f}{mean:9.4f}{lo:9.4f}{hi:9.4f}  {covered}")
    return all_covered


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200, help="SMC particles per chain")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--simulations", type=int, default=50,
                        help="epidemics simulated per likelihood evaluation")
    parser.add_argument("--kernel", choices=("gaussian", "mechanism"), default="gaussian")
    parser.add_argument("--bandwidth", type=float, default=3.0,
                        help="Gaussian ABC kernel sd, in released counts (of n = 1000)")
    parser.add_argument("--max-step", type=float, default=0.25,
                        help="adaptive chain-binomial steps: largest rate x step length")
    parser.add_argument("--steps-per-day", type=int, default=None,
                        help="fixed steps instead of adaptive ones")
    parser.add_argument("--own-release", type=int, default=None, metavar="SEED")
    parser.add_argument("--ode", action="store_true",
                        help="also run the deterministic-ODE comparator")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)

    steps = ({"max_step": args.max_step} if args.steps_per_day is None
             else {"steps_per_day": args.steps_per_day})
    if args.own_release is None:
        release, source = paper_release(), "the paper's published s_dp^o"
    else:
        release = own_release(args.own_release, steps)
        source = f"a release made here (seed {args.own_release})"
    print(f"Release: {source}; K = {release.population:.0f}, n = {release.n_trials}, "
          f"m = {release.m:g}, L = {release.value.size}: ε = "
          f"{ledger_of(release).epsilon(0.0):g}")
    print(f"  counts s_i: {release.value.astype(int).tolist()}")
    kernel = (f"Gaussian kernel, bandwidth {args.bandwidth:g} counts" if args.kernel == "gaussian"
              else "mechanism density as kernel (exact)")
    stepping = (f"adaptive steps (max_step {args.max_step:g})" if args.steps_per_day is None
                else f"{args.steps_per_day} steps a day")
    print(f"SMC-ABC: {kernel}; {args.simulations} epidemics per evaluation, chain binomial "
          f"with {stepping}")
    ok = run(make_spec(release, steps), args, "Stochastic SIR simulator")
    if args.ode:
        run(make_spec(release, steps, ode=True), args,
            "Comparator: deterministic ODE curve, mechanism noise only")
    print(f"\nAll three 95 % intervals of the stochastic model cover θ*: {ok}")


if __name__ == "__main__":
    main()
