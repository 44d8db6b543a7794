"""Stochastic epidemic simulators of the papers' examples, vectorised over outbreaks.

* :func:`simulate_sir`: the closed-population SIR model of Xiong, Ju & Zhang (section 4.1,
  appendix E.1) as a chain-binomial process, many epidemics per call; :func:`sir_ode` is its
  deterministic large-population limit.
* :func:`simulate_tb` and :func:`tb_summaries`: the tuberculosis birth–death model of
  Lintusaari et al. (2019, section 3), used by Park, Vinaroz & Jitkrittum (ABCDP, section 6.3),
  simulated event by event (Gillespie) for many outbreaks in lock-step; :func:`tb_distance` is
  the weighted L2 distance between their summaries (Lintusaari et al., Table 1).

Randomness comes only from the ``numpy.random.Generator`` passed in: equal seeds give equal
outbreaks. Used by ``examples/sir_privatized.py`` and ``examples/abcdp_tuberculosis.py``.
"""

from __future__ import annotations

import numpy as np

from scipy.integrate import solve_ivp

__all__ = [
    "SIR_RECORD_DAYS",
    "TB_SUMMARY_NAMES",
    "simulate_sir",
    "simulate_tb",
    "sir_ode",
    "tb_balance",
    "tb_distance",
    "tb_rates",
    "tb_summaries",
]

#: The days at which the authors' code (``sir_c.cpp``) records I(t) for the release: every
#: 17th day of 0..160, ten points.
SIR_RECORD_DAYS = np.arange(0, 161, 17)


