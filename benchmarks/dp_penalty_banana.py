"""DPPenalty (guided walk) on the thesis' flat 2-d banana: MMD to the exact posterior.

Reproduces the "DP penalty with GWMH" curve of the flat d = 2 banana panel of thesis
Fig 6.3 (MMD about 0.33 at ε = 1 falling to about 0.12 at ε = 6), using only the public API.

Setup, following the thesis
---------------------------
* Model (Table 5.1, 5.2, 5.4): flat banana, d = 2, n = 10⁵, a = 20, b = m = 0, σ0² = 1000,
  likelihood variances (20, 2.5), true θ = (0, 3); data drawn from the likelihood (seeded).
* Privacy (6.3): δ = 0.1/n (the step's default), ε ∈ {1, 2, 4, 6}. Every chain is its own
  release: a separate ``DPPenalty`` with the full (ε, δ) and ``chains=1`` per chain, 20 chains
  per ε (``--chains``).
* Starting points (5.4): Gaussian around the true θ with standard deviation the mean of the
  component-wise standard deviations of an exact posterior sample; the same 20 points for
  every ε.
* Run length: the thesis does not pick the number of iterations; it fixes the noise level
  through τ (noise std = τ·n^α × sensitivity, α = ½, i.e. noise multiplier z = τ√n) and
  runs as many iterations as the tight bound of Theorem 6 allows (Algorithm 2). With the
  thesis' τ = 0.1 for this experiment this gives K(ε) = 56, 201, 702, 1431 iterations for
  ε = 1, 2, 4, 6 at n = 10⁵, δ = 10⁻⁶. We run exactly K(ε) iterations (computed below with
  the exact Gaussian-composition formula); DPPenalty then calibrates its noise multiplier
  from (ε, δ, K) and lands on z ≈ τ√n ≈ 31.6, the thesis' noise. ``--tau`` changes τ.
* Clip bound and proposal (6.3): the thesis tuned hyperparameters at ε = 4 to minimise MMD
  while clipping fewer than 10 % of the log-likelihood ratios (6.2: up to 20 % is harmless).
  Its published configuration for this model and algorithm is clip bound b = 1.8 per unit
  of ‖θ' − θ‖ and proposal standard deviation 0.008 on each coordinate; we use the same
  (``--clip-bound``, ``--scaling``). The thesis ran no proposal adaptation, so ``tune = 0``
  (``--tune`` moves part of K into tuning instead).
* Evaluation (5.4, 5.5): the second half of each chain against a reference sample of 1000
  exact posterior draws (Theorem 13), MMD with a Gaussian kernel: the unbiased estimate,
  reported as sqrt(|MMD²|), bandwidth by the subsampled median heuristic
  (:func:`pymc_dp.evaluation.mmd`). Mean ± sd over chains. "exact" is the same MMD for
  exact samples of the size of a chain's second half (the thesis' black baseline lines).

Usage::

    python benchmarks/dp_penalty_banana.py [--quick] [--chains 20] [--eps 1 2 4 6]
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
import warnings

import numpy as np

from scipy import optimize, special

import pymc_dp

from pymc_dp.benchmark_models import banana
from pymc_dp.evaluation import mmd

#: Approximate DP penalty (GWMH) MMDs read off thesis Fig 6.3, flat banana d = 2.
THESIS_FIG_6_3 = {1.0: 0.33, 6.0: 0.12}


def gaussian_delta(eps: float, s: float) -> float:
    """δ(ε) of a composition of Gaussian mechanisms with total s = sqrt(2 μ) (thesis Thm 4/6)."""
    return float(special.ndtr(-eps / s + s / 2) - math.exp(eps) * special.ndtr(-eps / s - s / 2))


def thesis_iterations(eps: float, delta: float, tau: float, n: int) -> int:
    """Iterations DP penalty may run with noise multiplier z = τ√n (thesis Algorithm 2, exact).

    k releases with multiplier z cost μ = k / (2 z²), i.e. s = sqrt(2μ) = sqrt(k) / z; the
    largest admissible k is floor(s*² z²) for the s* with δ(ε; s*) = δ.
    """
    s_star = optimize.brentq(lambda s: gaussian_delta(eps, s) - delta, 1e-6, 100.0, xtol=1e-14)
    z = tau * math.sqrt(n)
    return int(math.floor(s_star**2 * z**2 * (1 - 1e-12)))


def run_chain(bm, eps, iterations, start, seed, args):
    tune = min(args.tune, iterations - 1)
    with bm.model:
        step = pymc_dp.DPPenalty(
            eps=eps,
            clip_bound=args.clip_bound,
            proposal="guided",
            scaling=args.scaling,
            chains=1,
        )
        idata = pymc_dp.sample(
            step=step,
            draws=iterations - tune,
            tune=tune,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            initvals={bm.var_name: start},
        )
    return idata


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=20, help="chains (releases) per ε (thesis: 20)")
    parser.add_argument("--quick", action="store_true", help="4 chains per ε (unless --chains is given)")
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0, 6.0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--tau", type=float, default=0.1, help="thesis noise parameter: z = τ√n")
    parser.add_argument("--clip-bound", type=float, default=1.8)
    parser.add_argument("--scaling", type=float, default=0.008, help="proposal sd per coordinate")
    parser.add_argument("--tune", type=int, default=0, help="iterations of the run length used for tuning")
    parser.add_argument("--reference", type=int, default=1000, help="exact reference draws (thesis: 1000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    chains_given = any(a == "--chains" or a.startswith("--chains=") for a in (sys.argv[1:] if argv is None else argv))
    if args.quick and not chains_given:
        args.chains = 4

    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    t_start = time.perf_counter()

    bm = banana(n=args.n, d=2, a=20.0, sigma0_sq=1000.0, seed=args.seed)
    delta = 0.1 / bm.n
    rng = np.random.default_rng(args.seed + 1)
    reference = bm.posterior_draws(args.reference, rng)
    starts = bm.start_points(args.chains, rng=args.seed + 2)
    post_sd = bm.posterior_draws(10_000, args.seed + 3).std(axis=0)

    print(f"flat banana d=2, n={bm.n}, a=20, sigma0^2=1000, lik var (20, 2.5); delta = 0.1/n = {delta:.1e}")
    print(f"exact posterior mean {np.round(bm.posterior_mean, 4)}, sd {np.round(post_sd, 4)}; "
          f"start sd {post_sd.mean():.4f}")
    print(f"guided walk, clip bound {args.clip_bound}, proposal sd {args.scaling}, tune {args.tune}, "
          f"tau {args.tau} (z target {args.tau * math.sqrt(bm.n):.2f}); {args.chains} chains per eps, "
          f"each its own (eps, delta) release; reference {args.reference} exact draws")

    rows = []
    for eps in args.eps:
        K = thesis_iterations(eps, delta, args.tau, bm.n)
        mmds, acc, zs, spent = [], [], [], []
        for c in range(args.chains):
            seed = int(1_000_003 * (args.seed + 1) + 7919 * int(round(eps * 100)) + c)
            idata = run_chain(bm, eps, K, starts[c], seed, args)
            draws = bm.theta_draws(idata)[0]
            half = draws[draws.shape[0] // 2 :]
            mrng = np.random.default_rng(seed)
            mmds.append(mmd(half, reference, rng=mrng))
            stats = idata.sample_stats
            acc.append(float(np.mean(stats["accepted"].values)))
            zs.append(float(np.asarray(stats["noise_multiplier"].values).ravel()[-1]))
            spent.append((float(idata.attrs["dp_epsilon"]), float(idata.attrs["dp_delta"])))
        n_draws = K - min(args.tune, K - 1)
        half_len = n_draws - n_draws // 2
        brng = np.random.default_rng(args.seed + 4)
        base = []
        for _ in range(10):
            ex = bm.posterior_draws(half_len, brng)
            base.append(mmd(ex, reference, rng=brng))
        rows.append(
            dict(
                eps=eps, K=K, mmd=(np.mean(mmds), np.std(mmds)), median=np.median(mmds),
                max=np.max(mmds), exact=np.mean(base), acc=np.mean(acc), z=np.mean(zs),
                eps_spent=max(e for e, _ in spent), delta_spent=max(d for _, d in spent),
                thesis=THESIS_FIG_6_3.get(eps),
            )
        )
        print(f"  eps={eps:g}: K={K}, done ({time.perf_counter() - t_start:.0f}s elapsed)", flush=True)

    print()
    print(f"{'eps':>4} {'iters':>6} {'z':>7} {'accept':>7} {'MMD mean ± sd':>15} {'median':>7}"
          f" {'max':>7} {'exact':>7}"
          f" {'thesis Fig 6.3':>15} {'spent (eps, delta)':>20}")
    for r in rows:
        th = f"~{r['thesis']:.2f}" if r["thesis"] is not None else "-"
        print(f"{r['eps']:>4g} {r['K']:>6d} {r['z']:>7.2f} {r['acc']:>7.3f} "
              f"{r['mmd'][0]:>7.3f} ± {r['mmd'][1]:<5.3f} {r['median']:>7.3f} {r['max']:>7.3f}"
              f" {r['exact']:>7.3f} "
              f"{th:>15} {'(%.3g, %.2g)' % (r['eps_spent'], r['delta_spent']):>20}")
    print(f"\n(MMD: mean ± sd over {args.chains} chains; exact: MMD of exact samples of a chain's "
          f"second-half size; total {time.perf_counter() - t_start:.0f}s)")
    return rows


if __name__ == "__main__":
    main()
