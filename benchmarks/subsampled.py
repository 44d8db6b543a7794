"""Minibatch DP penalty and DP Barker on the thesis' tempered 2-d banana: MMD and speed.

Public API only (``pymc_dp.sample``, the steps, ``pymc_dp.testing.benchmark_models``,
``pymc_dp.testing.evaluation.mmd``, ``pymc_dp.accounting``). Three parts:

``budget``
    How many minibatch-penalty releases fit a budget (ε, δ) at a fixed noise multiplier,
    before and after the ledger took the smallest of its valid bounds (issue 17 item 3), as
    ratios in one process: "RDP" is dp-accounting's RDP bound for sampling without
    replacement alone (the ledger's charge before), "ledger" is what it charges now (the
    smallest of the releases' own PLD for sampling without replacement, that RDP bound and
    the exact Gaussian composition without subsampling). Rows: the thesis' tempered-banana
    setting (n = 10⁵, b = 1000, z = √1.5, δ = 0.1/n) and small data sets where the batch is
    most of the data. For comparison only: "worst pair", the exact cost for the pair of
    neighbouring data sets that costs most (no valid accountant lets more fit), and
    "thesis", the pair of the thesis' own accountant (Koskela et al.'s Fourier accountant,
    substitute relation), both through dp-accounting's PLD. Last run (2026-11-28, one core,
    no other load, 274 s):

    ======  ====  =====  ===  ============  ============  ==========  ======
    n       b     z      ε    RDP (before)  ledger (now)  worst pair  thesis
    ======  ====  =====  ===  ============  ============  ==========  ======
    10⁵     1000  1.225  1    48            344           462         185
    10⁵     1000  1.225  2    406           1322          1896        697
    10⁵     1000  1.225  4    1538          4702          7027        2465
    10⁵     1000  1.225  6    3222          9623          14608       5039
    16      16    3      2    4             6             6           1
    48      16    3      2    8             37            40          11
    ======  ====  =====  ===  ============  ============  ==========  ======

``mmd``
    The thesis' tempered banana, d = 2 (Table 5.1: n = 10⁵, n0 = 1000, so T = 0.01; a = 20,
    σ0² = 1000, likelihood variances (20, 2.5), true θ = (0, 3)); δ = 0.1/n; ε ∈ {1, 2, 4, 6};
    ``--chains`` chains per ε and sampler (thesis: 20), each its own release (a fresh step
    with the full (ε, δ) and ``chains=1``), started at the thesis' starting points (5.4),
    the second half of each chain against 1000 exact draws of the tempered posterior
    (Theorem 13), MMD with the median-heuristic Gaussian kernel (5.5), mean ± sd over chains.
    "exact" is the MMD of exact samples of a chain's second-half size (the thesis' black
    lines).

    The minibatch steps sample the *untempered* model with ``tempering = n0/n`` (the thesis'
    formulation: clip bounds on untempered ratios); the full-data reference DPPenalty, which
    has no tempering option, samples ``banana(n0=1000)``, whose likelihood is tempered in the
    model, with the thesis' clip bound times T. The two models hold the same data.

    Settings are the thesis' own for this model (its code, ``code/params/*_tempered-2d.py``
    of github.com/oraisa/masters-thesis), and like the thesis we run no adaptation
    (``tune=0``):

    * minibatch DP penalty: b = 1000, clip bound 4 per unit distance, proposal sd 0.025, τ =
      1.5 (noise multiplier z = √τ ≈ 1.22); with OCU + guided walk (``--guided``): τ = 2,
      proposal sd 0.04;
    * DP Barker: b = 1300, proposal sd 0.12 (σ² = 2, clip √b/n0 fixed by the algorithm);
    * full-data DP penalty (``--with-dppenalty``): clip bound 5 per unit distance, proposal
      sd 0.035, τ = 0.2 (z = τ√n).

    Run lengths, as in the thesis: the noise is fixed by τ and the chain runs as many
    iterations K(ε) as the accountant allows. For the minibatch penalty K is the largest k
    for which k releases of multiplier √τ at rate b/n fit in (ε, δ) under our ledger (the
    PLD for sampling without replacement at this rate: K = 344 at ε = 1, where the thesis'
    accountant allows 185, see ``budget``); the step is then given (ε, δ) and K and
    calibrates z ≈ √τ itself. For DP
    Barker K is Theorem 7's maximum (:func:`pymc_dp.accounting.barker_max_iterations`).

    Like the thesis, these runs use no private warm-up (``warmup=False``): the thesis'
    settings, start and whole budget go to the sampler. (The steps' default warm-up would
    take part of the budget and read ``scaling`` as a factor on its own proposal sds. An
    earlier version of this script left it on: proposals were about 70 times smaller than
    the thesis', acceptance 0.97 and the median MMD 0.669 at ε = 1.)

    Last run (2026-11-28, ``--parts mmd --chains 20``, one core, no other load, 647 s).
    "thesis": the same sampler's median MMD in Fig 6.3 (d = 2, tempered panel) and its
    median acceptance rate, read from the figures' drawings (``benchmarks/thesis_figures.py``;
    the thesis' exact samples there: 0.019):

    ====================  ===  =====  ====  ======  =============  ======  =====  ======  ======
    sampler               ε    iters  z     accept  MMD mean ± sd  median  exact  thesis  thesis
                                                                                  median  accept
    ====================  ===  =====  ====  ======  =============  ======  =====  ======  ======
    minibatch DP penalty  1    344    1.22  0.523   0.523 ± 0.100  0.524   0.034  0.512   0.535
    minibatch DP penalty  2    1322   1.22  0.469   0.425 ± 0.155  0.367   0.020  0.459   0.482
    minibatch DP penalty  4    4702   1.22  0.441   0.450 ± 0.211  0.374   0.012  0.415   0.512
    minibatch DP penalty  6    9623   1.22  0.440   0.361 ± 0.167  0.326   0.011  0.320   0.424
    DP Barker             1    106    –     0.242   0.366 ± 0.074  0.373   0.051  0.404   0.217
    DP Barker             2    433    –     0.197   0.483 ± 0.258  0.377   0.031  0.287   0.217
    DP Barker             4    1687   –     0.176   0.413 ± 0.273  0.278   0.023  0.349   0.176
    DP Barker             6    3640   –     0.160   0.420 ± 0.380  0.204   0.013  0.217   0.194
    ====================  ===  =====  ====  ======  =============  ======  =====  ======  ======

    The acceptance rates agree with the thesis' within 0.08, so these are the thesis'
    samplers. The minibatch penalty's medians are within 0.012 of the thesis' at ε = 1 and 6
    and below them at ε = 2 and 4; DP Barker's are below at ε = 1, 4 and 6 and above at
    ε = 2 (0.377 against 0.287; its chains scatter widely there, sd 0.258). A 20-chain
    median scatters by several hundredths. At ε = 1 the minibatch penalty runs 344
    iterations under our accountant where the thesis' allowed 185, yet its median MMD is no
    lower: at proposal sd 0.025 against posterior sds 0.14 and 0.55, the second half of a
    chain this short still carries its start. Under the RDP bound alone (K = 48) the issue
    measured a median of 0.92.

    ``--defaults`` (issue 13) adds the two steps with nothing but ε and the target's
    tempering T = 0.01 (``MinibatchDPPenalty(eps=ε, tempering=T)``, the same for DP Barker)
    under ``pymc_dp.sample``'s own length, start and settings: their private warm-up, and
    the Laplace approximation of the tempered target where the chain could not mix. Last
    run (2026-11-28, ``--parts mmd --chains 10 --defaults --no-thesis``, one core; DP
    Barker's rows after its rule counted the draws its chain can make, ``--defaults
    barker``), median MMD over 10 chains against the thesis' tuned medians:

    ==============================  ===  =====================  =====  =====  =====  =====
    sampler, only ε                 ε    route                  median  mean   sd    thesis
    ==============================  ===  =====================  =====  =====  =====  =====
    minibatch DP penalty            1    MCMC, 5861 iterations  0.372  0.365  0.073  0.512
    minibatch DP penalty            2    MCMC, 5861 iterations  0.279  0.345  0.214  0.459
    minibatch DP penalty            4    MCMC, 5861 iterations  0.263  0.260  0.062  0.415
    minibatch DP penalty            6    MCMC, 5861 iterations  0.285  0.423  0.324  0.320
    DP Barker                       1    Laplace                0.089  0.099  0.043  0.404
    DP Barker                       2    Laplace                0.077  0.101  0.073  0.287
    DP Barker                       4    Laplace                0.099  0.150  0.172  0.349
    DP Barker                       6    Laplace                0.097  0.195  0.295  0.217
    ==============================  ===  =====================  =====  =====  =====  =====

    Both are below the thesis' hand-tuned medians at every ε. The minibatch chain's
    acceptance falls from 0.28 at ε = 1 to 0.10 at ε = 6: its first scale is the random
    walk's optimum for a Gaussian target, too large on the banana's curve, and 200 tuning
    iterations shrink it little; at ε = 6 a few chains stray (mean 0.42). Before DP Barker
    counted the draws its chain can make, its defaults ran a random walk with unit
    proposal sds (acceptance 0.01–0.03) from ε = 2 on: medians 0.35–0.84; before
    ``tempering`` stopped asking for MCMC, also at ε = 1 (0.93).

``speed``
    Seconds per iteration of each minibatch step over one full-data DPPenalty iteration on
    the same data (n = 10⁵), one chain, one core, in one process: compilation and fixed costs
    removed by differencing a short and a long run (``tune=0``, fixed noise for the
    minibatch penalty so that no calibration enters); process CPU time, minimum and median
    over ``--repeats`` interleaved repetitions.

Usage::

    python benchmarks/subsampled.py [--parts budget mmd speed] [--chains 20] [--quick]
                                    [--with-dppenalty] [--guided] [--defaults [minibatch barker]]
                                    [--no-thesis]
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import time
import warnings

import numpy as np

import pymc_dp

from pymc_dp.accounting import PrivacyLedger, SubsampledGaussianEvent, barker_max_iterations
from pymc_dp.testing.benchmark_models import banana
from pymc_dp.testing.evaluation import mmd
from pymc_dp.steps.dp_barker import DPBarker
from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty
from thesis_figures import ACCEPTANCE, FIG_6_3_EXACT, FIG_6_3_MMD

#: Our samplers' labels → their names in the thesis' figures.
THESIS_NAMES = {"minibatch DP penalty": "Minibatch DP Penalty",
                "minibatch DP penalty OCU+GWMH": "Minibatch DP Penalty OCU+GWMH",
                "DP Barker": "DP Barker", "DP penalty (full data)": "DP Penalty"}

SAMPLE = dict(chains=1, cores=1, progressbar=False, compute_convergence_checks=False)

#: The thesis' settings for the tempered 2-d banana (code/params/*_tempered-2d.py).
MB_PLAIN = dict(tau=1.5, scaling=0.025, clip_bound=4.0, batch_size=1000, proposal="random_walk")
MB_GUIDED = dict(tau=2.0, scaling=0.04, clip_bound=4.0, batch_size=1000, proposal="guided")
BARKER = dict(scaling=0.12, batch_size=1300)
DPP = dict(tau=0.2, scaling=0.035, clip_bound=5.0)


def max_subsampled_releases(eps, delta, z, q, hi=1 << 20, accountant=None):
    """The largest k such that k releases (multiplier z, rate q) cost at most (ε, δ).

    ``accountant``: ``events, δ ↦ ε`` (by default the ledger's charge)."""
    accountant = accountant or (lambda events, d: PrivacyLedger(events).epsilon(d))
    cost = lambda k: accountant(  # noqa: E731
        [SubsampledGaussianEvent(name="r", noise_multiplier=z, sampling_rate=q, count=k)], delta
    )
    lo, top = 0, hi
    hi = 1
    while hi < top and cost(hi) <= eps:  # doubling first: small k are cheap to query
        lo, hi = hi, 2 * hi
    hi = min(hi, top)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cost(mid) <= eps else (lo, mid)
    return lo


def dppenalty_iterations(eps, delta, z):
    """Thesis Algorithm 2 with the exact Gaussian accountant: the largest k with k/(2z²) allowed."""
    mu = pymc_dp.accounting.max_gaussian_mu(eps, delta)
    return int(math.floor(2 * z * z * mu * (1 - 1e-12)))


def _pair_pld(events, delta, relation):
    """For comparison only: dp-accounting's PLD of a Poisson-sampled Gaussian pair at the
    events' rate, sensitivity 1 (never charged).

    ``ADD_OR_REMOVE_ONE``: ``qN(1, z²) + (1−q)N(0, z²)`` against ``N(0, z²)`` and back, which
    is exactly what two neighbouring data sets give when every other row contributes like
    the replacing one: a lower bound for any valid accountant of batches drawn without
    replacement. ``REPLACE_ONE``: ``qN(1, z²) + (1−q)N(0, z²)`` against
    ``qN(−1, z²) + (1−q)N(0, z²)``, the pair of the thesis' accountant (Koskela et al.'s
    Fourier accountant, substitute relation: ``get_delta_S(sigma=√τ, q=b/n)`` in
    code/dp_penalty_minibatch.py of github.com/oraisa/masters-thesis)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    [e] = events
    pld = pld_lib.from_gaussian_mechanism(
        e.noise_multiplier, sensitivity=1.0, sampling_prob=e.sampling_rate,
        neighboring_relation=relation).self_compose(e.count)
    return pld.get_epsilon_for_delta(delta)


def budget_part(args):
    from dp_accounting import NeighboringRelation

    rdp = pymc_dp.accounting.rdp_epsilon
    settings = [(args.n, 1000, math.sqrt(MB_PLAIN["tau"]), eps) for eps in args.eps]
    settings += [(n, 16, 3.0, 2.0) for n in (16, 17, 20, 32, 48)]
    settings += [(1100, 1000, 2.0, 2.0)]
    print("iterations (releases) that fit (eps, delta = 0.1/n) at a fixed noise multiplier z")
    print(f"{'n':>7} {'b':>5} {'z':>6} {'eps':>4} {'RDP (before)':>12} {'ledger (now)':>12} "
          f"{'ratio':>6} {'bound now':>25} {'worst pair*':>11} {'thesis**':>8}")
    rows = []
    for n, b, z, eps in settings:
        delta, q = 0.1 / n, b / n
        before = max_subsampled_releases(eps, delta, z, q, accountant=rdp)
        after = max_subsampled_releases(eps, delta, z, q)
        bound = PrivacyLedger([SubsampledGaussianEvent(
            name="r", noise_multiplier=z, sampling_rate=q, count=max(after, 1))]).bound(delta)
        worst, thesis = (
            max_subsampled_releases(eps, delta, z, q, accountant=lambda ev, d, r=r: _pair_pld(
                ev, d, r))
            for r in (NeighboringRelation.ADD_OR_REMOVE_ONE, NeighboringRelation.REPLACE_ONE))
        ratio = after / before if before else math.nan
        rows.append(dict(n=n, b=b, z=z, eps=eps, before=before, after=after, bound=bound,
                         worst=worst, thesis=thesis))
        print(f"{n:>7} {b:>5} {z:>6.3f} {eps:>4g} {before:>12d} {after:>12d} {ratio:>6.2f} "
              f"{bound:>25} {worst:>11d} {thesis:>8d}", flush=True)
    print("*  no valid accountant can let more fit: the exact cost for the worst pair of data "
          "sets (dp-accounting's PLD of that pair).")
    print("** the pair of the thesis' Fourier accountant (substitute relation), through "
          "dp-accounting's PLD; see docs/subsampling.md.")
    return rows


# ---------------------------------------------------------------------- samplers
def run_minibatch_penalty(flat, eps, K, start, seed, cfg, tempering):
    with flat.model:
        step = MinibatchDPPenalty(
            eps=eps, batch_size=cfg["batch_size"], clip_bound=cfg["clip_bound"],
            tempering=tempering, proposal=cfg["proposal"], scaling=cfg["scaling"], chains=1,
            initial_point={flat.var_name: start}, warmup=False,
        )
        return pymc_dp.sample(step=step, draws=K, tune=0, random_seed=seed,
                              initvals={flat.var_name: start}, **SAMPLE)


def run_barker(flat, eps, K, start, seed, tempering):
    with flat.model:
        step = DPBarker(eps=eps, batch_size=BARKER["batch_size"], tempering=tempering,
                        scaling=BARKER["scaling"], chains=1, initial_point={flat.var_name: start},
                        warmup=False)
        return pymc_dp.sample(step=step, draws=K, tune=0, random_seed=seed,
                              initvals={flat.var_name: start}, **SAMPLE)


def run_defaults(flat, make_step, eps, seed, tempering):
    """Only ε and the target's tempering: the library's own start, settings and length."""
    with flat.model:
        return pymc_dp.sample(step=make_step(eps=eps, tempering=tempering, chains=1),
                              random_seed=seed, **SAMPLE)


def run_dppenalty(tempered, eps, K, start, seed):
    with tempered.model:
        step = pymc_dp.DPPenalty(eps=eps, clip_bound=DPP["clip_bound"] * tempered.tempering,
                                 scaling=DPP["scaling"], chains=1, warmup=False,
                                 initial_point={tempered.var_name: start})
        return pymc_dp.sample(step=step, draws=K, tune=0, random_seed=seed,
                              initvals={tempered.var_name: start}, **SAMPLE)


def mmd_part(args, flat, tempered):
    n, T = flat.n, tempered.tempering
    delta = 0.1 / n
    rng = np.random.default_rng(args.seed + 1)
    reference = tempered.posterior_draws(args.reference, rng)
    starts = tempered.start_points(args.chains, rng=args.seed + 2)
    post_sd = tempered.posterior_draws(10_000, args.seed + 3).std(axis=0)
    print(f"tempered banana d=2, n={n}, n0={args.n0} (T={T:g}), a=20, sigma0^2=1000; "
          f"delta = 0.1/n = {delta:.1e}; tempered posterior sd {np.round(post_sd, 4)}")
    print(f"{args.chains} chains per eps and sampler, each its own (eps, delta) release; tune=0; "
          f"second half of each chain vs {args.reference} exact draws")

    samplers = [] if args.no_thesis else [("minibatch DP penalty", "mb", MB_PLAIN)]
    if args.guided:
        samplers.append(("minibatch DP penalty OCU+GWMH", "mb", MB_GUIDED))
    if not args.no_thesis:
        samplers.append(("DP Barker", "barker", BARKER))
    if args.with_dppenalty:
        samplers.append(("DP penalty (full data)", "dpp", DPP))
    defaults = {"minibatch": ("minibatch DP penalty, defaults", "defaults", MinibatchDPPenalty),
                "barker": ("DP Barker, defaults", "defaults", DPBarker)}
    if args.defaults is not None:
        samplers += [defaults[k] for k in (args.defaults or defaults)]

    rows = []
    t0 = time.perf_counter()
    for label, kind, cfg in samplers:
        for eps in args.eps:
            if kind == "mb":
                K = max_subsampled_releases(eps, delta, math.sqrt(cfg["tau"]), cfg["batch_size"] / n)
            elif kind == "barker":
                K = barker_max_iterations(eps, delta, n, cfg["batch_size"])
            elif kind == "dpp":
                K = dppenalty_iterations(eps, delta, cfg["tau"] * math.sqrt(n))
            mmds, acc, noise, spent = [], [], [], []
            for c in range(args.chains):
                seed = int(1_000_003 * (args.seed + 1) + 7919 * int(round(eps * 100)) + c)
                if kind == "mb":
                    idata = run_minibatch_penalty(flat, eps, K, starts[c], seed, cfg, T)
                    noise.append(float(idata.sample_stats["dp_noise_multiplier"].values.flat[0]))
                elif kind == "barker":
                    idata = run_barker(flat, eps, K, starts[c], seed, T)
                elif kind == "dpp":
                    idata = run_dppenalty(tempered, eps, K, starts[c], seed)
                    noise.append(float(idata.sample_stats["noise_multiplier"].values.flat[0]))
                else:
                    idata = run_defaults(flat, cfg, eps, seed, T)
                draws = tempered.theta_draws(idata)[0]
                if kind == "defaults":  # (the library's own length; no tuning draws kept)
                    K = draws.shape[0]
                half = draws[draws.shape[0] // 2 :]
                mmds.append(mmd(half, reference, rng=np.random.default_rng(seed)))
                acc.append(float(np.mean(idata.sample_stats["accepted"].values)))
                spent.append(float(idata.attrs["dp_epsilon"]))
            brng = np.random.default_rng(args.seed + 4)
            half_len = K - K // 2
            exact = np.mean([mmd(tempered.posterior_draws(half_len, brng), reference, rng=brng)
                             for _ in range(10)])
            rows.append(dict(sampler=label, eps=eps, K=K, mmd=np.mean(mmds), sd=np.std(mmds),
                             median=np.median(mmds), exact=exact, acc=np.mean(acc),
                             z=np.mean(noise) if noise else float("nan"), spent=max(spent)))
            print(f"  {label}, eps={eps:g}: K={K} done ({time.perf_counter() - t0:.0f}s)", flush=True)

    print()
    print(f"{'sampler':<32} {'eps':>4} {'iters':>6} {'z':>6} {'accept':>7} "
          f"{'MMD mean ± sd':>15} {'median':>7} {'exact':>7} {'eps spent':>9} "
          f"{'thesis MMD':>10} {'accept':>7}")
    for r in rows:
        z = "-" if math.isnan(r["z"]) else f"{r['z']:.2f}"
        name = THESIS_NAMES.get(r["sampler"].split(",")[0])
        key = ("d = 2, tempered", name, float(r["eps"]))
        thesis_mmd, thesis_acc = FIG_6_3_MMD.get(key), ACCEPTANCE.get(key)
        print(f"{r['sampler']:<32} {r['eps']:>4g} {r['K']:>6d} {z:>6} {r['acc']:>7.3f} "
              f"{r['mmd']:>7.3f} ± {r['sd']:<5.3f} {r['median']:>7.3f} {r['exact']:>7.3f} "
              f"{r['spent']:>9.4g} {'-' if thesis_mmd is None else f'{thesis_mmd:.3f}':>10} "
              f"{'-' if thesis_acc is None else f'{thesis_acc:.3f}':>7}")
    print("(thesis: the median MMD of the same sampler in Fig 6.3, d = 2 tempered panel, and its "
          "median acceptance rate, both read from the figures' drawings by "
          "benchmarks/thesis_figures.py; exact there: "
          f"{FIG_6_3_EXACT['d = 2, tempered']:.3f} for 1000 exact draws)")
    return rows


# ---------------------------------------------------------------------- speed
def _cpu():
    return time.process_time()


def _time(bm, make_step, draws, seed):
    with bm.model:
        # (a private step starts only where it checked: its initial_point)
        step = make_step(initial_point={bm.var_name: bm.true_theta})
        start = _cpu()
        pymc_dp.sample(step=step, draws=draws, tune=0, random_seed=seed,
                       initvals={bm.var_name: bm.true_theta}, **SAMPLE)
        return _cpu() - start


def speed_part(args, flat, tempered):
    T = tempered.tempering
    makers = {
        "DPPenalty (full data)": (tempered, lambda **kw: pymc_dp.DPPenalty(
            eps=1e3, clip_bound=DPP["clip_bound"] * T, scaling=DPP["scaling"],
            noise_multiplier=DPP["tau"] * math.sqrt(flat.n), chains=1, **kw)),
        "MinibatchDPPenalty b=1000": (flat, lambda **kw: MinibatchDPPenalty(
            eps=1e3, batch_size=1000, clip_bound=4.0, tempering=T, scaling=0.025,
            noise_multiplier=math.sqrt(1.5), chains=1, **kw)),
        "DPBarker b=1300": (flat, lambda **kw: DPBarker(
            eps=1e4, batch_size=1300, tempering=T, scaling=0.12, chains=1, **kw)),
    }
    per_iter = {k: [] for k in makers}
    for bm, make in makers.values():  # warm-up: one-off costs
        _time(bm, make, 10, args.seed)
    for r in range(args.repeats):
        for name, (bm, make) in makers.items():
            short = _time(bm, make, args.short, args.seed + r)
            long = _time(bm, make, args.long, args.seed + r)
            per_iter[name].append((long - short) / (args.long - args.short))
    print(f"\nspeed: n={flat.n}, one chain, one core, {args.short} vs {args.long} draws, "
          f"{args.repeats} repeats (process CPU time per iteration)")
    base = min(per_iter["DPPenalty (full data)"])
    for name, v in per_iter.items():
        ms = [1e3 * x for x in v]
        print(f"  {name:<28} min {min(ms):.3f} ms, median {statistics.median(ms):.3f} ms;"
              f"  ratio to DPPenalty (min) {min(v) / base:.3f}")
    return per_iter


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["budget", "mmd", "speed"],
                        choices=["budget", "mmd", "speed"])
    parser.add_argument("--chains", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="5 chains per eps")
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0, 6.0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--n0", type=float, default=1000.0)
    parser.add_argument("--reference", type=int, default=1000)
    parser.add_argument("--guided", action="store_true", help="also the OCU + guided-walk minibatch penalty")
    parser.add_argument("--with-dppenalty", action="store_true", help="also the full-data DPPenalty MMD")
    parser.add_argument("--defaults", nargs="*", choices=["minibatch", "barker"], default=None,
                        help="also these minibatch steps (default both) with only eps and the "
                             "target's tempering")
    parser.add_argument("--no-thesis", action="store_true",
                        help="without the thesis-setting minibatch penalty and Barker rows")
    parser.add_argument("--short", type=int, default=200)
    parser.add_argument("--long", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.chains = 5

    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    flat = banana(n=args.n, d=2, a=20.0, sigma0_sq=1000.0, seed=args.seed)
    tempered = banana(n=args.n, d=2, a=20.0, sigma0_sq=1000.0, n0=args.n0, seed=args.seed)
    assert np.array_equal(flat.data, tempered.data)
    start = time.perf_counter()
    if "budget" in args.parts:
        budget_part(args)
    if "mmd" in args.parts:
        mmd_part(args, flat, tempered)
    if "speed" in args.parts:
        speed_part(args, flat, tempered)
    print(f"\n(total {time.perf_counter() - start:.0f}s)")


if __name__ == "__main__":
    main()
