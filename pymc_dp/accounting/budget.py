"""One privacy budget per dataset, shared by every analysis of it, kept in a database.

A :class:`Budget` is a named (ε, δ) for one dataset. Every private step
(``DPHMC(budget=b, eps=0.5)``), and any code that calls :meth:`Budget.reserve`, draws from
it: a reservation names the mechanism events it will release, and is admitted only if the
composition of *every* reservation so far plus the new one, by the accountant
(:class:`~pymc_dp.accounting.ledger.PrivacyLedger`), stays within (ε, δ). Reservations
are made before any data is read and are never given back.

The store
---------
Reservations live in a database that every process and machine working on the dataset
opens: SQLite (Python's ``sqlite3``, the default, a file) or PostgreSQL
(``store="postgresql://…"``, the ``postgres`` extra). Two tables: one row per budget (its
header and a checkpoint) and an append-only table of records (triggers refuse ``UPDATE``
and ``DELETE`` of records, a budget's deletion or change, and a checkpoint that does not
move one record forward: they stop mistakes, not an administrator, who can drop them).
A reservation is one transaction — SQLite ``BEGIN IMMEDIATE``, PostgreSQL
``SELECT … FOR UPDATE`` on the budget's row — that reads and verifies every record,
composes, and appends its record and moves the checkpoint, or writes nothing. So
reservations from any number of processes are serialised, and a process killed in the
middle leaves no partial record.

What the hash chain detects, and what it cannot
-----------------------------------------------
Each record stores the hash of the record before it and its own hash: SHA-256 over that
previous hash and a canonical encoding of the record (its budget's name, its position,
its content). The first record chains from the hash of the budget's header (name, ε, δ).
Every access verifies the whole chain and refuses, with
:class:`~pymc_dp.accounting.guard.LedgerIntegrityError`, a store it cannot verify; it
never repairs or resets one.

* **Detected:** a record edited, deleted, reordered or inserted by hand without
  recomputing every hash after it; a budget whose ε or δ was changed in its row; records
  deleted from the end of the chain (the budget's row holds a checkpoint — count and last
  hash — moved in the same transaction as every append); and any rewrite or truncation of
  history that this :class:`Budget` object (or its pickled copies) has already seen, since
  it remembers the last point of the chain it verified.
* **Not detected without a witness:** whoever can write to the database can rewrite the
  whole history consistently — recompute every hash and the checkpoint — since the hashes
  use no secret (processes that share only a URL share none). A fresh process has
  nothing to compare such a rewrite with. The chain makes it *visible* against a witness:
  :meth:`Budget.witness` (also in ``privacy_report(budget)``) names a point of the chain;
  kept outside the database (published with a release, in a notebook, in version
  control), it pins every record up to that point, and
  ``Budget(..., witness=...)`` / :meth:`Budget.verify` refuse a store that no longer
  holds it. A database administrator who can rewrite the tables can therefore still
  rewrite the history; only an outside witness shows that they did.

Errors never contain data: reservations hold mechanism events (noise, counts, sampling
rates), which are public.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

from pymc_dp.accounting.budget_store import SCHEMA_VERSION, BudgetStoreError, SQLiteStore
from pymc_dp.accounting.events import event_from_dict
from pymc_dp.accounting.guard import LedgerIntegrityError
from pymc_dp.accounting.hashchain import canonical, link
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.validation import check_delta, check_epsilon
from pymc_dp.errors import PrivacyBudgetExceeded

__all__ = [
    "Budget",
    "BudgetSlice",
    "BudgetStoreError",
    "check_share",
    "default_budget_store",
    "open_store",
]

_FORMAT = "pymc_dp.Budget"
_VERSION = 1
#: Keys of a record's body set by the budget; ``**info`` may not use them.
_RESERVED = frozenset({"events", "time", "pid", "host", "owner", "slice", "cap",
                       "seq", "hash", "when", "epsilon"})


def default_budget_store() -> str:
    """The store a :class:`Budget` uses unless given ``store=``: ``$PYMC_DP_BUDGET_STORE``.

    There is no other default: a budget in a temporary directory would be lost with it (at a
    reboot, say), and a new one would start with the whole budget again.

    Raises
    ------
    ValueError
        If the variable is not set.
    """
    env = os.environ.get("PYMC_DP_BUDGET_STORE")
    if not env:
        raise ValueError(
            "A Budget needs store=: a file path or a PostgreSQL URL that every analysis of the "
            "dataset opens and that outlives them (or set $PYMC_DP_BUDGET_STORE). There is no "
            "default in a temporary directory: a budget lost with it would start again whole."
        )
    return env


def open_store(store):
    """The store object for ``store``: a path or ``sqlite:///path``, or a PostgreSQL URL.

    ``sqlite:///relative/path`` and ``sqlite:////absolute/path`` as in SQLAlchemy.
    """
    if store is None:
        store = default_budget_store()
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if not isinstance(store, str) or not store:
        raise ValueError(f"store must be a path or a URL, got {type(store).__name__}")
    if store.startswith(("postgresql://", "postgres://")):
        from pymc_dp.accounting.budget_postgres import PostgresStore

        return PostgresStore(store)
    if store.startswith("sqlite:///"):
        return SQLiteStore(store[len("sqlite:///"):])
    if "://" in store:
        raise ValueError(
            f"Unknown budget store URL scheme {store.split('://', 1)[0]!r}: use a file path, "
            "sqlite:///path or postgresql://..."
        )
    return SQLiteStore(store)


# ---------------------------------------------------------------------- the budget
class Budget:
    """A named privacy budget (ε, δ) for one dataset, kept in a shared store.

    See the module docstring for the store and what its hash chain detects.

    Parameters
    ----------
    name : str
        The dataset's budget, e.g. ``"census-2020"``. Everyone who analyses the dataset
        opens the same name in the same store.
    epsilon : float
        ε > 0 of the whole budget.
    delta : float
        δ in [0, 1): 0 for a budget of pure ε-DP releases only.
    store : str or Path, optional
        A file path or ``sqlite:///path`` (SQLite), or ``postgresql://…``. Default:
        ``$PYMC_DP_BUDGET_STORE`` (:func:`default_budget_store`); there is no other.
    create : bool
        Make this dataset's budget: once, when the dataset is first analysed (a curator's
        step). Refused if the store already holds a budget of that name. Without it the
        budget must exist: a store that is missing, emptied or replaced is refused, never
        recreated with the whole budget again.
    witness : str, optional
        A :meth:`witness` noted earlier: the store must still hold that point of its chain.

    Raises
    ------
    LedgerIntegrityError
        If the budget exists in the store with another (ε, δ), or the store cannot be
        verified (its hash chain is broken, its schema unknown, or ``witness`` not on it).
    BudgetStoreError
        If the store cannot be opened, or holds no budget of that name (without ``create``),
        or already holds one (with ``create``).

    Examples
    --------
    >>> import tempfile, pymc_dp
    >>> from pymc_dp.accounting import GaussianEvent, LaplaceEvent
    >>> store = tempfile.mkdtemp() + "/budgets.db"
    >>> b = pymc_dp.Budget("census-2020", epsilon=2.0, delta=1e-6, store=store, create=True)
    >>> _ = b.reserve([LaplaceEvent(name="count", epsilon=0.5)], owner="a count")
    >>> _ = b.reserve([GaussianEvent(name="mean", count=4, noise_multiplier=10.0)])
    >>> round(b.spent().epsilon(1e-6), 4), len(b.records())
    (1.3341, 2)
    >>> b.reserve([LaplaceEvent(name="too much", epsilon=1.0)])
    Traceback (most recent call last):
    ...
    pymc_dp.errors.PrivacyBudgetExceeded: The reservation would take the budget 'census-2020' ...
    """

    def __init__(
        self, name: str, *, epsilon: float, delta: float, store=None, witness=None,
        create: bool = False,
    ):
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise ValueError("name must be a non-empty string of at most 200 characters")
        self.name = name
        self.epsilon = check_epsilon(epsilon)
        if isinstance(delta, bool) or not isinstance(delta, int | float):
            raise ValueError(f"delta must be a number in [0, 1), got {type(delta).__name__}")
        self.delta = 0.0 if delta == 0 else check_delta(delta)
        self._store = open_store(store)
        self._checkpoint: tuple[int, str] | None = None  # (records seen, last hash)
        header = {
            "format": _FORMAT,
            "version": _VERSION,
            "name": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
        }
        if not isinstance(create, bool):
            raise ValueError(f"create must be True or False, got {type(create).__name__}")
        if not create:
            # Read only: a store or budget that is not there is refused, never made again.
            with self._store.transaction(write=False) as tx:
                if not self._schema_ok(tx, create=False) or tx.budget(self.name) is None:
                    raise BudgetStoreError(
                        f"The store {self._store.describe()} holds no budget {self.name!r}. "
                        "If the dataset is new, make its budget once with create=True. If it "
                        "had one, the store was moved, emptied or replaced: find it (a new "
                        "budget would start again whole). Nothing was reserved."
                    )
                self._verified(tx)
        else:
            with self._store.transaction(write=True, create=True) as tx:
                self._schema_ok(tx, create=True)
                if tx.budget(self.name) is not None:
                    raise BudgetStoreError(
                        f"The store {self._store.describe()} already holds a budget "
                        f"{self.name!r}: open it without create=True."
                    )
                text = canonical({**header, "created": time.time()}).decode("ascii")
                tx.create_budget(self.name, text, self.epsilon, self.delta,
                                 link("", json.loads(text)))
                self._verified(tx)
        if witness is not None:
            self.verify(witness=witness)

    # ------------------------------------------------------------------ verification
    def _schema_ok(self, tx, *, create: bool) -> bool:
        versions = tx.schema_version()
        if versions is None:
            if create:
                tx.create_schema()
                return True
            return False
        if versions != [SCHEMA_VERSION]:
            raise LedgerIntegrityError(
                f"The budget store {self._store.describe()} has pymc_dp tables of a schema "
                f"this pymc_dp does not know (it reads schema version {SCHEMA_VERSION} only). "
                "Use the pymc_dp that wrote it; the store is left as it is. No data was read."
            )
        return True

    def _altered(self, why: str) -> LedgerIntegrityError:
        return LedgerIntegrityError(
            f"The budget {self.name!r} in {self._store.describe()} cannot be verified: {why}. "
            "What was already spent on this dataset cannot be known, so nothing more is "
            "reserved; the store is left as it is for inspection. Ask its administrator what "
            "changed. A backup gives back everything spent since it was taken: restore one "
            "only if it holds the latest witness kept outside the store. No data was read."
        )

    def _verified(self, tx) -> tuple[list[dict], list[str]]:
        """Every record of the budget (bodies, oldest first) and the chain of hashes
        (genesis first), verified; the budget's header checked against (ε, δ)."""
        if tx.schema_version() != [SCHEMA_VERSION]:
            self._schema_ok(tx, create=False)  # (an unknown schema says so)
            raise self._altered("the store holds no pymc_dp tables (replaced or emptied?)")
        row = tx.budget(self.name)
        if row is None:
            raise self._altered("its row is missing from the store (deleted?)")
        header_text, epsilon, delta, genesis, count, head = row
        try:
            header = json.loads(header_text)
        except (TypeError, ValueError):
            raise self._altered("its header is not valid JSON") from None
        if (
            not isinstance(header, dict)
            or header.get("format") != _FORMAT
            or header.get("name") != self.name
            or canonical(header).decode("ascii") != header_text
            or link("", header) != genesis
        ):
            raise self._altered("its header (name, budget) does not match its genesis hash")
        if header.get("version") != _VERSION:
            raise LedgerIntegrityError(
                f"The budget {self.name!r} in {self._store.describe()} is of a format version "
                f"this pymc_dp does not read (only {_VERSION}). Use the pymc_dp that wrote it."
            )
        recorded = (header.get("epsilon"), header.get("delta"))
        if (epsilon, delta) != recorded:
            raise self._altered("the ε or δ in its row differ from its header")
        if recorded != (self.epsilon, self.delta):
            shown = recorded if all(type(v) is float for v in recorded) else ("?", "?")
            raise LedgerIntegrityError(
                f"The budget {self.name!r} in {self._store.describe()} is (ε, δ) = "
                f"({shown[0]!r}, {shown[1]!r}), not ({self.epsilon!r}, {self.delta!r}) as "
                "asked. A budget cannot be changed once it exists: open it with its own "
                "(ε, δ), or give a new dataset budget a new name. No data was read."
            )
        bodies, chain = [], [genesis]
        for i, (seq, body_text, prev, digest) in enumerate(tx.records(self.name), start=1):
            try:
                body = json.loads(body_text)
            except (TypeError, ValueError):
                body = None
            if (
                seq != i
                or prev != chain[-1]
                or not isinstance(body, dict)
                or canonical(body).decode("ascii") != body_text
                or link(prev, {"budget": self.name, "seq": seq, "body": body}) != digest
            ):
                raise self._altered(
                    f"record {i} does not chain to the one before it (edited, removed, "
                    "reordered or inserted records)"
                )
            bodies.append(body)
            chain.append(digest)
        if (count, head) != (len(bodies), chain[-1]):
            raise self._altered(
                "its checkpoint (the count and last hash in its row) is not the end of its "
                "chain (records removed from its end, or added around pymc_dp)"
            )
        if self._checkpoint is not None:
            seen, last = self._checkpoint
            if not (seen < len(chain) and chain[seen] == last):
                raise self._altered(
                    "it no longer holds records this Budget object has already seen (history "
                    "truncated or rewritten since)"
                )
        if self._checkpoint is None or len(bodies) >= self._checkpoint[0]:
            self._checkpoint = (len(bodies), chain[-1])
        return bodies, chain

    def verify(self, witness: str | None = None) -> None:
        """Verify the store's chain for this budget (and that it holds ``witness``).

        Parameters
        ----------
        witness : str, optional
            A :meth:`witness` noted earlier.

        Raises
        ------
        LedgerIntegrityError
            If the chain cannot be verified or does not hold ``witness``.
        """
        with self._store.transaction(write=False) as tx:
            _, chain = self._verified(tx)
        if witness is None:
            return
        count, _, digest = str(witness).partition(":")
        on_chain = count.isascii() and count.isdigit() and int(count) < len(chain)
        if not (on_chain and chain[int(count)] == digest):
            raise self._altered(
                "it does not hold the point of its chain named by the witness (history "
                "rewritten or truncated since the witness was noted, or a witness of "
                "another budget)"
            )

    def witness(self) -> str:
        """``"count:hash"``: the end of the chain now. Kept outside the store, it pins
        every record so far (see the module docstring)."""
        with self._store.transaction(write=False) as tx:
            bodies, chain = self._verified(tx)
        return f"{len(bodies)}:{chain[-1]}"

    # ------------------------------------------------------------------ reservations
    def reserve(self, events, *, owner: str = "", **info) -> dict:
        """Reserve ``events`` against the budget, or refuse them; call it before reading data.

        In one transaction: verify the store, compose every reservation so far and
        ``events`` through the accountant, and append the reservation if the composed ε at
        the budget's δ is at most its ε.

        Parameters
        ----------
        events : list of Event
            What will be released.
        owner : str
            Who releases (a step, a mechanism): shown in the report.
        **info
            JSON-safe values stored with the reservation (e.g. a run id).

        Returns
        -------
        dict
            The stored record's body.

        Raises
        ------
        PrivacyBudgetExceeded
            If the composed cost would exceed the budget (nothing is written).
        LedgerIntegrityError, BudgetStoreError
            If the store cannot be verified or written (nothing is written).
        ValueError
            If ``events`` cannot be composed with the budget's earlier records (another
            neighbouring relation, an accountant combination that is not supported).
        """
        return self._reserve(list(events), owner=owner, slice_=None, info=info)

    def _reserve(self, events: list, *, owner: str, slice_, info: dict) -> dict:
        PrivacyLedger(events)  # refuses what no accountant knows, before the lock
        clash = sorted(_RESERVED & set(info))
        if clash:
            raise ValueError(f"info keys {clash} are reserved by the budget's records")
        body = {
            "events": [e.to_dict() for e in events],
            "time": time.time(),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "owner": str(owner),
            "slice": None if slice_ is None else slice_.slice_id,
            "cap": None if slice_ is None else [slice_.epsilon, slice_.delta],
            **info,
        }
        text = canonical(body).decode("ascii")  # (refuses what is not JSON-safe)
        body = json.loads(text)
        with self._store.transaction(write=True) as tx:
            bodies, chain = self._verified(tx)
            if slice_ is not None:
                slice_._check_cap(bodies, events)
            self._check_cost(bodies, events)
            seq = len(bodies) + 1
            digest = link(chain[-1], {"budget": self.name, "seq": seq, "body": body})
            self._append(tx, seq, text, chain[-1], digest)
        self._checkpoint = (seq, digest)
        return body

    def _append(self, tx, seq, text, prev, digest) -> None:
        # (a separate method so that tests can kill a process between append and commit)
        tx.append(self.name, seq, text, prev, digest)

    def _check_cost(self, bodies: list[dict], events: list) -> None:
        ledger = _ledger_of(bodies)
        ledger.extend(events)
        cost = ledger.epsilon(self.delta)
        if not cost <= self.epsilon:
            raise PrivacyBudgetExceeded(
                f"The reservation would take the budget {self.name!r} to ε = {cost:.4g} at "
                f"δ = {self.delta:.3g}, over its ε = {self.epsilon:.4g} ({len(bodies)} "
                f"reservation(s) already made cost ε = {_cost(bodies, self.delta):.4g}). "
                "Nothing was reserved and no data was read."
            )

    def fits(self, events) -> bool:
        """Whether ``events`` would fit in what is left now (reads only; a later
        :meth:`reserve` may still be refused if others reserve in between)."""
        events = list(events)
        ledger = _ledger_of(self.records())
        ledger.extend(events)
        return ledger.epsilon(self.delta) <= self.epsilon

    def slice(self, epsilon: float, delta: float, *, owner: str = "") -> BudgetSlice:
        """A share of this budget capped at (``epsilon``, ``delta``), for one step object.

        Its reservations go into this budget; each must fit both in the slice's cap and
        in the whole budget (checked in one transaction).
        """
        return BudgetSlice(self, epsilon, delta, owner=owner)

    # ------------------------------------------------------------------ reading
    def records(self) -> list[dict]:
        """Every reservation against the dataset, oldest first (after verifying the store):
        the stored bodies (``events``, ``time``, ``pid``, ``host``, ``owner``, ``slice``,
        ``cap`` and the caller's info) with ``seq`` and ``hash``."""
        with self._store.transaction(write=False) as tx:
            bodies, chain = self._verified(tx)
        # (the position and hash last: a body's own keys never stand in for them)
        return [{**b, "seq": i, "hash": chain[i]} for i, b in enumerate(bodies, start=1)]

    def spent(self) -> PrivacyLedger:
        """The ledger of every reservation (compose it with ``.epsilon(budget.delta)``)."""
        return _ledger_of(self.records())

    def remaining(self) -> float:
        """ε left at the budget's δ: ``epsilon − spent().epsilon(delta)``.

        A headroom to read, not to subtract from: costs compose, they do not add up
        (several Gaussian releases cost less than the sum of their ε's). Whether a
        release fits is what :meth:`fits` and :meth:`reserve` decide.
        """
        return max(0.0, self.epsilon - self.spent().epsilon(self.delta))

    def report(self) -> dict:
        """What :func:`pymc_dp.privacy_report` shows for a budget: ε spent and left, every
        release (who, when, its events, its own cost), and the chain's witness."""
        records = self.records()
        ledger = _ledger_of(records)
        spent = ledger.epsilon(self.delta)
        releases = []
        for r in records:
            own = _ledger_of([r]).epsilon(self.delta)
            info = {k: v for k, v in r.items() if k not in _RESERVED | {"seq", "hash"}}
            releases.append({
                "seq": r["seq"],
                "owner": r["owner"],
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["time"])),
                **{k: v for k, v in info.items() if isinstance(v, str | int | float)},
                "epsilon": own,
                "events": r["events"],
            })
        witness = f"{len(records)}:{records[-1]['hash']}" if records else None
        if witness is None:
            witness = self.witness()
        return {
            "epsilon": spent,
            "delta": self.delta,
            "source": f"budget {self.name!r}",
            "details": {
                "budget": {"name": self.name, "epsilon": self.epsilon, "delta": self.delta,
                           "store": self._store.describe()},
                "remaining": {"epsilon": max(0.0, self.epsilon - spent)},
                "witness": witness,
                "releases": releases,
                "ledger": ledger.summary(),
            },
        }

    def __repr__(self) -> str:
        return (f"Budget({self.name!r}, epsilon={self.epsilon!r}, delta={self.delta!r}, "
                f"store={self._store.describe()!r})")

    def __getstate__(self):
        return dict(self.__dict__)


