"""DPHMC: cost per iteration against pm.HamiltonianMC, and MMD on the thesis' models.

Three parts, public API only (``pymc_dp.DPHMC``, ``pymc_dp.sample``,
``pymc_dp.testing.benchmark_models``, ``pymc_dp.testing.evaluation.mmd``):

``speed``
    Seconds of one DPHMC iteration over seconds of one ``pm.HamiltonianMC`` iteration with
    the same number L of leapfrog steps (``pm.HamiltonianMC`` with ``path_length`` set to
    give exactly L steps, no step-size jitter, no tuning), one chain on one core, n = 10⁵,
    on the models below. Compilation and fixed costs are removed
    by differencing a short and a long run in the same process; the process CPU time is
    the primary measure (the machine is shared), the minimum over ``--repeats`` interleaved
    repetitions and the median are reported. Target: ratio ≤ 2.

    Models: the flat banana at d = 2 and d = 10, where every datum is a d-vector compared
    with a d-vector of parameters, and a logistic regression with d = 10 coefficients (one
    binary outcome and 10 covariates per person, the coefficients entering through
    ``X @ β``: the common shape of a private analysis). DPHMC needs every datum's gradient
    on its own (to clip it); :meth:`pymc_dp.model.PrivateModel.clipped_gradient` gets them
    (:mod:`pymc_dp.model.per_datum_gradients`) either by one forward-mode pass per coordinate,
    fused into one loop over the data, or by one reverse pass through per-row copies of the
    parameter tensors that meet the data, used only where :mod:`pymc_dp.model.row_locality`
    proves from the graph that it keeps rows apart. The banana gets reverse mode: forward
    mode would cost a whole (n, d) sweep per coordinate, O(n·d²) against O(n·d). The
    regression gets forward mode, where each pass costs about one column of X. The line
    of each model says which one DPHMC chose; ``--gradients forward`` forces forward mode.

    On 2026-11-26 (``speed --dims 10 --no-regression``, CPU min / median of 5 repeats), with
    every datum's gradient taken in the warm-up's metric (a d×d basis, since the private
    warm-up exists): banana d = 10 4.42 / 4.37 in reverse mode (its d columns combined with
    the basis, d² products a row) and 2.09 / 1.85 with ``--gradients forward`` (products
    along the basis' columns). Since the later 2026-11-26 commit that forms reverse mode's
    rows above d = 6 as one (n, d) matrix product: 1.48 / 1.81 with ``OMP_NUM_THREADS=1``, and
    0.82 / 3.12 with BLAS on both cores (its repeats ranged from 8.5 to 151 ms an iteration:
    the matrix's memory is handed out afresh by glibc on some calls and not on others; two of
    the five single-thread repeats took 90 ms against 19–24). The figures below are from
    before the basis.

    Run to completion on a quiet machine (CPU, min / median of 5 repeats): banana d = 2
    1.05 / 0.97, banana d = 10 1.82 / 1.56, regression d = 10 0.67 / 0.66; an earlier run
    gave 1.19 / 0.96, 1.62 / 1.55 and 0.68 / 0.68 (the min ratio moves with single fast
    ``pm.HamiltonianMC`` repeats; the median is steadier). Forward mode alone misses the
    target at d = 10: with ``--gradients forward`` the banana at d = 10 gave 2.72 / 2.47 (on
    a less quiet machine; 2.63 / 2.40 before reverse mode existed).

    Tried for the banana at d = 10 and not kept, each slower than forward mode when
    measured with throwaway scripts (not in the repository, so no figures here): reverse
    mode with a dense (n, p)·(p, d) product of the per-row partials and the parameters'
    Jacobian (it materialises several (n, d) arrays; reverse mode now uses only the
    Jacobian's nonzero entries), ``vectorize_graph`` of a one-row reverse gradient,
    Fortran-ordered data; divisions replaced by products changed nothing. Per-gradient
    costs of the two kept constructions: ``per_datum_gradients.py``.

``banana``
    The thesis' flat 2-d banana (Table 5.1: n = 10⁵, a = 20, σ0² = 1000; δ = 0.1/n) at
    ε = 1, 2, 4, 6, 20 chains per ε, each its own release (a fresh DPHMC with the full
    (ε, δ) and ``chains=1``), the thesis' starting points (5.4), the second half of each
    chain against 1000 exact posterior draws, MMD with the median-heuristic Gaussian kernel
    (5.5); Fig 6.3 draws the 20 per-chain MMDs of each ε as a box plot, so the value read
    off it is the median over chains, which is what the target is compared with (mean ± sd
    and max are printed too). A 20-chain median scatters by a few hundredths from run to
    run; ``--chains 100`` estimates it more tightly. Settings of the thesis' experiment for
    this model and algorithm: τ_l = 0.1, τ_g = 0.4 (noise multipliers z = τ√n), L = 10,
    η = 0.0005, unit mass, log-likelihood clip 2 (per unit distance), gradient clip 1, no
    adaptation. As in
    ``dp_penalty_banana.py`` the run length is what the budget allows at that noise,
    K(ε) = the largest k with μ = (kL + 1)/(2 z_g²) + k/(2 z_l²) within (ε, δ) (thesis
    Theorem 12); DPHMC is then given (ε, δ), K and the budget split that reproduces τ_g/τ_l,
    and calibrates its noise to land on z ≈ τ√n. Target (thesis Fig. 6.3, HMC, read from the
    figure's drawing by ``benchmarks/thesis_figures.py``): median 0.478 at ε = 1 falling to
    0.163 at ε = 6.

    Three configurations (``--config``): ``thesis`` as above, ``defaults`` (only ε:
    ``DPHMC(eps=ε, chains=1)`` under ``pymc_dp.sample``'s own length, start and settings;
    figures below), and ``tuned``, one set for every
    ε tuned on this benchmark at ε = 4 as the thesis tuned (and as ``dp_penalty_banana.py``
    does): the same noise (τ_l = 0.1, τ_g = 0.4) and clips, L = 5, η = 0.0015. Scan at
    ε = 4, 40 chains (same data, starts and reference; median MMD): thesis 0.268; η = 0.001
    0.209; log-likelihood clip 1.5 0.244; gradient clip 2 0.259; L = 5, η = 0.001 0.184;
    L = 5, η = 0.001, log-likelihood clip 1.5 0.185; L = 5, η = 0.0015 0.170 (chosen);
    L = 3, η = 0.001 0.298; τ doubled (τ_l = 0.2, τ_g = 0.8: 4× the iterations, 2× the
    noise) 0.175. Fewer leapfrog steps per iteration leave budget for more iterations
    (K = 42, 153, 534, 1090 at ε = 1, 2, 4, 6 instead of 34, 123, 431, 880), and longer
    steps move further per release.

    Run to completion with ``--chains 100`` (data seed 0), medians at ε = 1 / 2 / 4 / 6:
    ``thesis`` 0.472 / 0.354 / 0.247 / 0.159 (means 0.497 / 0.383 / 0.268 / 0.186), on the
    thesis' line; ``tuned`` 0.438 / 0.316 / 0.183 / 0.129 (means 0.461 / 0.348 / 0.191 /
    0.145), below it at ε = 1 and ε = 6. With 20 chains the ``thesis`` medians were
    0.454 / 0.440 / 0.260 / 0.136: a 20-chain median moves by a few hundredths. (These runs
    predate reverse-mode gradients; with one seed the two modes give the same draws to
    about 1e-15: ``test_the_gradient_method_does_not_change_the_chain`` in
    ``tests/steps/test_dp_hmc.py``.)

    ``--config defaults`` with 20 chains (2026-11-26, code of commit ba9aa8f; the later
    changes decide only between MCMC and the approximation, and do not change it here),
    medians at ε = 1 / 2 / 4 / 6: 0.168 / 0.087 / 0.066 / 0.060. The draws come from the
    private Laplace approximation on the likelihood's own parameters (the banana's shape:
    see ``dp_penalty_banana.py``), below ``tuned`` and the thesis' line. Before
    ``method="auto"`` asked whether a chain of its length could make the draws its budget
    buys, it ran MCMC at ε = 6 (157 iterations, acceptance 0.71): 0.307 (code of a1941d6).

``gauss``
    The thesis' correlated 2-d Gaussian (ρ = 0.999, n = 2·10⁵, σ0² = 100) with the thesis'
    settings for it: τ_l = 0.05, τ_g = 0.2, L = 8, η = 7·10⁻⁵, log-likelihood clip 30,
    gradient clip 29; same protocol as ``banana``. With ``--compare-penalty`` it also runs
    ``DPPenalty`` with the thesis' settings for this model (one-component guided walk,
    proposal sd 0.0002, clip bound 45, τ = 0.1, i.e. as many iterations as the budget
    allows at z = τ√n), since the thesis found DP HMC clearly best on this model. Run to
    completion with 20 chains, median MMD at ε = 1 / 2 / 4 / 6: DPHMC 0.690 / 0.624 / 0.531 /
    0.444, DPPenalty 0.706 / 0.671 / 0.643 / 0.500: DPHMC lower at every ε, by less than
    "clearly" (20-chain sds 0.09–0.18).

Usage::

    python benchmarks/dp_hmc.py [speed] [banana] [gauss] [--quick] [--chains 20]
                                [--dims 2 10] [--regression-dim 10] [--no-regression]
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
import statistics
import sys
import time
import types
import warnings

import numpy as np
import pymc as pm

import pymc_dp

try:
    from pymc_dp import DPHMC
except ImportError:  # until the package exports it
    from pymc_dp.steps.dp_hmc import DPHMC
from pymc_dp.accounting import max_iterations
from pymc_dp.testing.benchmark_models import banana, correlated_gaussian
from pymc_dp.testing.evaluation import mmd
from thesis_figures import EPSILONS, FIG_6_3_MMD

#: DP HMC medians of thesis Fig. 6.3, flat banana d = 2 (benchmarks/thesis_figures.py).
THESIS_FIG_6_3_HMC = {eps: FIG_6_3_MMD[("d = 2, non-tempered", "DP HMC", eps)] for eps in EPSILONS}

#: Settings for the flat banana: the thesis' published ones, and one set for every ε tuned
#: on this benchmark at ε = 4 (as the thesis tuned, and as dp_penalty_banana.py's "tuned").
BANANA_CONFIGS = {
    "thesis": dict(tau_l=0.1, tau_g=0.4, n_steps=10, step_size=5e-4, loglik_clip=2.0, grad_clip=1.0),
    "tuned": dict(tau_l=0.1, tau_g=0.4, n_steps=5, step_size=1.5e-3, loglik_clip=2.0, grad_clip=1.0),
    # only ε: DPHMC(eps=ε, chains=1) under pymc_dp.sample's own length and start (issue 13)
    "defaults": dict(defaults=True),
}
BANANA_SETTINGS = BANANA_CONFIGS["thesis"]
GAUSS_SETTINGS = dict(tau_l=0.05, tau_g=0.2, n_steps=8, step_size=7e-5, loglik_clip=30.0, grad_clip=29.0)

SAMPLE = dict(progressbar=False, compute_convergence_checks=False)


# ---------------------------------------------------------------------- speed
def _clock():
    return np.array([time.process_time(), time.perf_counter()])


def _time_hmc(bm, draws, seed, n_steps, step_size):
    with bm.model:
        step = pm.HamiltonianMC(
            path_length=(n_steps + 0.5) * step_size,  # int(path / step) = n_steps exactly
            step_scale=step_size * bm.dim**0.25,  # PyMC divides by dim^(1/4)
            step_rand=None,
            adapt_step_size=False,
        )
        start = _clock()
        idata = pm.sample(
            draws=draws, tune=0, chains=1, cores=1, step=step, random_seed=seed,
            initvals={"theta": bm.true_theta}, **SAMPLE,
        )
        elapsed = _clock() - start
    steps = np.unique(idata.sample_stats["n_steps"].values)
    assert steps.tolist() == [n_steps], steps
    return elapsed


def _time_dphmc(bm, draws, seed, n_steps, step_size, gradients="auto", used=None):
    with bm.model:
        step = DPHMC(
            eps=1e3, grad_clip=1.0, loglik_clip=2.0, n_steps=n_steps, step_size=step_size,
            adapt_step_size=False, chains=1, initial_point={"theta": bm.true_theta},
        )
        if gradients != "auto":
            step.private_model.compile_gradients(gradients)
        if used is not None:
            used.add(step.private_model.gradient_method)
        start = _clock()
        pymc_dp.sample(
            step=step, draws=draws, tune=0, chains=1, cores=1, random_seed=seed,
            initvals={"theta": bm.true_theta}, **SAMPLE,
        )
        return _clock() - start


def logistic_regression(n, d, seed):
    """A private logistic regression with d coefficients: one binary outcome per person.

    The shape of most DP analyses (and of ``examples/quickstart.py``): per-person covariates
    in ``pm.Data``, the coefficients entering through ``X @ β``. Returned in the shape the
    speed functions read from a :class:`~pymc_dp.testing.benchmark_models.BenchmarkModel`.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    beta = rng.normal(0.0, 0.5, size=d)
    y = rng.random(n) < 1 / (1 + np.exp(-(X @ beta)))
    with pm.Model() as model:
        Xd = pm.Data("X", X)
        theta = pm.Normal("theta", 0.0, 2.0, shape=d)
        pm.Bernoulli("y", logit_p=Xd @ theta, observed=y.astype("int64"))
    return types.SimpleNamespace(model=model, dim=d, n=n, true_theta=beta)


