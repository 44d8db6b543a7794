"""Bayesian linear regression from privatized sufficient statistics.

The setting of Xiong, Ju & Zhang (section 4.2, appendix E.2) and Ju et al. (2022):
n = 100 people, p = 2 predictors x ~ N((0.9, -1.17), I), y = b0 + x'b + N(0, 2) (variance 2),
prior b ~ N(0, I). The data holder clamps x and y to [-10, 10], rescales them to [-1, 1] and
releases the nine means (x~'y~, y~'y~, upper triangle of x~'x~ without its constant entry)
with Laplace noise of scale D/eps per entry, D = (p^2 + 3p + 3)/n = 0.13, at eps = 10, 1, 0.1.

The analyst writes the model once (`params`, `records` below) and gets the posterior from
three routes, which should agree within Monte Carlo error:

* data augmentation: the 100 records are latent variables, NUTS (exact);
* normal approximation of the summed statistics convolved with the mechanism (CLT);
* SMC-ABC on the private-data simulator, with the mechanism as ABC kernel (exact target);

next to the naive plug-in posterior (release treated as the exact statistic: wrong) and the
non-private posterior given the confidential data (what the data holder could compute).

With ``--paper`` the releases are not simulated: they are the three the authors published
with their code (the privatized statistics of Ju et al.'s confidential data at eps = 10, 1
and 0.1), and each route's posterior mean and 95 % interval are printed next to the paper's
Tables 2-4 (its DA-MCMC and SMC-ABC rows), with the largest difference of a mean.

Run: .venv/bin/python examples/private_regression.py           (about 10 minutes on 2 cores)
     .venv/bin/python examples/private_regression.py --paper   (the same, on the paper's data)
"""

import argparse
import time

import arviz as az
import numpy as np
import pymc as pm

import pymc_dp

from pymc_dp.mechanisms import (
    PrivatizedDataModel,
    Release,
    data_augmentation_model,
    ledger_of,
    linear_regression_records,
    linear_regression_release,
    linear_regression_sensitivity,
    naive_plugin_model,
    normal_approximation_model,
    smc_abc_model,
    unpack_linear_regression,
)

N, P = 100, 2
MEAN_X = np.array([0.9, -1.17])
BETA_TRUE = np.array([-1.79, -2.89, -0.66])  # the paper's ground truth
NOISE_SD = np.sqrt(2.0)
BOUNDS = (-10.0, 10.0)
EPSILONS = (10.0, 1.0, 0.1)
SEED = 20240601

# The releases the authors published (Xiong, Ju & Zhang's code, github.com/Yifei-Xiong/
# Simulation-based-Bayesian-Inference-from-Privacy-Protected-Data, Dataset.py, commit
# e121394): the nine statistics as sums over the n = 100 records, in the order of
# linear_regression_records (x~'y~, y~'y~, x~'x~ without its constant entry), for each eps.
PAPER_RELEASES = {
    10.0: [-38.2440, -6.6783, 3.1997, 27.1985, 9.8835, -13.8503, 2.1882, -2.2884, 3.4092],
    1.0: [-55.1400, -6.0000, 15.0400, 23.7800, 41.3000, -16.2100, -9.4600, -11.3300, 35.9500],
    0.1: [-333.8400, -106.5100, -1.3100, 399.9300, 229.9800, 19.6700, 84.5900, -55.4100,
          88.9000],
}
# The paper's Tables 2-4 (eps = 10, 1, 0.1): posterior mean and 95 % interval of
# (b0, b1, b2), the targets for the routes run on PAPER_RELEASES.
PAPER_TABLES = {
    10.0: {"DA-MCMC": [(-0.62, -2.50, 0.99), (-2.72, -3.74, -0.96), (0.54, -1.06, 2.46)],
           "SMC-ABC": [(-0.59, -2.28, 0.93), (-2.44, -3.67, -0.38), (0.85, -0.88, 2.77)]},
    1.0: {"DA-MCMC": [(-1.00, -2.75, 0.85), (-0.96, -2.66, 0.89), (1.23, -0.76, 2.88)],
          "SMC-ABC": [(-0.80, -2.74, 1.17), (-0.83, -2.64, 1.23), (0.90, -1.00, 2.58)]},
    0.1: {"DA-MCMC": [(-0.12, -1.98, 1.77), (-0.13, -2.13, 1.88), (0.13, -1.91, 2.12)],
          "SMC-ABC": [(-0.09, -1.97, 1.93), (-0.10, -2.09, 1.95), (0.11, -1.90, 2.22)]},
}
PAPER_CONFIDENTIAL = [(-2.15, -2.68, -1.61), (-2.79, -3.08, -2.50), (-0.83, -1.08, -0.58)]


# ---- the model, written once ---------------------------------------------------------


def params():
    pm.Normal("beta", 0.0, 1.0, shape=P + 1)


def records(params, n):
    beta = params["beta"]
    x = pm.Normal("x", mu=MEAN_X, sigma=1.0, shape=(n, P))
    # y ~ N(b0 + x'b, 2), written non-centred: when the release leaves the records loosely
    # determined (eps <= 1), latent y's tied to beta would make NUTS crawl.
    e = pm.Normal("e", 0.0, 1.0, shape=n)
    y = beta[0] + x @ beta[1:] + NOISE_SD * e
    return {"s": linear_regression_records(x, y, x_bounds=BOUNDS, y_bounds=BOUNDS)}