class BudgetSlice:
    """A step's share of a :class:`Budget`: what a step holds in place of its own
    :class:`~pymc_dp.accounting.guard.BudgetGuard` (the same methods).

    Its reservations are records of the budget tagged with the slice's id and cap; each
    must fit in the cap (composed with the slice's earlier reservations, at the cap's δ)
    and in the whole budget (composed with every reservation, at the budget's δ), both
    checked in the transaction that appends it.

    Parameters
    ----------
    budget : Budget
    epsilon, delta : float
        The cap (the step's own ε and δ).
    owner : str
        The step's name, shown in reports.
    """

    def __init__(self, budget: Budget, epsilon: float, delta: float, *, owner: str = ""):
        if not isinstance(budget, Budget):
            raise TypeError(f"budget must be a pymc_dp.Budget, got {type(budget).__name__}")
        self.budget = budget
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.owner = str(owner)
        self.slice_id = uuid.uuid4().hex
        if self.epsilon > budget.epsilon:
            raise ValueError(
                f"A share ε = {self.epsilon:g} cannot exceed the budget {budget.name!r} "
                f"(ε = {budget.epsilon:g})."
            )

    def _check_cap(self, bodies: list[dict], events: list) -> None:
        mine = [b for b in bodies if b.get("slice") == self.slice_id]
        if any(b.get("cap") != [self.epsilon, self.delta] for b in mine):
            raise self.budget._altered("this step's records carry another cap than its own")
        ledger = _ledger_of(mine)
        ledger.extend(events)
        cost = ledger.epsilon(self.delta)
        if not cost <= self.epsilon:
            raise PrivacyBudgetExceeded(
                f"This run would take the privacy spent by this step to ε = {cost:.4g} (δ = "
                f"{self.delta:.3g}), over its share ε = {self.epsilon:.4g} of the budget "
                f"{self.budget.name!r}; {len(mine)} chain(s) already spent ε = "
                f"{_cost(mine, self.delta):.4g}. More chains or longer chains than planned, "
                "or a second run with a spent step? Create a new step for another share. No "
                "data was read for this chain."
            )

    def _check_in_memory(self, budget) -> None:
        if budget is not None and tuple(float(b) for b in budget) != (self.epsilon, self.delta):
            raise LedgerIntegrityError(
                f"The budget held in memory ({budget[0]!r}, {budget[1]!r}) differs from this "
                f"step's share ({self.epsilon!r}, {self.delta!r}) of the budget "
                f"{self.budget.name!r}: changed after the step was built. Create a new step. "
                "No data was read."
            )

    def reserve(self, events, *, budget=None, **info) -> dict:
        """Reserve ``events`` in the slice and the budget, or raise if they do not fit
        (as :meth:`BudgetGuard.reserve <pymc_dp.accounting.guard.BudgetGuard.reserve>`)."""
        self._check_in_memory(budget)
        body = self.budget._reserve(list(events), owner=self.owner, slice_=self, info=info)
        return _as_reservation(body)

    def verify(self, budget=None) -> None:
        """Verify the store and that ``budget`` (``(epsilon, delta)``) is the slice's cap."""
        self._check_in_memory(budget)
        self.budget.verify()

    def check_fits(self, events) -> None:
        """Refuse ``events`` (read only) if the whole budget cannot cover them now."""
        events = list(events)
        self.budget._check_cost(self.budget.records(), events)

    def reservations(self) -> list[dict]:
        """This slice's reservations, oldest first, shaped as the guard's are."""
        return [_as_reservation(r) for r in self.budget.records()
                if r.get("slice") == self.slice_id]

    def spent(self, **match) -> PrivacyLedger:
        """The ledger of this slice's reservations (whose info matches ``match``)."""
        rows = [r for r in self.reservations() if all(r.get(k) == v for k, v in match.items())]
        return _ledger_of(rows)

    def __repr__(self) -> str:
        return (f"BudgetSlice({self.budget.name!r}, epsilon={self.epsilon!r}, "
                f"delta={self.delta!r}, owner={self.owner!r})")