def simulate_sir(rng: np.random.Generator, beta, gamma, *, population: int, days: int = 160,
                 initial_infected: int = 1, steps_per_day: int = 10, max_step: float | None = None,
                 record_days=None, size: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Simulate stochastic SIR epidemics (chain binomial), many at once.

    In a closed population of K people starting from ``(S, I, R) = (K − I0, I0, 0)``, each
    step of length ``dt = 1 / steps_per_day`` draws, for every epidemic at once,

        new infections ~ Binomial(S, 1 − exp(−β I* dt / K)),
        recoveries     ~ Binomial(I, γ dt · I* / I),

    with ``I* = I · exp((βS/K − γ) dt / 2)`` the expected number infected at mid-step: a
    midpoint tau-leap of the Markov jump process of Xiong, Ju & Zhang (section 4.1:
    infections at rate βSI/K, recoveries at rate γI), which the authors simulate exactly by
    Gillespie's algorithm. Evaluating both rates at mid-step makes the mean growth over a
    step ``1 + r dt + (r dt)²/2`` with ``r = βS/K − γ``, correct to second order; rates frozen
    at the start of the step would let no one infected during a step infect or recover
    before its end, and the early growth rate would be ``log(1 + β dt − γ dt) / dt`` (0.54
    instead of 0.56 a day at the paper's θ* and 10 steps a day).

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    beta, gamma : float or array_like
        Infection and recovery rates per day, broadcast against ``size``.
    population : int
        K.
    days : int, default 160
        Length of the simulation (the paper: T = 160).
    initial_infected : int, default 1
        I0 (the paper: 1).
    steps_per_day : int, default 10
        Binomial steps per day (fixed steps ``dt = 1 / steps_per_day``).
    max_step : float, optional
        Adaptive steps instead: each step is as long as keeps ``ρ dt ≤ max_step``, where ρ is
        the largest per-capita rate of change over the epidemics simulated together,
        ``max(|βS/K − γ|, βI/K, γ)``, and no longer than the time to the next recorded day. The
        midpoint rule's error per step is of order ``(ρ dt)³``; ``max_step = 0.25`` takes about
        130 steps for the paper's 153 days at θ* (small steps while the epidemic grows,
        days-long ones while it fades), against 1530 fixed steps at 10 a day.
    record_days : array_like of int, optional
        Increasing days at which to return I(t) (default: every day ``0..days``).
    size : int or tuple of int, optional
        Number (shape) of epidemics; default: the broadcast shape of ``beta`` and ``gamma``.

    Returns
    -------
    numpy.ndarray
        Infected counts I(t) at the recorded days, shape ``(*size, len(record_days))``
        (``(*size, days + 1)`` by default), int64.

    Examples
    --------
    >>> import numpy as np
    >>> curves = simulate_sir(np.random.default_rng(0), 0.6, 0.05, population=1000,
    ...                       days=30, size=4)
    >>> curves.shape, int(curves[0, 0])
    ((4, 31), 1)
    """
    beta = np.asarray(beta, dtype=float)
    gamma = np.asarray(gamma, dtype=float)
    shape = np.broadcast_shapes(beta.shape, gamma.shape) if size is None else (
        (size,) if np.isscalar(size) else tuple(size))
    if population < 1 or not 0 <= initial_infected <= population:
        raise ValueError("need population >= 1 and 0 <= initial_infected <= population")
    if steps_per_day < 1 or days < 0:
        raise ValueError("need steps_per_day >= 1 and days >= 0")
    if np.any(beta < 0) or np.any(gamma < 0):
        raise ValueError("beta and gamma must be >= 0")
    record = np.arange(days + 1) if record_days is None else np.asarray(record_days, dtype=int)
    if record.ndim != 1 or np.any(np.diff(record) <= 0) or record[0] < 0:
        raise ValueError("record_days must be increasing days >= 0")
    if max_step is not None and not max_step > 0:
        raise ValueError("max_step must be > 0")
    beta_k = np.broadcast_to(beta / population, shape)
    gamma = np.broadcast_to(gamma, shape)
    gamma_max = float(np.max(gamma)) if gamma.size else 0.0
    s = np.full(shape, population - initial_infected, dtype=np.int64)
    i = np.full(shape, initial_infected, dtype=np.int64)
    out = np.empty((*shape, record.size), dtype=np.int64)
    t = 0.0
    for k, day in enumerate(record):
        while t < day:
            if max_step is None:
                dt = min(1.0 / steps_per_day, day - t)
                if day - t - dt < 1e-9:  # land on the day, without a sliver of a step
                    dt = day - t
            else:
                rho = max(float(np.max(np.abs(beta_k * s - gamma), initial=0.0)),
                          float(np.max(beta_k * i, initial=0.0)), gamma_max, 1e-12)
                dt = min(max_step / rho, day - t)
            mid = np.exp(0.5 * dt * (beta_k * s - gamma))  # I* / I
            new_inf = rng.binomial(s, -np.expm1(-beta_k * dt * i * mid))
            new_rec = rng.binomial(i, np.minimum(gamma * dt * mid, 1.0))
            s -= new_inf
            i += new_inf - new_rec
            t = float(day) if day - t - dt < 1e-9 else t + dt
        out[..., k] = i
    return out


def sir_ode(beta: float, gamma: float, *, population: float, days: int = 160,
            initial_infected: float = 1.0) -> np.ndarray:
    """The deterministic SIR curve I(t) at days ``0..days`` (the large-K limit).

    ``dS/dt = −βSI/K``, ``dI/dt = βSI/K − γI``, solved by SciPy (LSODA, tight tolerances).

    Returns
    -------
    numpy.ndarray
        I(t), shape ``(days + 1,)``.
    """
    def rhs(_t, y):
        s, i = y
        inf = beta * s * i / population
        return [-inf, inf - gamma * i]

    t = np.arange(days + 1, dtype=float)
    sol = solve_ivp(rhs, (0.0, float(days)), [population - initial_infected, initial_infected],
                    t_eval=t, method="LSODA", rtol=1e-9, atol=1e-9)
    return sol.y[1]


# --------------------------------------------------------------------------------------
# Tuberculosis birth–death model (Lintusaari et al. 2019; Park et al. section 6.3)
# --------------------------------------------------------------------------------------

#: Names of the columns :func:`tb_summaries` returns.
TB_SUMMARY_NAMES = ("n_obs", "n_clusters", "largest", "mean_largest_gap", "singletons_share",
                    "pairs_share", "largest_obs_period", "largest_obs_months")


def tb_rates(r1, t1, r2, *, d2: float = 5.95):
    """Birth and death rates from (R1, t1, R2) as Lintusaari et al. parameterise them.

    The non-compliant hosts (reproductive number R1 > 1, net transmission rate t1) have death
    rate ``d1 = t1 / (R1 − 1)`` and transmission rate ``a1 = t1 + d1``; the compliant hosts
    have the fixed death rate ``d2`` (5.95 a year) and transmission rate ``a2 = R2 · d2``.

    Returns
    -------
    a2, d2, a1, d1 : numpy.ndarray
        Rates per year, broadcast.
    """
    r1, t1, r2 = (np.asarray(v, dtype=float) for v in (r1, t1, r2))
    d1 = t1 / np.abs(r1 - 1.0)
    return r2 * d2, np.broadcast_to(d2, r2.shape).astype(float), t1 + d1, d1


def tb_balance(burden, a2, d2, a1, d1, p_compliance: float = 0.95):
    """Mean compliant and non-compliant population sizes at balance (Lintusaari et al.).

    Parameters
    ----------
    burden, a2, d2, a1, d1 : float or array_like
        Rates per year (see :func:`tb_rates`).
    p_compliance : float, default 0.95

    Returns
    -------
    n_c, n_nc : numpy.ndarray
        Balance sizes of the compliant and non-compliant populations; the mean number
        observed a year is ``p_observed · (n_c d2 + n_nc d1)``. Negative or infinite where the
        rates admit no balance.
    """
    q = 1.0 - p_compliance
    n_nc = burden * d2 * q / (d2 * d1 - a2 * d1 * p_compliance - a1 * d2 * q)
    n_c = (n_nc * (d1 - a1 * q) - burden * q) / (a2 * q)
    return n_c, n_nc


def simulate_tb(rng: np.random.Generator, burden, r1, t1, r2, *, size: int,
                d2: float = 5.95, p_compliance: float = 0.95, p_observed: float = 0.8,
                t_obs: float = 2.0, min_warmup: float = 15.0, max_warmup: float = 300.0,
                max_hosts: int = 4096, max_observed: int = 4096) -> dict:
    """Simulate outbreaks of the tuberculosis birth–death model, ``size`` at once.

    The model of Lintusaari et al. (2019, section 3; their ``simulator.py``) as ABCDP's
    section 6.3 uses it. Infectious hosts are compliant with therapy (probability
    ``p_compliance`` at infection) or not. Events, in continuous time:

    * a new case of a new strain (reactivation or immigration) at rate ``burden``;
    * transmission from a compliant (non-compliant) host at rate a2 (a1) per host: the new
      host joins the source's cluster (strain), compliant with probability ``p_compliance``;
    * death/recovery of a compliant (non-compliant) host at rate d2 (d1) per host; after the
      warm-up, the host is observed with probability ``p_observed``, with its cluster and time.

    Choosing the host of an event uniformly within its compartment is choosing its cluster in
    proportion to the cluster's size there, as Lintusaari et al. do. The warm-up follows their
    rule: run whole years until both compartments have reached their balance sizes (at most
    ``max_warmup / 2`` years), then warm up for ``max(2 · years, min_warmup)`` years; observe
    for ``t_obs`` years. Vectorised: one Gillespie event per outbreak per iteration, every
    outbreak in its own time, hosts kept in packed arrays (no loop over hosts or clusters).

    Parameters
    ----------
    rng : numpy.random.Generator
    burden, r1, t1, r2 : float or array_like
        Parameters, broadcast to ``(size,)`` (the paper: β, R1, t1, R2).
    size : int
        Number of outbreaks.
    d2, p_compliance, p_observed, t_obs, min_warmup, max_warmup : float
        Fixed settings (Lintusaari et al.'s defaults; ABCDP's run used ``min_warmup = 15``).
    max_hosts, max_observed : int
        Capacity per outbreak; an outbreak that exceeds either stops and is flagged in
        ``overflow`` (its summaries are then NaN in :func:`tb_summaries`).

    Returns
    -------
    dict
        ``clusters`` (size, max_observed) cluster id of each observed host (−1: none),
        ``times`` (size, max_observed) its observation time in years since the warm-up,
        ``n_obs`` (size,), ``overflow`` (size,) bool, ``warmup`` (size,) years.

    Examples
    --------
    >>> import numpy as np
    >>> out = simulate_tb(np.random.default_rng(0), 192, 5.88, 6.74, 0.09, size=2)
    >>> out["clusters"].shape[0], bool(out["n_obs"].min() > 0)
    (2, True)
    """
    shape = (int(size),)
    burden, r1, t1, r2 = (np.broadcast_to(np.asarray(v, dtype=float), shape) for v in
                          (burden, r1, t1, r2))
    a2, d2v, a1, d1 = (np.broadcast_to(v, shape) for v in tb_rates(r1, t1, r2, d2=d2))
    m_c, m_nc = tb_balance(burden, a2, d2v, a1, d1, p_compliance)
    b = shape[0]
    rows = np.arange(b)
    # hosts[k] holds the cluster ids of compartment k (0: non-compliant, 1: compliant), packed
    hosts = np.full((2, b, max_hosts), -1, dtype=np.int64)
    count = np.zeros((2, b), dtype=np.int64)
    obs_cluster = np.full((b, max_observed), -1, dtype=np.int64)
    obs_time = np.full((b, max_observed), np.nan)
    n_obs = np.zeros(b, dtype=np.int64)
    next_id = np.zeros(b, dtype=np.int64)
    time = np.zeros(b)
    reached = np.zeros((2, b), dtype=bool)
    warmup = np.full(b, np.inf)
    year = np.zeros(b)  # last whole year checked
    running = np.ones(b, dtype=bool)
    overflow = np.zeros(b, dtype=bool)
    while running.any():
        idx = rows[running]
        n_nc, n_c = count[0, idx], count[1, idx]
        rates = np.stack([burden[idx], a2[idx] * n_c, d2v[idx] * n_c, a1[idx] * n_nc,
                          d1[idx] * n_nc], axis=1)
        total = rates.sum(axis=1)
        t_new = time[idx] + rng.exponential(1.0 / total)
        # Warm-up rule: at each whole year crossed, compare the state with the balance sizes.
        undecided = np.isinf(warmup[idx])
        crossed = undecided & (np.floor(t_new) > year[idx])
        if crossed.any():
            j = idx[crossed]
            reached[0, j] |= count[0, j] >= m_nc[j]
            reached[1, j] |= count[1, j] >= m_c[j]
            year[j] = np.floor(t_new[crossed])
            done = (reached[0, j] & reached[1, j]) | (year[j] >= max_warmup / 2)
            warmup[j[done]] = np.maximum(2.0 * year[j[done]], min_warmup)
        stop = t_new >= warmup[idx] + t_obs
        running[idx[stop]] = False
        go = ~stop
        idx, t_new, rates, total = idx[go], t_new[go], rates[go], total[go]
        if idx.size == 0:
            break
        time[idx] = t_new
        u = rng.random(idx.size) * total
        event = (u[:, None] >= np.cumsum(rates, axis=1)).sum(axis=1).clip(max=4)
        comp = (rng.random(idx.size) <= p_compliance).astype(np.int64)
        pick = rng.random(idx.size)
        # new strain
        e = event == 0
        if e.any():
            j, k = idx[e], comp[e]
            _add(hosts, count, k, j, next_id[j], overflow, max_hosts)
            next_id[j] += 1
        # transmission from compliant (1) or non-compliant (0) hosts
        for ev, src in ((1, 1), (3, 0)):
            e = event == ev
            if e.any():
                j = idx[e]
                source = hosts[src, j, (pick[e] * count[src, j]).astype(np.int64)]
                _add(hosts, count, comp[e], j, source, overflow, max_hosts)
        # death of a compliant (1) or non-compliant (0) host
        for ev, src in ((2, 1), (4, 0)):
            e = event == ev
            if e.any():
                j = idx[e]
                slot = (pick[e] * count[src, j]).astype(np.int64)
                cluster = hosts[src, j, slot]
                last = count[src, j] - 1
                hosts[src, j, slot] = hosts[src, j, last]
                hosts[src, j, last] = -1
                count[src, j] = last
                seen = (t_new[e] >= warmup[j]) & (rng.random(j.size) <= p_observed)
                if seen.any():
                    js = j[seen]
                    full = n_obs[js] >= max_observed
                    overflow[js[full]] = True
                    js, cl, ts = js[~full], cluster[seen][~full], t_new[e][seen][~full]
                    obs_cluster[js, n_obs[js]] = cl
                    obs_time[js, n_obs[js]] = ts - warmup[js]
                    n_obs[js] += 1
        running &= ~overflow
    return {"clusters": obs_cluster, "times": obs_time, "n_obs": n_obs, "overflow": overflow,
            "warmup": warmup}


def _add(hosts, count, comp, rows, cluster, overflow, max_hosts):
    """Append hosts of the given clusters to compartment ``comp`` of outbreaks ``rows``."""
    full = count[comp, rows] >= max_hosts
    overflow[rows[full]] = True
    comp, rows, cluster = comp[~full], rows[~full], cluster[~full]
    hosts[comp, rows, count[comp, rows]] = cluster
    count[comp, rows] += 1


def tb_summaries(sim: dict, *, t_obs: float = 2.0) -> np.ndarray:
    """The summaries of Lintusaari et al. (Table 1) of each simulated outbreak.

    Columns (:data:`TB_SUMMARY_NAMES`): number of observed hosts, number of observed clusters,
    size of the largest cluster, mean gap between the four largest cluster sizes, the numbers
    of clusters of size 1 and of size 2 divided by the number observed, and, for the largest
    cluster, the number of months from its first to its last observation month and the number
    of months in which it was observed. Rows of outbreaks that overflowed are NaN.

    Returns
    -------
    numpy.ndarray
        Shape ``(size, 8)``.
    """
    clusters, times = sim["clusters"], sim["times"]
    out = np.full((clusters.shape[0], len(TB_SUMMARY_NAMES)), np.nan)
    months = int(round(12 * t_obs))
    for r in range(clusters.shape[0]):
        if sim["overflow"][r]:
            continue
        n = int(sim["n_obs"][r])
        if n == 0:
            out[r] = [0, 0, 0, 0, 0, 0, 0, 0]
            continue
        ids, inverse, sizes = np.unique(clusters[r, :n], return_inverse=True, return_counts=True)
        top = np.sort(sizes)[::-1][:4]
        top = np.concatenate([top, np.zeros(4 - top.size)])
        largest = int(np.argmax(sizes))
        t = times[r, :n][inverse == largest]
        per_month = np.bincount(np.floor(t * 12).astype(int).clip(0, months - 1),
                                minlength=months)
        seen = np.flatnonzero(per_month)
        period = seen[-1] + 1 - seen[0]
        out[r] = [n, ids.size, sizes[largest], np.mean(top[:-1] - top[1:]),
                  np.sum(sizes == 1) / n, np.sum(sizes == 2) / n, period, seen.size]
    return out


def tb_distance(observed: np.ndarray, simulated: np.ndarray) -> np.ndarray:
    """Weighted L2 distance of Lintusaari et al. between summaries, row by row.

    ``sqrt(Δn_obs² + Δn_clusters² + (2 Δlargest)² + (10 Δgap)² + Σ_{s=1,2} (100 Δshare_s /
    share_s)² + (10 Δperiod)² + (10 Δmonths)²)``, where the relative error of the shares of
    clusters of size 1 and 2 divides by the observed share (their ``distance``). Rows with
    a NaN (an observed share of 0, an overflowed simulation) give NaN.

    Parameters
    ----------
    observed, simulated : numpy.ndarray
        Summaries from :func:`tb_summaries`, shape ``(n, 8)`` each (or broadcastable).

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``.
    """
    o, s = np.asarray(observed, dtype=float), np.asarray(simulated, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (s[..., 4:6] - o[..., 4:6]) / o[..., 4:6]
        parts = np.concatenate([
            s[..., 0:2] - o[..., 0:2],
            2.0 * (s[..., 2:3] - o[..., 2:3]),
            10.0 * (s[..., 3:4] - o[..., 3:4]),
            100.0 * share,
            10.0 * (s[..., 6:8] - o[..., 6:8]),
        ], axis=-1)
        parts = np.where(np.isinf(parts), np.nan, parts)
    return np.sqrt(np.sum(parts**2, axis=-1))