# ---- references -----------------------------------------------------------------------


def confidential_posterior(x, y):
    """Conjugate posterior given the raw confidential data (no privacy, no clamping)."""
    design = np.column_stack([np.ones(len(y)), x])
    precision = design.T @ design / NOISE_SD**2 + np.eye(P + 1)
    cov = np.linalg.inv(precision)
    return cov @ design.T @ y / NOISE_SD**2, np.sqrt(np.diag(cov))


def conjugate_plugin(release_value):
    """The paper's naive posterior: s_dp plugged into the conjugate formula (rescaled back)."""
    xty, _, xtx = unpack_linear_regression(release_value, P)
    scale = np.concatenate([[1.0], np.full(P, BOUNDS[1])])  # undo x~ = x/10 (not the 1s)
    xtx = N * xtx * np.outer(scale, scale)
    xty = N * xty * scale * BOUNDS[1]
    precision = xtx / NOISE_SD**2 + np.eye(P + 1)
    if np.any(np.linalg.eigvalsh(precision) <= 0):
        return None
    cov = np.linalg.inv(precision)
    return cov @ xty / NOISE_SD**2, np.sqrt(np.diag(cov))


# ---- summaries ------------------------------------------------------------------------


def interval(idata):
    """The central 95 % interval of each coefficient."""
    flat = idata.posterior["beta"].values.reshape(-1, P + 1)
    return np.quantile(flat, [0.025, 0.975], axis=0).T


def nuts_summary(idata):
    s = az.summary(idata, var_names=["beta"], kind="all")
    out = {k: s[k].to_numpy(dtype=float) for k in ("mean", "sd", "mcse_mean", "mcse_sd")}
    out["interval"] = interval(idata)
    out["r_hat_max"] = s["r_hat"].to_numpy(dtype=float).max()
    ess = s["ess_bulk"].to_numpy(dtype=float).min()
    out["note"] = f"r_hat <= {out['r_hat_max']:.2f}, ess >= {ess:.0f}"
    return out


def chains_summary(idata):
    """Mean, sd and their Monte Carlo errors from independent chains (SMC runs)."""
    b = idata.posterior["beta"].values  # (chain, draw, 3)
    means, sds = b.mean(axis=1), b.std(axis=1)
    k = b.shape[0]
    flat = b.reshape(-1, P + 1)
    return {
        "mean": flat.mean(0), "sd": flat.std(0),
        "mcse_mean": means.std(0, ddof=1) / np.sqrt(k), "mcse_sd": sds.std(0, ddof=1) / np.sqrt(k),
        "interval": interval(idata), "note": f"{k} independent SMC runs",
    }


def fmt(mean, sd):
    return "  ".join(f"{m:7.2f} {s:5.2f}" for m, s in zip(mean, sd))


def run_routes(rel):
    """Every route's posterior given one release: (rows, times, naive plug-in)."""
    sample_kwargs = dict(chains=2, cores=1, progressbar=False, random_seed=1)
    spec = PrivatizedDataModel(
        params=params, records=records, releases={"s": rel}, n=N, aggregate="mean",
    )
    rows, times = {}, {}

    t = time.time()
    with data_augmentation_model(spec):
        idata = pm.sample(1000, tune=1000, target_accept=0.9, **sample_kwargs)
    rows["data augmentation"], times["data augmentation"] = nuts_summary(idata), time.time() - t

    t = time.time()
    with normal_approximation_model(spec, moment_draws=1024):
        idata = pm.sample(1000, tune=1000, target_accept=0.9, **sample_kwargs)
    rows["normal approximation"] = nuts_summary(idata)
    times["normal approximation"] = time.time() - t

    t = time.time()
    with smc_abc_model(spec, simulations=100):
        idata = pm.sample_smc(500, chains=4, cores=1, progressbar=False, random_seed=2)
    rows["SMC-ABC"], times["SMC-ABC"] = chains_summary(idata), time.time() - t

    t = time.time()
    with naive_plugin_model(spec, moment_draws=1024):
        idata = pm.sample(1000, tune=1000, **sample_kwargs)
    naive, times["naive plug-in"] = nuts_summary(idata), time.time() - t
    return rows, times, naive