def check_share(budget, epsilon: float, delta, *, owner: str, ledger_dir=None,
                pure: bool = False):
    """Check a ``budget=`` argument (before any model or data is touched); the share's δ.

    Used by every object that takes ``budget=`` (the private steps, PosteriorSampling).

    Parameters
    ----------
    budget : Budget
    epsilon : float
        The share's ε (already checked).
    delta : float or None
        The share's δ as given; ``None`` takes the budget's (ignored if ``pure``).
    owner : str
        Who asks, for messages.
    ledger_dir : optional
        Must be None: a share keeps its reservations in the budget's store.
    pure : bool
        Whether the owner is pure ε-DP (then any budget will do, and δ is 0).

    Returns
    -------
    float or None
        The share's δ (None if ``pure``).

    Raises
    ------
    TypeError, ValueError
        If ``budget`` is not a :class:`Budget`, comes with ``ledger_dir``, is smaller than
        the share, or has δ = 0 for an (ε, δ)-DP owner.
    """
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a pymc_dp.Budget, got {type(budget).__name__}")
    if ledger_dir is not None:
        raise ValueError(
            f"{owner} takes budget= or ledger_dir=, not both: with a budget, its "
            "reservations are kept in the budget's store."
        )
    if epsilon > budget.epsilon:
        raise ValueError(
            f"{owner}(eps={epsilon:g}) asks for more than the whole budget {budget.name!r} "
            f"(ε = {budget.epsilon:g})."
        )
    if pure:
        return None
    if budget.delta == 0:
        raise ValueError(
            f"{owner} is (ε, δ)-DP, and the budget {budget.name!r} has δ = 0 (pure ε-DP "
            "releases only)."
        )
    return budget.delta if delta is None else delta


# ---------------------------------------------------------------------- helpers
def _as_reservation(body: dict) -> dict:
    return {k: v for k, v in body.items()
            if k not in ("seq", "hash", "host", "owner", "slice", "cap")}


def _ledger_of(bodies) -> PrivacyLedger:
    ledger = PrivacyLedger()
    for b in bodies:
        ledger.extend(event_from_dict(e) for e in b["events"])
    return ledger


def _cost(bodies, delta: float) -> float:
    return _ledger_of(bodies).epsilon(delta)
