"""The step constructors' signatures, pinned as users see them (issue 15, item 2).

The steps share their tail of arguments (budget, chains, ledger, PyMC's step arguments)
through :mod:`pymc_dp.steps.base`; what ``inspect.signature``, ``help()`` and an IDE show
for each step must not move with it: the same names in the same order, the same kinds
(all keyword-only but ``vars``), defaults and annotations.
"""

import inspect

import pytest

import pymc_dp

from pymc_dp.steps.base import PrivateStep
from pymc_dp.steps.dp_barker import DPBarker
from pymc_dp.steps.gaussian import GaussianPrivateStep
from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty
from pymc_dp.steps.subsampled import SubsampledPrivateStep

REQUIRED = "<required>"
NONE = "-"  # no annotation

# (name, default's repr, annotation) of every keyword-only argument; ``vars=None`` comes
# first, positional or keyword, in every step.
TAIL = [  # every step's last eight
    ("chains", "None", "int | None"),
    ("ledger_dir", "None", NONE),
    ("budget", "None", NONE),  # a shared pymc_dp.Budget (issue 16)
    ("model", "None", NONE),
    ("initial_point", "None", NONE),
    ("compile_kwargs", "None", NONE),
    ("blocked", "True", "bool"),
    ("rng", "None", NONE),
]
TAIL_ANNOTATED = [  # PrivateStep's and ABCDP's own annotations
    (name, default, "dict | None" if name in ("initial_point", "compile_kwargs") else ann)
    for name, default, ann in TAIL
]
BUDGET = [("eps", REQUIRED, "float"), ("delta", "None", "float | None")]
# The clip diagnostics (issue 17, item 4): every step that clips, first of the shared tail.
DIAG = [("clip_diagnostics", "None", NONE)]
DIAG_ANNOTATED = [("clip_diagnostics", "None", "int | ClipDiagnostics | None")]
PROPOSAL = [
    ("proposal", "'random_walk'", "str"),
    ("noise_multiplier", "None", "float | None"),
    ("S", "None", NONE),
    ("scaling", "None", "float | None"),
]

SIGNATURES = {
    PrivateStep: BUDGET + DIAG_ANNOTATED + TAIL_ANNOTATED,
    GaussianPrivateStep: BUDGET + DIAG_ANNOTATED + TAIL_ANNOTATED,
    SubsampledPrivateStep: BUDGET + [
        ("batch_size", "None", "int | None"),
        ("tempering", "1.0", "float"),
        ("proposal", "'random_walk'", "str"),
        ("S", "None", NONE),
        ("scaling", "None", "float | None"),
        ("tune_interval", "100", "int"),
    ] + DIAG + TAIL,
    pymc_dp.DPPenalty: BUDGET + [("clip_bound", "None", "float | None")] + PROPOSAL + [
        ("warmup", "True", NONE),
        ("method", "'auto'", "str"),
        ("tune_interval", "100", "int"),
    ] + DIAG + TAIL,
    MinibatchDPPenalty: BUDGET + [
        ("batch_size", "None", "int | None"),
        ("clip_bound", "None", "float | None"),
        ("tempering", "1.0", "float"),
    ] + PROPOSAL + [
        ("warmup", "True", NONE),
        ("method", "'auto'", "str"),
        ("tune_interval", "100", "int"),
    ] + DIAG + TAIL,
    DPBarker: BUDGET + [
        ("batch_size", "None", "int | None"),
        ("tempering", "1.0", "float"),
        ("noise_variance", "2.0", "float"),
        ("proposal", "'random_walk'", "str"),
        ("S", "None", NONE),
        ("scaling", "None", "float | None"),
        ("method", "'auto'", "str"),
        ("warmup", "True", NONE),
        ("tune_interval", "100", "int"),
    ] + DIAG + TAIL,
    pymc_dp.DPHMC: BUDGET + [
        ("grad_clip", "None", "float | None"),
        ("loglik_clip", "None", "float | None"),
        ("n_steps", "None", "int | None"),
        ("path_length", "None", "float | None"),
        ("step_size", "None", "float | None"),
        ("budget_split", "None", "float | None"),
        ("grad_noise_multiplier", "None", "float | None"),
        ("loglik_noise_multiplier", "None", "float | None"),
        ("target_accept", "0.65", "float"),
        ("adapt_step_size", "True", "bool"),
        ("inv_mass", "None", NONE),
        ("adapt_mass_matrix", "False", "bool"),
        ("warmup", "True", NONE),
        ("method", "'auto'", "str"),
    ] + DIAG + TAIL,
    pymc_dp.ABCDP: [  # pure ε-DP: no delta
        ("eps", REQUIRED, "float"),
        ("threshold", REQUIRED, "float"),
        ("resample", "False", "bool"),
        ("distance", "None", "Distance | None"),
        ("max_prior_draws", "100000", "int"),
        ("batch_size", "256", "int"),
        ("executor", "None", "Executor | None"),
        ("chunk_size", "None", "int | None"),
        ("n_pilot", "10", "int"),
    ] + TAIL_ANNOTATED,
}


def _described(parameter: inspect.Parameter) -> tuple[str, str, str]:
    default = REQUIRED if parameter.default is parameter.empty else repr(parameter.default)
    annotation = NONE if parameter.annotation is parameter.empty else parameter.annotation
    return parameter.name, default, annotation


@pytest.mark.parametrize("step", SIGNATURES, ids=lambda step: step.__name__)
def test_signature_is_unchanged(step):
    vars_, *rest = inspect.signature(step).parameters.values()
    assert (vars_.name, vars_.kind, vars_.default) == (
        "vars", inspect.Parameter.POSITIONAL_OR_KEYWORD, None
    )
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest), [
        p.name for p in rest if p.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    assert [_described(p) for p in rest] == SIGNATURES[step]


@pytest.mark.parametrize(
    "step",
    [pymc_dp.DPPenalty, MinibatchDPPenalty, DPBarker, pymc_dp.DPHMC, pymc_dp.ABCDP],
    ids=lambda step: step.__name__,
)
def test_help_names_every_argument(step):
    # help(step) shows the class docstring: each argument is named in its Parameters
    doc = inspect.getdoc(step)
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
    entries = [line for line in section.splitlines() if line and not line.startswith(" ")]
    named = {name.strip() for entry in entries for name in entry.split(":")[0].split(",")}
    missing = [name for name in inspect.signature(step).parameters if name not in named]
    assert not missing, f"{step.__name__}'s docstring leaves out {missing}"
