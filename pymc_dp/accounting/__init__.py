"""Privacy accounting: mechanism events, the exact Gaussian accountant, the bridge to
dp-accounting for subsampled mechanisms, noise calibration and the privacy ledger.

See ``docs/algorithms.md`` ("Accounting") for the rules, and :mod:`pymc_dp.accounting.ledger`
for how a ledger composes its events.
"""

from pymc_dp.accounting.budget import Budget, BudgetSlice, BudgetStoreError
from pymc_dp.accounting.dp_accounting_bridge import (
    UnsupportedEventError,
    events_from_json,
    export_dp_event,
    export_json,
    from_dp_event,
    import_json,
    pld_delta,
    pld_epsilon,
    rdp_delta,
    rdp_epsilon,
    to_dp_event,
)
from pymc_dp.accounting.events import (
    BarkerEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SubsampledGaussianEvent,
    event_from_dict,
)
from pymc_dp.accounting.gaussian import (
    gaussian_delta,
    gaussian_epsilon,
    max_gaussian_mu,
    max_iterations,
    noise_multiplier_for,
    zcdp_epsilon,
)
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.accounting.barker import (  # DP Barker (thesis Theorem 7)
    barker_delta,
    barker_epsilon,
    barker_max_iterations,
)
from pymc_dp.accounting.rdp import (  # subsampled mechanisms (thesis Theorems 7, 8)
    thesis_subsampled_gaussian_rdp,
    wbk_subsampled_rdp,
)
from pymc_dp.accounting.subsampling import subsampled_noise_multiplier
from pymc_dp.accounting.without_replacement import (  # batches drawn without replacement
    wor_gaussian_pld,
    wor_pld_delta,
    wor_pld_epsilon,
)
from pymc_dp.validation import check_delta, check_epsilon, check_releases

__all__ = [
    "BarkerEvent",
    "Budget",
    "BudgetSlice",
    "BudgetStoreError",
    "barker_delta",
    "barker_epsilon",
    "barker_max_iterations",
    "subsampled_noise_multiplier",
    "thesis_subsampled_gaussian_rdp",
    "wbk_subsampled_rdp",
    "wor_gaussian_pld",
    "wor_pld_delta",
    "wor_pld_epsilon",
    "Event",
    "GaussianEvent",
    "LaplaceEvent",
    "PrivacyLedger",
    "PureDPEvent",
    "SubsampledGaussianEvent",
    "UnsupportedEventError",
    "check_delta",
    "check_epsilon",
    "check_releases",
    "event_from_dict",
    "gaussian_delta",
    "gaussian_epsilon",
    "max_gaussian_mu",
    "max_iterations",
    "noise_multiplier_for",
    "pld_delta",
    "pld_epsilon",
    "rdp_delta",
    "rdp_epsilon",
    "to_dp_event",
    "export_dp_event",
    "export_json",
    "import_json",
    "from_dp_event",
    "events_from_json",
    "zcdp_epsilon",
]