def print_routes(rel, rows, times, naive, conf=None):
    print(f"=== eps = {rel.epsilon:g}: Laplace scale {rel.noise_scale:.4g} per released mean ===")
    header = "  ".join(f"{'b' + str(j) + ' mean':>7s} {'sd':>5s}" for j in range(P + 1))
    print(f"{'':38s}{header}")
    if conf is not None:
        print(f"{'confidential data (no privacy)':38s}{fmt(*conf)}")
    for name, r in rows.items():
        print(f"{name:38s}{fmt(r['mean'], r['sd'])}   {times[name]:3.0f} s, {r['note']}")
    if naive["r_hat_max"] > 1.1:
        naive["note"] += " (chains disagree: the plug-in posterior is multimodal)"
    print(f"{'naive plug-in, normal approx (WRONG)':38s}{fmt(naive['mean'], naive['sd'])}"
          f"   {times['naive plug-in']:3.0f} s, {naive['note']}")
    plug = conjugate_plugin(rel.value)
    label = "naive plug-in, conjugate (WRONG)"
    failed = "fails: the released x'x is not positive definite"
    print(f"{label:38s}" + (fmt(*plug) if plug else failed))
    base = rows["data augmentation"]
    for name in ("normal approximation", "SMC-ABC"):
        r = rows[name]
        z_mean = (r["mean"] - base["mean"]) / np.hypot(r["mcse_mean"], base["mcse_mean"])
        z_sd = (r["sd"] - base["sd"]) / np.hypot(r["mcse_sd"], base["mcse_sd"])
        verdict = "agree" if max(np.abs(z_mean).max(), np.abs(z_sd).max()) < 3 else "DIFFER"
        print(f"  {name} vs data augmentation, difference / MC error:"
              f" means {np.round(z_mean, 1)}, sds {np.round(z_sd, 1)}: {verdict}")
    z_naive = (naive["mean"] - base["mean"]) / base["sd"]
    print(f"  naive plug-in mean - correct mean, in posterior sds: {np.round(z_naive, 1)};"
          f" sd ratio naive/correct: {np.round(naive['sd'] / base['sd'], 2)}\n")


def simulated():
    """Releases of simulated confidential data at each eps, and what each route makes of them."""
    rng = np.random.default_rng(SEED)
    x = rng.normal(MEAN_X, 1.0, size=(N, P))
    y = BETA_TRUE[0] + x @ BETA_TRUE[1:] + rng.normal(0.0, NOISE_SD, size=N)
    conf = confidential_posterior(x, y)
    print(f"{np.mean(np.abs(y) > BOUNDS[1]):.0%} of responses are clamped at +-10\n")
    releases = []
    for eps in EPSILONS:
        rel = linear_regression_release(
            x, y, x_bounds=BOUNDS, y_bounds=BOUNDS, epsilon=eps, rng=rng, name=f"s_eps{eps:g}",
        )
        releases.append(rel)
        print_routes(rel, *run_routes(rel), conf=conf)

    print("The three releases of the same data compose (inference itself costs nothing):")
    print(pymc_dp.privacy_report(ledger_of(releases), delta=0.0))


def paper_release(eps):
    """The authors' published release at ``eps``, loaded as an analyst loads one."""
    sensitivity = linear_regression_sensitivity(P) / N
    return Release.from_dict({
        "name": f"paper_s_eps{eps:g}", "kind": "laplace",
        "value": np.asarray(PAPER_RELEASES[eps]) / N,  # (published as sums; the means)
        "sensitivity": sensitivity, "epsilon": eps, "noise_scale": sensitivity / eps,
    })


def fmt_interval(rows):
    return "  ".join(f"{m:6.2f} ({lo:5.2f},{hi:5.2f})" for m, lo, hi in rows)


def paper():
    """The routes on the authors' releases, against the paper's Tables 2-4."""
    print("The paper's releases (Xiong, Ju & Zhang, Tables 2-4: the authors' own statistics).")
    print(f"{'':28s}" + "  ".join(f"{'b' + str(j) + ' mean (95% interval)':>21s}"
                                  for j in range(P + 1)))
    print(f"{'paper: confidential data':28s}{fmt_interval(PAPER_CONFIDENTIAL)}\n")
    worst = {}
    for eps in EPSILONS:
        rel = paper_release(eps)
        rows, _, _ = run_routes(rel)
        print(f"eps = {eps:g} (Table {2 + EPSILONS.index(eps)})")
        for name, table in PAPER_TABLES[eps].items():
            print(f"{'  paper: ' + name:28s}{fmt_interval(table)}")
        for name, r in rows.items():
            ours = [(m, lo, hi) for m, (lo, hi) in zip(r["mean"], r["interval"])]
            print(f"{'  here: ' + name:28s}{fmt_interval(ours)}")
        paper_da = np.array([m for m, _, _ in PAPER_TABLES[eps]["DA-MCMC"]])
        for name, r in rows.items():
            worst[(eps, name)] = float(np.abs(r["mean"] - paper_da).max())
        print("  largest |mean - paper's DA-MCMC mean|: " + ", ".join(
            f"{name} {worst[(eps, name)]:.2f}" for name in rows) + "\n")
    print(f"Over the three tables, every route's means are within {max(worst.values()):.2f} "
          "of the paper's DA-MCMC means (its own DA-MCMC and SMC-ABC rows differ by up to "
          f"{_paper_spread():.2f}).")


def _paper_spread():
    return max(abs(a[0] - b[0]) for eps in EPSILONS
               for a, b in zip(PAPER_TABLES[eps]["DA-MCMC"], PAPER_TABLES[eps]["SMC-ABC"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper", action="store_true",
                        help="the authors' published releases, against the paper's tables")
    args = parser.parse_args()
    paper() if args.paper else simulated()


if __name__ == "__main__":
    main()
