"""Neural posterior and likelihood estimation from privatized releases (SPPE / SPLE).

Xiong, Ju & Zhang's main method (Algorithms 1 and 2): train a normalizing flow on pairs
``(θ, s_dp)`` simulated from the private-data simulator (θ from a proposal, the confidential
statistic from the model, then the release's own mechanism) and condition it on the observed
release. Sequential rounds: after each round the proposal becomes the current estimate of
the posterior given the release, and every round's simulations are kept for training.

* **SPPE** (Algorithm 1): sequential neural *posterior* estimation with the automatic
  posterior transformation (APT, Greenberg et al. 2019; ``sbi``'s ``NPE``, SNPE-C). The
  flow is ``q(θ | s_dp)``; its draws at the observed release are the result.
* **SPLE** (Algorithm 2): sequential neural *likelihood* estimation (``sbi``'s ``NLE``).
  The flow is ``q(s_dp | θ)``; the result is MCMC (``sbi``'s vectorised slice sampler) on
  ``π(θ) q(s_dp | θ)``.

The mechanism noise (section 3.4): each simulated confidential statistic is privatized
``noise_draws`` times. With ``qmc=True`` (default) the uniforms driving those draws are a
scrambled Sobol point set (an independent scrambling per statistic) pushed through the
mechanism's inverse CDF (:func:`~pymc_dp.mechanisms.likelihood.mechanism_quantile`), so the
training loss averages the inner integral of eq. 9 by randomized quasi-Monte Carlo
(eq. 11); with ``qmc=False`` the noise is drawn by
:func:`~pymc_dp.mechanisms.likelihood.mechanism_sample`, plain Monte Carlo.

The flows work in PyMC's unconstrained space (a positive parameter on the log scale, and
so on): the prior there is the spec's prior with its Jacobian, compiled from the PyMC
model that ``spec.params()`` declares, so any continuous PyMC prior can be used. The
returned draws are transformed back.

Needs the optional ``sbi`` extra (``pip install "pymc_dp[sbi]"``: sbi and torch);
importing this module does not import either, calling :func:`neural_posterior` does.
Like the other routes, it is post-processing of the releases: it costs no privacy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import json
import numbers

from math import prod

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from pytensor.graph.replace import graph_replace, vectorize_graph
from pytensor.tensor.random.type import RandomGeneratorType

from pymc_dp.mechanisms.likelihood import mechanism_quantile, mechanism_sample
from pymc_dp.mechanisms.release import ledger_of
from pymc_dp.mechanisms.routes import (
    PrivatizedDataModel,
    _declare_params,
    _RecordsSimulator,
    _UserSimulator,
)

__all__ = ["neural_posterior"]

METHODS = ("SPPE", "SPLE")
#: Fewest simulations per round: sbi holds some out for validation and trains in batches.
MIN_SIMULATIONS = 50
#: The paper's training settings (appendix E): batches of 100, learning rate 5e-4, 5 % of
#: the simulations held out, training stopped after 20 epochs without improvement.
PAPER_TRAINING = {"training_batch_size": 100, "learning_rate": 5e-4,
                  "validation_fraction": 0.05, "stop_after_epochs": 20}
INSTALL_HINT = 'pip install "pymc_dp[sbi]"'


def _require_sbi():
    """torch and sbi.inference, or an ImportError naming the extra."""
    try:
        import torch
        import sbi.inference as sbi_inference
    except ImportError as err:
        raise ImportError(
            "neural_posterior (SPPE / SPLE) needs the optional sbi extra (the sbi package "
            f"and torch): {INSTALL_HINT}"
        ) from err
    return torch, sbi_inference


# --------------------------------------------------------------------------------------
# The prior in PyMC's unconstrained space
# --------------------------------------------------------------------------------------


class _UnconstrainedPrior:
    """The spec's prior as draws and log densities of the flat unconstrained vector z.

    Built from the PyMC model ``spec.params()`` declares: ``logp(Z)`` is the model's joint
    log density of the value variables with the Jacobian of their transforms (vectorised
    over rows of Z), ``draw(n, seed)`` draws the free variables and maps them forward,
    ``constrained(z)`` maps one z back to the free variables and deterministics.
    """

    def __init__(self, spec: PrivatizedDataModel):
        with pm.Model() as model:
            _declare_params(spec)
        free = list(model.free_RVs)
        if not free:
            raise ValueError("params() declared no free variables: nothing to infer")
        if model.observed_RVs or model.potentials:
            raise ValueError("params() must declare only the prior: no observed variables "
                             "or potentials")
        discrete = [rv.name for rv in free if not rv.dtype.startswith("float")]
        if discrete:
            raise ValueError(
                f"neural_posterior needs continuous parameters; {discrete} are discrete"
            )
        self.model = model
        self.names = [rv.name for rv in free]
        values = [model.rvs_to_values[rv] for rv in free]
        point = model.initial_point()
        self.value_shapes = [tuple(point[v.name].shape) for v in values]
        self.sizes = [int(prod(s)) for s in self.value_shapes]
        self.dim = sum(self.sizes)

        z = pt.vector("z", dtype="float64")
        replace, start = {}, 0
        for v, shape, size in zip(values, self.value_shapes, self.sizes):
            replace[v] = pt.cast(z[start:start + size].reshape(shape), v.dtype)
            start += size
        logp = graph_replace(model.logp(jacobian=True), replace, strict=False)
        batch = pt.matrix("Z", dtype="float64")
        self._logp = pytensor.function([batch], vectorize_graph(logp, {z: batch}))

        # The free variables and deterministics from z (as pm.sample stores them).
        self.out_names = self.names + [d.name for d in model.deterministics]
        outs = model.replace_rvs_by_values(free + list(model.deterministics))
        self._back = pytensor.function([z], graph_replace(outs, replace, strict=False))

        forward = []
        for rv in free:
            transform = model.rvs_to_transforms.get(rv)
            fwd = rv if transform is None else transform.forward(rv, *rv.owner.inputs)
            forward.append(pt.cast(fwd, "float64").flatten())
        self._draw = pm.pytensorf.compile([], pt.concatenate(forward), random_seed=0)
        self._rngs = [v for v in self._draw.get_shared()
                      if isinstance(v.type, RandomGeneratorType)]
        #: shapes of the free variables themselves (a transform may change the size)
        self.free_shapes = [tuple(np.shape(v))
                            for v in self.constrained(np.zeros(self.dim))[:len(free)]]

    def logp(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(self._logp(np.asarray(z, dtype=float).reshape(-1, self.dim)))

    def draw(self, n: int, seed: int) -> np.ndarray:
        pm.pytensorf.reseed_rngs(self._rngs, seed)
        if n == 0:
            return np.empty((0, self.dim))
        return np.stack([self._draw() for _ in range(n)])

    def constrained(self, z: np.ndarray) -> list[np.ndarray]:
        """Free variables then deterministics, at one unconstrained vector z."""
        return [np.asarray(v) for v in self._back(np.asarray(z, dtype=float))]


def _torch_prior(torch, prior: _UnconstrainedPrior):
    """The prior as a torch Distribution over z (float32, as sbi works), drawing its
    randomness from torch's generator so that torch's seed fixes it."""
    from torch.distributions import Distribution, constraints

    class PyMCPrior(Distribution):
        arg_constraints: dict = {}
        support = constraints.independent(constraints.real, 1)
        has_rsample = False

        def __init__(self):
            super().__init__(batch_shape=torch.Size(), event_shape=torch.Size([prior.dim]),
                             validate_args=False)
            z = prior.draw(4096, 0)  # a fixed reference sample for mean and stddev
            self._mean = torch.as_tensor(z.mean(0), dtype=torch.float32)
            self._std = torch.as_tensor(z.std(0), dtype=torch.float32)

        @property
        def mean(self):
            return self._mean

        @property
        def stddev(self):
            return self._std

        @property
        def variance(self):
            return self._std**2

        def sample(self, sample_shape=()):
            shape = torch.Size(sample_shape)
            seed = int(torch.randint(0, 2**62, ()).item())
            z = prior.draw(int(shape.numel()), seed)
            return torch.as_tensor(z, dtype=torch.float32).reshape(*shape, prior.dim)

        def log_prob(self, value):
            value = torch.as_tensor(value)
            lp = prior.logp(value.detach().cpu().numpy().astype(np.float64))
            return torch.as_tensor(lp, dtype=torch.float32).reshape(value.shape[:-1])

    return PyMCPrior()


# --------------------------------------------------------------------------------------
# The private-data simulator
# --------------------------------------------------------------------------------------


class _PrivateDataSimulator:
    """θ (unconstrained rows) → confidential statistic (the spec's model) → the releases'
    mechanisms, ``noise_draws`` times per statistic."""

    def __init__(self, spec: PrivatizedDataModel, prior: _UnconstrainedPrior,
                 noise_draws: int, qmc: bool):
        self.spec, self.prior, self.m, self.qmc = spec, prior, noise_draws, qmc
        if spec.records is not None:
            self.confidential = _RecordsSimulator(spec, 1)
            if [rv.name for rv in self.confidential.free] != prior.names:  # pragma: no cover
                raise RuntimeError("params() declared different variables on a second call")
        else:
            self.confidential = _UserSimulator(spec, 1, prior.names)
        self.releases = list(spec.releases.values())
        self.seg = np.cumsum([0] + spec.sizes)
        self.k = int(self.seg[-1])

    def statistics(self, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The confidential statistic at each row of z, shape (rows, K)."""
        n_free = len(self.prior.names)
        out = np.empty((len(z), self.k))
        for i, row in enumerate(z):
            values = self.prior.constrained(row)[:n_free]
            out[i] = np.asarray(self.confidential(rng, values), dtype=float).reshape(self.k)
        return out

    def privatize(self, stats: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``noise_draws`` releases of each statistic: rows i*M .. i*M+M-1 for stats[i]."""
        m = self.m
        rep = np.repeat(stats, m, axis=0)
        if self.qmc:
            from scipy.stats import qmc

            u = np.stack([qmc.Sobol(d=self.k, scramble=True, seed=rng).random(m)
                          for _ in range(len(stats))]).reshape(len(stats) * m, self.k)
            u = np.clip(u, 1e-12, 1.0 - 1e-12)
            pieces = [mechanism_quantile(rel, rep[:, a:b], u[:, a:b])
                      for rel, a, b in zip(self.releases, self.seg[:-1], self.seg[1:])]
        else:
            pieces = [mechanism_sample(rel, rep[:, a:b], rng)
                      for rel, a, b in zip(self.releases, self.seg[:-1], self.seg[1:])]
        return np.concatenate(pieces, axis=1)


# --------------------------------------------------------------------------------------
# The route
# --------------------------------------------------------------------------------------


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        shown = repr(value) if isinstance(value, numbers.Number) else f"a {type(value).__name__}"
        raise ValueError(f"{name} must be an integer >= {minimum}, got {shown}")
    return int(value)


def _check_arguments(spec, method, rounds, simulations, noise_draws, qmc, draws, chains,
                     training, mcmc):
    if not isinstance(spec, PrivatizedDataModel):
        raise ValueError(
            f"spec must be a PrivatizedDataModel (priors, a model of the confidential data and "
            f"the releases), got a {type(spec).__name__}"
        )
    if not spec.releases:  # PrivatizedDataModel refuses this itself; kept for subclasses
        raise ValueError("spec has no releases to condition on")
    if not isinstance(method, str) or method.upper() not in METHODS:
        shown = repr(method) if isinstance(method, str) else f"a {type(method).__name__}"
        raise ValueError(f"method must be 'SPPE' or 'SPLE', got {shown}")
    rounds = _check_count(rounds, "rounds", 1)
    simulations = _check_count(simulations, "simulations (per round)", MIN_SIMULATIONS)
    noise_draws = _check_count(noise_draws, "noise_draws", 1)
    if not isinstance(qmc, bool):
        raise ValueError("qmc must be True or False")
    if qmc and noise_draws & (noise_draws - 1):
        raise ValueError(
            f"with qmc=True, noise_draws must be a power of 2 (a balanced Sobol point set), "
            f"got {noise_draws}"
        )
    draws = _check_count(draws, "draws", 1)
    chains = _check_count(chains, "chains", 1)
    for name, value in (("training", training), ("mcmc", mcmc)):
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{name} must be a dict of keyword arguments or None")
    return method.upper(), rounds, simulations, noise_draws, draws, chains


class _NoTracking:
    """sbi's tracker interface, logging nothing (its default writes TensorBoard logs into
    ``./sbi-logs`` of the working directory)."""

    log_dir = None

    def log_metric(self, name, value, step=None):
        pass

    def log_metrics(self, metrics, step=None):
        pass

    def log_params(self, params):
        pass

    def add_figure(self, name, figure, step=None):
        pass

    def flush(self):
        pass


@contextlib.contextmanager
def _seeded(torch, seed: int):
    """torch's and NumPy's global generators seeded (sbi draws from both), then restored."""
    state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        try:
            yield
        finally:
            np.random.set_state(state)


def neural_posterior(spec: PrivatizedDataModel, *, method: str = "SPPE", rounds: int = 10,
                     simulations: int = 1000, noise_draws: int = 4, qmc: bool = True,
                     draws: int = 1000, chains: int = 4, density_estimator="maf",
                     training: dict | None = None, mcmc: dict | None = None, rng=None,
                     progressbar: bool = False):
    """Posterior given the releases by sequential neural estimation (SPPE or SPLE).

    Xiong, Ju & Zhang's Algorithms 1 and 2 through the ``sbi`` package: in each of
    ``rounds`` rounds, draw ``simulations`` parameter values from the proposal (the prior in
    round 1, then the current posterior estimate at the observed release), simulate the
    confidential statistic (``spec.records`` or ``spec.simulator``), apply each release's
    own mechanism ``noise_draws`` times, add the pairs to those of earlier rounds and train
    the flow on all of them.

    Parameters
    ----------
    spec : PrivatizedDataModel
        Priors (``params``), the model of the confidential statistic (``records`` or
        ``simulator``) and the releases with their mechanisms. Parameters must be
        continuous; any continuous PyMC prior works (the flow is trained on PyMC's
        unconstrained scale).
    method : {"SPPE", "SPLE"}, default "SPPE"
        Neural posterior estimation (APT / SNPE-C, ``sbi.inference.NPE``) or neural
        likelihood estimation (``sbi.inference.NLE``) followed by slice-sampling MCMC.
    rounds : int, default 10
        Sequential rounds (the paper's R = 10).
    simulations : int, default 1000
        Confidential simulations per round (the paper's N = 1000); at least 50.
    noise_draws : int, default 4
        Privatized copies of each simulated statistic (M of the paper's eq. 11); the flow is
        trained on ``simulations × noise_draws`` pairs per round.
    qmc : bool, default True
        Randomized quasi-Monte Carlo noise (scrambled Sobol uniforms through the
        mechanism's inverse CDF, ``noise_draws`` a power of 2); False: plain Monte Carlo.
    draws, chains : int, default 1000 and 4
        Draws returned per chain. SPPE: independent draws from the flow, split into
        ``chains`` groups; SPLE: ``chains`` slice-sampling chains.
    density_estimator : str or callable, default "maf"
        Passed to sbi (``"maf"``, ``"nsf"`` — the paper's neural spline flow, slower on a
        CPU — ``"mdn"``, or an sbi builder such as ``sbi.neural_nets.posterior_nn(...)``).
    training : dict, optional
        Keyword arguments of sbi's ``train`` over the paper's settings (batches of 100,
        learning rate 5e-4, 5 % validation, stop after 20 epochs without improvement).
    mcmc : dict, optional
        SPLE only: fields of sbi's ``MCMCPosteriorParameters`` (default: vectorised slice
        sampling, 20 chains for the proposals, 200 warm-up steps, no thinning).
    rng : int or numpy.random.Generator, optional
        Seeds everything (simulations, noise, torch's training and sampling): the same seed
        gives the same result on the same machine and library versions. None: fresh entropy.
    progressbar : bool, default False
        sbi's training and sampling progress bars.

    Returns
    -------
    xarray.DataTree
        ``posterior``: the parameters (and deterministics) declared by ``params()``, with
        dims ``(chain, draw, ...)``, as from ``pm.sample``; ``simulations``: the parameter
        values simulated in each round (``round`` says which). ``attrs`` name the method,
        rounds, simulations per round, noise draws and how they were drawn, the releases
        (``releases``, JSON) and their ledger (``releases_ledger``, JSON): inference from
        the releases is post-processing and costs no privacy of its own.

    Raises
    ------
    ValueError
        On a bad argument, before anything is simulated.
    ImportError
        If sbi or torch is missing: ``pip install "pymc_dp[sbi]"``.

    Notes
    -----
    Each round's flow is trained until its validation loss stops improving, so run time
    grows with the rounds (the data sets are kept). The validation pairs are drawn at
    random from all pairs, so with ``noise_draws > 1`` a held-out pair may share its θ and
    confidential statistic with training pairs (it differs in its noise).
    """
    method, rounds, simulations, noise_draws, draws, chains = _check_arguments(
        spec, method, rounds, simulations, noise_draws, qmc, draws, chains, training, mcmc)
    torch, sbi_inference = _require_sbi()
    import sbi

    gen = np.random.default_rng(rng)
    torch_seed = int(gen.integers(2**62))
    prior = _UnconstrainedPrior(spec)
    simulator = _PrivateDataSimulator(spec, prior, noise_draws, qmc)
    train_kwargs = {**PAPER_TRAINING, **(training or {})}
    from sbi.inference.posteriors.posterior_parameters import MCMCPosteriorParameters

    est_cls = sbi_inference.NPE if method == "SPPE" else sbi_inference.NLE
    known = {"training": set(inspect.signature(est_cls.train).parameters) - {"self"},
             "mcmc": {f.name for f in dataclasses.fields(MCMCPosteriorParameters)}}
    for name, given in (("training", training), ("mcmc", mcmc)):
        unknown = sorted(set(given or ()) - known[name])
        if unknown:
            raise ValueError(f"{name} has arguments sbi does not know: {unknown}")
    mcmc_params = {"method": "slice_np_vectorized", "num_chains": 20, "warmup_steps": 200,
                   "thin": 1, "init_strategy": "resample", **(mcmc or {})}
    x_obs = torch.as_tensor(spec.observed, dtype=torch.float32).reshape(1, -1)

    thetas, round_of = [], []
    quiet = contextlib.nullcontext() if progressbar else contextlib.redirect_stdout(io.StringIO())
    with _seeded(torch, torch_seed), quiet:
        torch_prior = _torch_prior(torch, prior)
        inference = est_cls(prior=torch_prior, density_estimator=density_estimator,
                            tracker=_NoTracking(), show_progress_bars=progressbar)
        proposal, posterior = torch_prior, None
        for r in range(rounds):
            if posterior is None:
                theta = proposal.sample((simulations,))
            else:
                theta = proposal.sample((simulations,), show_progress_bars=progressbar)
            theta = theta.reshape(simulations, prior.dim)
            z = theta.detach().cpu().numpy().astype(np.float64)
            stats = simulator.statistics(z, gen)
            x = simulator.privatize(stats, gen)
            theta_rep = theta.repeat_interleave(noise_draws, dim=0)
            x_t = torch.as_tensor(x, dtype=torch.float32)
            if method == "SPPE":
                inference.append_simulations(theta_rep, x_t,
                                             proposal=None if r == 0 else proposal)
            else:
                inference.append_simulations(theta_rep, x_t)
            estimator = inference.train(show_train_summary=False, **train_kwargs)
            if method == "SPPE":
                posterior = inference.build_posterior(estimator)
            else:
                posterior = inference.build_posterior(
                    estimator, posterior_parameters=MCMCPosteriorParameters(**mcmc_params))
            posterior = posterior.set_default_x(x_obs)
            proposal = posterior
            thetas.append(z)
            round_of.append(np.full(simulations, r + 1))
        if method == "SPPE":
            final = posterior.sample((chains * draws,), show_progress_bars=progressbar)
        else:
            final = posterior.sample((chains * draws,), num_chains=chains,
                                     show_progress_bars=progressbar)
    z_final = final.detach().cpu().numpy().astype(np.float64).reshape(chains, draws, prior.dim)
    return _result(spec, prior, method, z_final, np.concatenate(thetas),
                   np.concatenate(round_of), {
                       "rounds": rounds, "simulations_per_round": simulations,
                       "noise_draws": noise_draws, "qmc": qmc,
                       "density_estimator": (density_estimator if isinstance(
                           density_estimator, str) else "custom"),
                       "sbi_version": sbi.__version__, "torch_version": torch.__version__,
                   })


def _result(spec, prior, method, z_final, z_sims, round_of, info):
    import arviz as az
    import xarray as xr

    chains, draws, _ = z_final.shape
    per_draw = [prior.constrained(row) for row in z_final.reshape(chains * draws, -1)]
    model = prior.model
    dims = {name: list(model.named_vars_to_dims.get(name, ()))
            for name in prior.out_names if model.named_vars_to_dims.get(name)}
    coords = {k: list(v) for k, v in model.coords.items() if v is not None}
    posterior = {}
    for j, name in enumerate(prior.out_names):
        vals = np.stack([d[j] for d in per_draw])
        posterior[name] = vals.reshape(chains, draws, *vals.shape[1:])
    n_free = len(prior.names)
    sims = np.stack([np.concatenate([np.ravel(v) for v in prior.constrained(row)[:n_free]])
                     for row in z_sims])
    method_text = ("SPPE: sequential neural posterior estimation (APT / SNPE-C, sbi NPE)"
                   if method == "SPPE" else
                   "SPLE: sequential neural likelihood estimation (sbi NLE) + slice sampling")
    noise = ("randomized quasi-Monte Carlo (scrambled Sobol through the mechanism's inverse "
             "CDF)" if info["qmc"] else "Monte Carlo (mechanism_sample)")
    attrs = {
        "inference_method": method, "inference": method_text,
        "rounds": info["rounds"], "simulations_per_round": info["simulations_per_round"],
        "noise_draws": info["noise_draws"], "noise_sampling": noise,
        "density_estimator": info["density_estimator"],
        "sbi_version": info["sbi_version"], "torch_version": info["torch_version"],
        "privacy": ("post-processing of the releases: no privacy cost beyond the releases' "
                    "own (releases_ledger)"),
        "releases": json.dumps([rel.to_dict() for rel in spec.releases.values()]),
        "releases_ledger": json.dumps(ledger_of(spec.releases).to_dict()),
    }
    tree = az.from_dict({"posterior": posterior}, dims=dims, coords=coords)
    sim_vars, start = {"round": ("simulation", round_of)}, 0
    for name, shape in zip(prior.names, prior.free_shapes):
        size = int(prod(shape))
        block = sims[:, start:start + size].reshape(len(sims), *shape)
        sim_vars[name] = (("simulation", *[f"{name}_dim_{i}" for i in range(len(shape))]),
                          block)
        start += size
    tree["simulations"] = xr.DataTree(xr.Dataset(sim_vars))
    tree.attrs.update(attrs)
    return tree