def speed_cases(args):
    """(label, model) pairs of the speed benchmark."""
    cases = [(f"flat banana d={d}", banana(n=args.n, d=d, seed=args.seed)) for d in args.dims]
    if not args.no_regression:
        cases.append((f"logistic regression d={args.regression_dim}",
                       logistic_regression(args.n, args.regression_dim, args.seed)))
    return cases


def run_speed(args):
    rows = []
    for label, bm in speed_cases(args):
        L, eta = args.n_steps, 1e-4
        per_iter = {"HamiltonianMC": [], "DPHMC": []}
        used = set()
        dphmc = functools.partial(_time_dphmc, gradients=args.gradients, used=used)
        _time_hmc(bm, 5, args.seed, L, eta)  # warm-up: compilation and one-off costs
        dphmc(bm, 5, args.seed, L, eta)
        for r in range(args.repeats):
            seed = args.seed + 1 + r
            for name, fn in (("HamiltonianMC", _time_hmc), ("DPHMC", dphmc)):
                t_short = fn(bm, args.short, seed, L, eta)
                t_long = fn(bm, args.long, seed, L, eta)
                if np.any(t_long <= t_short):
                    print(f"  warning: {name} repeat {r}: the long run was not slower than the "
                          "short one (a busy machine); this repeat is unreliable", flush=True)
                per_iter[name].append((t_long - t_short) / (args.long - args.short))
        print(f"{label}, n={bm.n}, L={L} leapfrog steps; one chain, one core; draws "
              f"{args.short} vs {args.long}, {args.repeats} repeats; DPHMC's per-datum "
              f"gradients: {', '.join(sorted(used))} mode")
        summary = {}
        for name, values in per_iter.items():
            cpu = [1e3 * v[0] for v in values]
            wall = [1e3 * v[1] for v in values]
            summary[name] = (min(cpu), statistics.median(cpu), min(wall), statistics.median(wall))
            print(f"  {name:>13}: CPU ms/iteration min {min(cpu):.3f} median "
                  f"{statistics.median(cpu):.3f}; wall min {min(wall):.3f} median "
                  f"{statistics.median(wall):.3f}  (CPU repeats: "
                  f"{', '.join(f'{v:.2f}' for v in cpu)})")
        h, p = summary["HamiltonianMC"], summary["DPHMC"]
        print(f"  ratio DPHMC / HamiltonianMC (CPU, min)    = {p[0] / h[0]:.3f}  (target <= 2)")
        print(f"  ratio DPHMC / HamiltonianMC (CPU, median) = {p[1] / h[1]:.3f}")
        print(f"  ratio DPHMC / HamiltonianMC (wall, min)   = {p[2] / h[2]:.3f}", flush=True)
        rows.append((label, p[0] / h[0], p[1] / h[1]))
    return rows


