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

Run: .venv/bin/python examples/private_regression.py        (about 10 minutes on 2 cores)
"""

import time

import arviz as az
import numpy as np
import pymc as pm

import pymc_dp

from pymc_dp.mechanisms import (
    PrivatizedDataModel,
    data_augmentation_model,
    ledger_of,
    linear_regression_records,
    linear_regression_release,
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


def nuts_summary(idata):
    s = az.summary(idata, var_names=["beta"], kind="all")
    out = {k: s[k].to_numpy(dtype=float) for k in ("mean", "sd", "mcse_mean", "mcse_sd")}
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
        "note": f"{k} independent SMC runs",
    }


def fmt(mean, sd):
    return "  ".join(f"{m:7.2f} {s:5.2f}" for m, s in zip(mean, sd))


def main():
    rng = np.random.default_rng(SEED)
    x = rng.normal(MEAN_X, 1.0, size=(N, P))
    y = BETA_TRUE[0] + x @ BETA_TRUE[1:] + rng.normal(0.0, NOISE_SD, size=N)
    conf = confidential_posterior(x, y)
    print(f"{np.mean(np.abs(y) > BOUNDS[1]):.0%} of responses are clamped at +-10\n")

    sample_kwargs = dict(chains=2, cores=1, progressbar=False, random_seed=1)
    releases = []
    for eps in EPSILONS:
        rel = linear_regression_release(
            x, y, x_bounds=BOUNDS, y_bounds=BOUNDS, epsilon=eps, rng=rng, name=f"s_eps{eps:g}",
        )
        releases.append(rel)
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

        print(f"=== eps = {eps:g}: Laplace scale {rel.noise_scale:.4g} per released mean ===")
        header = "  ".join(f"{'b' + str(j) + ' mean':>7s} {'sd':>5s}" for j in range(P + 1))
        print(f"{'':38s}{header}")
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

    print("The three releases of the same data compose (inference itself costs nothing):")
    print(pymc_dp.privacy_report(ledger_of(releases), delta=0.0))


if __name__ == "__main__":
    main()
