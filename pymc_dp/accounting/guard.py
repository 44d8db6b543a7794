"""The budget guard: a step's privacy budget, shared by every copy of the step.

PyMC hands each worker process its own pickled copy of a step, and runs sequential chains
with one object whose sampling state it resets between chains. Neither copy can see what
the others spent, so the budget lives outside the object: in a small JSON file, created
with the step in a directory only its owner can enter, guarded by ``fcntl.flock`` on a lock
file beside it (shared for reads, exclusive for read-modify-write) and replaced atomically
on every write, so a crash never leaves a half-written ledger. Every chain
*reserves* its whole planned spending before it reads the data; a reservation that would
take the composed cost of all reservations past the budget raises
:class:`~pymc_dp.errors.PrivacyBudgetExceeded`.

Reserving up front is conservative: a chain that stops early has spent less than it
reserved, and the reservation is never given back.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
import uuid

from contextlib import contextmanager
from pathlib import Path

from pymc_dp.accounting.events import Event, event_from_dict
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.errors import PrivacyBudgetExceeded

__all__ = ["BudgetGuard", "default_ledger_dir"]



def default_ledger_dir() -> Path:
    """Where ledgers live unless a step is given ``ledger_dir``.

    ``$PYMC_DP_LEDGER_DIR`` if set, else ``<tempdir>/pymc_dp_ledgers``.
    """
    env = os.environ.get("PYMC_DP_LEDGER_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "pymc_dp_ledgers"


class BudgetGuard:
    """A budget (ε, δ) and the file-locked list of reservations made against it.

    Parameters
    ----------
    epsilon, delta : float
        The budget. Every reservation is checked against the composed cost of all
        reservations so far.
    ledger_dir : str or Path, optional
        Directory of the ledger file (default :func:`default_ledger_dir`).
    owner : str
        A label written into the file (the step's name).

    Examples
    --------
    >>> import tempfile
    >>> from pymc_dp.accounting import GaussianEvent
    >>> guard = BudgetGuard(1.0, 1e-5, ledger_dir=tempfile.mkdtemp())
    >>> _ = guard.reserve([GaussianEvent(name="ratio", count=10, noise_multiplier=20.0)])
    >>> round(guard.spent().epsilon(1e-5), 3) <= 1.0
    True
    """

    def __init__(self, epsilon: float, delta: float, *, ledger_dir=None, owner: str = ""):
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        directory = Path(ledger_dir) if ledger_dir is not None else default_ledger_dir()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = str(directory / f"{owner or 'budget'}-{uuid.uuid4().hex}.json")
        header = {
            "owner": owner,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "created": time.time(),
            "reservations": [],
        }
        # "x": the file must be new; a clash of uuids must never merge two budgets.
        with open(self.path + ".lock", "x"):
            pass
        with open(self.path, "x") as f:
            json.dump(header, f)

    @contextmanager
    def _locked(self, *, write: bool):
        try:
            lock = open(self.path + ".lock")
            with open(self.path) as f:
                pass
        except FileNotFoundError:
            raise PrivacyBudgetExceeded(
                f"The privacy ledger {self.path} of this step is missing (deleted, or the step "
                "was moved to another machine), so what it already spent cannot be known. "
                "Create a new step with its own budget."
            ) from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
            try:
                with open(self.path) as f:
                    data = json.load(f)
                yield data
                if write:
                    tmp = f"{self.path}.{os.getpid()}.tmp"
                    with open(tmp, "w") as f:
                        json.dump(data, f)
                        f.flush()
                        os.fsync(f.fileno())
                    os.replace(tmp, self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def reserve(self, events: list[Event], **info) -> dict:
        """Reserve ``events`` against the budget, or raise if they do not fit.

        ``info`` (JSON-safe) is stored with the reservation, e.g. the run id, chain length
        and noise multipliers. Returns the stored reservation.
        """
        with self._locked(write=True) as data:
            ledger = _ledger_of(data["reservations"])
            ledger.extend(events)
            cost = ledger.epsilon(self.delta)
            if cost > self.epsilon:
                already = _ledger_of(data["reservations"]).epsilon(self.delta)
                raise PrivacyBudgetExceeded(
                    f"This run would take the privacy spent to ε = {cost:.4g} (δ = "
                    f"{self.delta:.3g}), over the step's budget ε = {self.epsilon:.4g}; "
                    f"{len(data['reservations'])} chain(s) already spent ε = {already:.4g}. "
                    "More chains or longer chains than planned, or a second run with a spent "
                    "step? Plan the run with chains=... (and the length you sample), or create "
                    "a new step with its own budget. No data was read for this chain."
                )
            reservation = {
                "events": [e.to_dict() for e in events],
                "pid": os.getpid(),
                "time": time.time(),
                **info,
            }
            data["reservations"].append(reservation)
            return reservation

    def reservations(self) -> list[dict]:
        """All reservations so far, oldest first."""
        with self._locked(write=False) as data:
            return list(data["reservations"])

    def spent(self, **match) -> PrivacyLedger:
        """The ledger of every reservation (whose info matches ``match``, if given)."""
        rows = [r for r in self.reservations() if all(r.get(k) == v for k, v in match.items())]
        return _ledger_of(rows)


def _ledger_of(reservations: list[dict]) -> PrivacyLedger:
    ledger = PrivacyLedger()
    for r in reservations:
        ledger.extend(event_from_dict(e) for e in r["events"])
    return ledger