# ---------------------------------------------------------------------- MMD
def thesis_iterations(eps, delta, n, tau_l, tau_g, n_steps):
    """K(ε): iterations a DP HMC chain may run at z = τ√n (Theorem 12, cached start gradient)."""
    z_g, z_l = tau_g * math.sqrt(n), tau_l * math.sqrt(n)
    per = n_steps / (2 * z_g**2) + 1 / (2 * z_l**2)
    return max_iterations(eps, delta, per, mu_initial=1 / (2 * z_g**2))


def split_for(K, n_steps, tau_l, tau_g):
    """The budget split that makes DPHMC's calibration land on the ratio τ_g / τ_l."""
    grad = (K * n_steps + 1) / tau_g**2
    ratio = K / tau_l**2
    return grad / (grad + ratio)


def run_mmd(bm, settings, eps_list, args, label, thesis=None):
    delta = 0.1 / bm.n
    rng = np.random.default_rng(args.seed + 1)
    reference = bm.posterior_draws(args.reference, rng)
    starts = bm.start_points(args.chains, rng=args.seed + 2)
    s = settings
    defaults = bool(s.get("defaults"))
    chosen = ("only eps given: the library's own settings, length and start" if defaults else
              f"tau_l {s['tau_l']}, tau_g {s['tau_g']}, L {s['n_steps']}, step size "
              f"{s['step_size']}, loglik clip {s['loglik_clip']}, grad clip {s['grad_clip']}, "
              f"tune {args.tune}")
    print(f"{label}: n={bm.n}, delta = 0.1/n = {delta:.1e}; {chosen}; {args.chains} chains per "
          f"eps, each its own (eps, delta) release; reference {args.reference} exact draws",
          flush=True)
    t_start = time.perf_counter()
    rows = []
    for eps in eps_list:
        if not defaults:
            K = thesis_iterations(eps, delta, bm.n, s["tau_l"], s["tau_g"], s["n_steps"])
            split = split_for(K, s["n_steps"], s["tau_l"], s["tau_g"])
            tune = min(args.tune, K - 1)
        mmds, acc, zg, zl, spent = [], [], [], [], []
        for c in range(args.chains):
            seed = int(1_000_003 * (args.seed + 1) + 7919 * int(round(eps * 100)) + c)
            with bm.model:
                if defaults:
                    step = DPHMC(eps=eps, chains=1)
                    idata = pymc_dp.sample(step=step, chains=1, cores=1, random_seed=seed, **SAMPLE)
                else:
                    step = DPHMC(
                        eps=eps, grad_clip=s["grad_clip"], loglik_clip=s["loglik_clip"],
                        n_steps=s["n_steps"], step_size=s["step_size"], budget_split=split,
                        adapt_step_size=tune > 0, chains=1,
                        initial_point={bm.var_name: starts[c]},
                        warmup=False,  # the thesis' protocol: its settings and start
                    )
                    idata = pymc_dp.sample(
                        step=step, draws=K - tune, tune=tune, chains=1, cores=1,
                        random_seed=seed, initvals={bm.var_name: starts[c]}, **SAMPLE,
                    )
            draws = bm.theta_draws(idata)[0]
            if defaults:  # (the library's own length)
                K, tune = draws.shape[0], 0
            half = draws[draws.shape[0] // 2:]
            mmds.append(mmd(half, reference, rng=np.random.default_rng(seed)))
            st = idata.sample_stats
            acc.append(float(np.mean(st["accepted"].values)))
            # (NaN where the draws come from the private Laplace approximation: no MCMC noise)
            for out, key in ((zg, "grad_noise_multiplier"), (zl, "loglik_noise_multiplier")):
                out.append(float(st[key].values.ravel()[-1]) if key in st else float("nan"))
            spent.append((float(idata.attrs["dp_epsilon"]), float(idata.attrs["dp_delta"])))
        n_draws = K - tune
        half_len = n_draws - n_draws // 2
        brng = np.random.default_rng(args.seed + 4)
        base = [mmd(bm.posterior_draws(half_len, brng), reference, rng=brng) for _ in range(10)]
        rows.append(dict(
            eps=eps, K=K, mmd=(np.mean(mmds), np.std(mmds)), median=np.median(mmds),
            max=np.max(mmds), exact=np.mean(base), acc=np.mean(acc), zg=np.mean(zg),
            zl=np.mean(zl), eps_spent=max(e for e, _ in spent),
            delta_spent=max(d for _, d in spent),
            thesis=None if thesis is None else thesis.get(eps),
        ))
        print(f"  eps={eps:g}: K={K}, done ({time.perf_counter() - t_start:.0f}s elapsed)", flush=True)
    print(f"{'eps':>4} {'iters':>6} {'z_g':>7} {'z_l':>7} {'accept':>7} {'MMD mean ± sd':>15} "
          f"{'median':>7} {'max':>7} {'exact':>7} {'thesis':>7} {'spent (eps, delta)':>20}")
    for r in rows:
        th = f"{r['thesis']:.3f}" if r["thesis"] is not None else "-"
        print(f"{r['eps']:>4g} {r['K']:>6d} {r['zg']:>7.2f} {r['zl']:>7.2f} {r['acc']:>7.3f} "
              f"{r['mmd'][0]:>7.3f} ± {r['mmd'][1]:<5.3f} {r['median']:>7.3f} {r['max']:>7.3f} "
              f"{r['exact']:>7.3f} {th:>7} {f"({r['eps_spent']:.3g}, {r['delta_spent']:.2g})":>20}")
    for r in rows:
        if r["thesis"] is not None:
            verdict = "<=" if r["median"] <= r["thesis"] else ">"
            print(f"  eps={r['eps']:g}: median MMD {r['median']:.3f} {verdict} thesis Fig 6.3 "
                  f"{r['thesis']:.3f}")
    print(f"(MMD: mean ± sd and median over {args.chains} chains; Fig 6.3 draws box plots, so "
          f"its values are medians; exact: MMD of exact samples of a chain's second-half size; "
          f"{time.perf_counter() - t_start:.0f}s)\n", flush=True)
    return rows


def run_penalty(bm, eps_list, args, label, tau=0.1, scaling=2e-4, clip_bound=45.0):
    """DPPenalty (guided one-component walk) with the thesis' settings, same protocol."""
    delta = 0.1 / bm.n
    rng = np.random.default_rng(args.seed + 1)
    reference = bm.posterior_draws(args.reference, rng)
    starts = bm.start_points(args.chains, rng=args.seed + 2)
    z = tau * math.sqrt(bm.n)
    print(f"{label}, DPPenalty (guided, proposal sd {scaling}, clip {clip_bound}, tau {tau}); "
          f"{args.chains} chains per eps", flush=True)
    print(f"{'eps':>4} {'iters':>6} {'accept':>7} {'MMD mean ± sd':>15} {'median':>7}")
    for eps in eps_list:
        K = max_iterations(eps, delta, 1 / (2 * z**2))
        mmds, acc = [], []
        for c in range(args.chains):
            seed = int(2_000_003 * (args.seed + 1) + 7919 * int(round(eps * 100)) + c)
            with bm.model:
                step = pymc_dp.DPPenalty(eps=eps, clip_bound=clip_bound, proposal="guided",
                                         scaling=scaling, chains=1, warmup=False,
                                         initial_point={bm.var_name: starts[c]})
                idata = pymc_dp.sample(step=step, draws=K, tune=0, chains=1, cores=1,
                                       random_seed=seed, initvals={bm.var_name: starts[c]},
                                       **SAMPLE)
            draws = bm.theta_draws(idata)[0]
            mmds.append(mmd(draws[draws.shape[0] // 2:], reference, rng=np.random.default_rng(seed)))
            acc.append(float(np.mean(idata.sample_stats["accepted"].values)))
        print(f"{eps:>4g} {K:>6d} {np.mean(acc):>7.3f} {np.mean(mmds):>7.3f} ± {np.std(mmds):<5.3f} "
              f"{np.median(mmds):>7.3f}", flush=True)
    print()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=["speed", "banana", "gauss"],
                        choices=["speed", "banana", "gauss"])
    parser.add_argument("--quick", action="store_true",
                        help="4 chains per eps, eps 1 and 6, fewer speed draws")
    parser.add_argument("--chains", type=int, default=None, help="chains per eps (default 20)")
    parser.add_argument("--eps", type=float, nargs="+", default=None)
    parser.add_argument("--tune", type=int, default=0,
                        help="iterations of the run length spent tuning the step size")
    parser.add_argument("--config", nargs="+", choices=list(BANANA_CONFIGS),
                        default=list(BANANA_CONFIGS), help="banana settings to run (default all)")
    parser.add_argument("--reference", type=int, default=1000)
    parser.add_argument("--n", type=int, default=100_000, help="n of the speed benchmark")
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 10],
                        help="dimensions of the flat banana in the speed benchmark")
    parser.add_argument("--regression-dim", type=int, default=10,
                        help="coefficients of the logistic regression in the speed benchmark")
    parser.add_argument("--no-regression", action="store_true",
                        help="speed benchmark on the banana only")
    parser.add_argument("--n-steps", type=int, default=10, help="L of the speed benchmark")
    parser.add_argument("--gradients", choices=["auto", "forward"], default="auto",
                        help="per-datum gradients of the speed benchmark: 'auto' (what "
                             "DPHMC chooses) or 'forward' (forced, for comparison)")
    parser.add_argument("--short", type=int, default=None)
    parser.add_argument("--long", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare-penalty", action="store_true",
                        help="also run DPPenalty on the correlated Gaussian")
    args = parser.parse_args(argv)
    args.chains = args.chains or (4 if args.quick else 20)
    args.short = args.short or (20 if args.quick else 50)
    args.long = args.long or (80 if args.quick else 250)
    args.repeats = args.repeats or (2 if args.quick else 5)
    eps_list = args.eps or ([1.0, 6.0] if args.quick else [1.0, 2.0, 4.0, 6.0])

    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    if "speed" in args.parts:
        run_speed(args)
        print()
    if "banana" in args.parts:
        bm = banana(n=100_000, d=2, a=20.0, sigma0_sq=1000.0, seed=args.seed)
        for name in args.config:
            run_mmd(bm, BANANA_CONFIGS[name], eps_list, args, f"flat banana d=2 [{name}]",
                    THESIS_FIG_6_3_HMC)
    if "gauss" in args.parts:
        bm = correlated_gaussian(n=200_000, rho=0.999, sigma0_sq=100.0, seed=args.seed)
        run_mmd(bm, GAUSS_SETTINGS, eps_list, args, "correlated Gaussian rho=0.999")
        if args.compare_penalty:
            run_penalty(bm, eps_list, args, "correlated Gaussian rho=0.999")


if __name__ == "__main__":
    sys.exit(main())
