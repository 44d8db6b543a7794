"""The budget guard: a step's privacy budget, shared by every copy of the step.

PyMC hands each worker process its own pickled copy of a step, and runs sequential chains
with one object whose sampling state it resets between chains. Neither copy can see what
the others spent, so the budget lives outside the object: in a small JSON file, created
with the step in a directory only its owner can write, guarded by ``fcntl.flock`` on a lock
file beside it (shared for reads, exclusive for read-modify-write) and replaced atomically
on every write, so a crash never leaves a half-written ledger. Every chain
*reserves* its whole planned spending before it reads the data; a reservation that would
take the composed cost of all reservations past the budget raises
:class:`~pymc_dp.errors.PrivacyBudgetExceeded`.

Reserving up front is conservative: a chain that stops early has spent less than it
reserved, and the reservation is never given back.

The ledger protects itself
--------------------------
A ledger that lost reservations would let a spent step run again and report less than it
spent, so every access verifies the file and refuses (:class:`LedgerIntegrityError`) what
it cannot verify; it never resets or repairs a ledger.

* **Permissions.** The directory must belong to the current user and be writable by no one
  else (it is created with mode 0700); the ledger, its head file and its lock file must be
  regular files of the current user, mode 0600 (they are created so, whatever the umask).
* **Hash chain.** The file holds a header (owner, budget, identity) and a list of records.
  Record *i* holds its reservation, its index, the hash of record *i − 1* and its own hash:
  HMAC-SHA-256, over a canonical JSON encoding, under a random key that exists only in the
  memory of the guard (and of its pickled copies, which PyMC hands to worker processes).
  Record 1 chains from a genesis hash of the header. Without the key a record cannot be
  edited, removed, reordered or inserted, nor the header's budget changed, without
  breaking the chain.
* **Checkpoints against truncation.** A chain cannot tell its last records from missing
  ones, so two places remember a point of it: the guard (the number of records it has
  seen and the hash of the last one, updated on every verified access; the step object,
  and so the guard, lives for the whole run) and a head file beside the ledger, rewritten
  after every reservation. Each must lie on the file's chain.
* **Budget.** The budget held in memory (the guard's, and the step's on every reservation)
  must equal the ledger's own record of it.

Not detected: a ledger and head file both replaced by an earlier copy of themselves, seen
by a copy of the step that has not seen the later records either (e.g. a step unpickled
from a file saved before); anything done by someone who holds the step object (and so the
key); a ledger directory deleted together with the step object (a new step has a new
budget). A file ledger cannot do better; a database-backed ledger is planned (issue 16).
"""

from __future__ import annotations

import fcntl
import hmac
import json
import os
import secrets
import stat
import tempfile
import time
import uuid

from contextlib import contextmanager
from pathlib import Path

from pymc_dp.accounting.events import Event, event_from_dict
from pymc_dp.accounting.hashchain import canonical as _canonical
from pymc_dp.accounting.hashchain import link
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.errors import PrivacyBudgetExceeded

__all__ = ["BudgetGuard", "LedgerIntegrityError", "default_ledger_dir"]

_FORMAT = "pymc_dp.BudgetLedger"
_VERSION = 2
_RECORD_KEYS = {"index", "prev", "reservation", "hash"}
_NEW_STEP = "Create a new step with its own budget."


class LedgerIntegrityError(PrivacyBudgetExceeded):
    """A budget ledger cannot be verified, so what its step already spent cannot be known.

    Raised before any reservation and before any data is read; the ledger is left as it is.
    """


def default_ledger_dir() -> Path:
    """Where ledgers live unless a step is given ``ledger_dir``.

    ``$PYMC_DP_LEDGER_DIR`` if set, else ``<tempdir>/pymc_dp_ledgers-<uid>`` (one directory
    per user: a directory shared by several users would be refused).
    """
    env = os.environ.get("PYMC_DP_LEDGER_DIR")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"pymc_dp_ledgers-{os.geteuid()}"


class BudgetGuard:
    """A budget (ε, δ) and the file-locked, hash-chained list of reservations made against it.

    See the module docstring for how the ledger file is protected.

    Parameters
    ----------
    epsilon, delta : float
        The budget. Every reservation is checked against the composed cost of all
        reservations so far.
    ledger_dir : str or Path, optional
        Directory of the ledger file (default :func:`default_ledger_dir`). Created with
        mode 0700; an existing one must belong to the current user and be writable by no
        one else.
    owner : str
        A label written into the file (the step's name).

    Raises
    ------
    LedgerIntegrityError
        If ``ledger_dir`` belongs to another user or is writable by its group or others.

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
        _check_directory(directory)
        ledger_id = uuid.uuid4().hex
        self.path = str(directory / f"{owner or 'budget'}-{ledger_id}.json")
        self._key = secrets.token_bytes(32)
        self._header = {
            "ledger_id": ledger_id,
            "owner": owner,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "created": time.time(),
        }
        genesis = _link(self._key, "", self._header)
        self._genesis = genesis
        self._checkpoint = (0, genesis)  # (records seen, hash of the last one)
        # O_EXCL: the files must be new; a clash of uuids must never merge two budgets.
        _create(self.path + ".lock", b"")
        _create(self.path, _encode(self._document([])))
        _create(self.path + ".head", _encode(self._head(0, genesis)))

    # ------------------------------------------------------------------ file contents
    def _document(self, records: list[dict]) -> dict:
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "header": self._header,
            "genesis": self._genesis,
            "records": records,
        }

    def _head(self, count: int, head: str) -> dict:
        return {"ledger_id": self._header["ledger_id"], "count": count, "head": head}

    # ------------------------------------------------------------------ locked access
    @contextmanager
    def _locked(self, *, write: bool, budget=None):
        """Verify the ledger under the lock; yield its reservations (to append to if ``write``)."""
        try:
            _check_directory(Path(self.path).parent)
            lock = _open_own(self.path + ".lock")
        except FileNotFoundError:
            raise self._missing() from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
            records, chain = self._verified(budget)
            reservations = [r["reservation"] for r in records]
            yield reservations
            if write and len(reservations) > len(records):
                for reservation in reservations[len(records):]:
                    record = {
                        "index": len(records) + 1,
                        "prev": chain[-1],
                        "reservation": reservation,
                    }
                    record["hash"] = _link(self._key, chain[-1], _chained_part(record))
                    records.append(record)
                    chain.append(record["hash"])
                # Ledger first, head second: a crash in between leaves the head one record
                # behind, which still lies on the chain.
                _replace(self.path, _encode(self._document(records)))
                _replace(self.path + ".head", _encode(self._head(len(records), chain[-1])))
                self._advance(len(records), chain[-1])
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(lock)

    def _verified(self, budget) -> tuple[list[dict], list[str]]:
        """The records of the ledger file and the chain of hashes (genesis first), verified."""
        if getattr(self, "_key", None) is None:  # a guard pickled by an older pymc_dp
            raise LedgerIntegrityError(_old_format(self.path))
        doc = self._read_json(self.path)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            if isinstance(doc, dict) and "reservations" in doc:
                raise LedgerIntegrityError(_old_format(self.path))
            raise self._altered("it is not a pymc_dp budget ledger")
        if doc.get("version") != _VERSION:
            raise LedgerIntegrityError(  # the file's own version is not echoed: any content
                f"The privacy ledger {self.path} is not of format version {_VERSION}, the "
                f"only one this pymc_dp reads. Use the pymc_dp that wrote it, or: {_NEW_STEP}"
            )
        header = doc.get("header")
        if isinstance(header, dict):
            self._check_budget(header, budget)
        if header != self._header or doc.get("genesis") != self._genesis:
            raise self._altered("its header (owner, budget or identity) was changed")
        records = doc.get("records")
        if not isinstance(records, list):
            raise self._altered("its list of records is missing")
        chain = [self._genesis]
        for i, record in enumerate(records, start=1):
            if (
                not isinstance(record, dict)
                or set(record) != _RECORD_KEYS
                or record["index"] != i
                or record["prev"] != chain[-1]
                or not isinstance(record["hash"], str)
                or not hmac.compare_digest(
                    record["hash"], _link(self._key, chain[-1], _chained_part(record))
                )
            ):
                raise self._altered(
                    f"record {i} does not chain to the one before it (edited, removed, "
                    "reordered or inserted records)"
                )
            chain.append(record["hash"])
        head = self._read_json(self.path + ".head")
        if not isinstance(head, dict) or head.get("ledger_id") != self._header["ledger_id"]:
            raise self._altered("its head file belongs to another ledger")
        for count, last, where in (
            (*self._checkpoint, "this step has already seen"),
            (head.get("count"), head.get("head"), "its head file records"),
        ):
            on_chain = type(count) is int and 0 <= count < len(chain) and chain[count] == last
            if not on_chain:
                raise self._altered(
                    f"it no longer holds the records that {where} (records removed from its "
                    "end, the list emptied, or the file replaced by an older copy)"
                )
        self._advance(len(records), chain[-1])
        return records, chain

    def _check_budget(self, header: dict, budget) -> None:
        """The budget held in memory (guard, and the caller's) must be the ledger's own."""
        recorded = (header.get("epsilon"), header.get("delta"))
        in_memory = [(self.epsilon, self.delta)]
        if budget is not None:
            in_memory.append(tuple(float(b) for b in budget))
        # The file's values are shown only if they are numbers: nothing else is echoed.
        shown = (
            f" (ε = {recorded[0]!r}, δ = {recorded[1]!r})"
            if all(type(v) is float for v in recorded)
            else ""
        )
        for held in in_memory:
            if held != recorded:
                raise LedgerIntegrityError(
                    f"The budget held in memory (ε = {held[0]!r}, δ = {held[1]!r}) differs "
                    f"from the budget recorded in the privacy ledger {self.path}{shown}: the "
                    "step's budget or the ledger file was changed after the step was built. "
                    f"A budget cannot be changed. {_NEW_STEP} No data was read."
                )

    def _read_json(self, path: str):
        try:
            fd = _open_own(path)
        except FileNotFoundError:
            raise self._missing() from None
        with open(fd, "rb") as f:
            raw = f.read()
        try:
            return json.loads(raw)
        except ValueError:
            raise self._altered(f"{os.path.basename(path)} is not valid JSON") from None

    def _advance(self, count: int, head: str) -> None:
        # Only forward: a checkpoint never moves back to fewer records.
        if count >= self._checkpoint[0]:
            self._checkpoint = (count, head)

    def _missing(self) -> PrivacyBudgetExceeded:
        return PrivacyBudgetExceeded(
            f"The privacy ledger {self.path} of this step (or its head or lock file) is "
            "missing (deleted, or the step was moved to another machine), so what it already "
            f"spent cannot be known. {_NEW_STEP}"
        )

    def _altered(self, why: str) -> LedgerIntegrityError:
        return LedgerIntegrityError(
            f"The privacy ledger {self.path} cannot be verified: {why}. What this step "
            "already spent cannot be known, so it reserves nothing more; the ledger is left "
            f"as it is for inspection. {_NEW_STEP} No data was read."
        )

    # ------------------------------------------------------------------ public
    def reserve(self, events: list[Event], *, budget=None, **info) -> dict:
        """Reserve ``events`` against the budget, or raise if they do not fit.

        Parameters
        ----------
        events : list of Event
            What the chain will release.
        budget : tuple of float, optional
            ``(epsilon, delta)`` as the caller (the step) holds it; must equal the ledger's.
        **info
            JSON-safe values stored with the reservation, e.g. the run id, chain length
            and noise multipliers.

        Returns
        -------
        dict
            The stored reservation.

        Raises
        ------
        PrivacyBudgetExceeded
            If the reservation does not fit in what is left of the budget.
        LedgerIntegrityError
            If the ledger cannot be verified or its budget differs from the one in memory.
        """
        with self._locked(write=True, budget=budget) as reservations:
            ledger = _ledger_of(reservations)
            ledger.extend(events)
            cost = ledger.epsilon(self.delta)
            if not cost <= self.epsilon:  # (NaN too: a cost not computed is no fit)
                already = _ledger_of(reservations).epsilon(self.delta)
                raise PrivacyBudgetExceeded(
                    f"This run would take the privacy spent to ε = {cost:.4g} (δ = "
                    f"{self.delta:.3g}), over the step's budget ε = {self.epsilon:.4g}; "
                    f"{len(reservations)} chain(s) already spent ε = {already:.4g}. "
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
            # Stored as it reads back, so that its hash is reproducible.
            reservation = json.loads(_canonical(reservation))
            reservations.append(reservation)
            return reservation

    def verify(self, budget=None) -> None:
        """Verify the ledger (and that ``budget``, ``(epsilon, delta)``, is its own) without
        writing to it.

        Raises
        ------
        LedgerIntegrityError
            As :meth:`reserve` would.
        """
        with self._locked(write=False, budget=budget):
            pass

    def reservations(self) -> list[dict]:
        """All reservations so far, oldest first (after verifying the ledger)."""
        with self._locked(write=False) as reservations:
            return list(reservations)

    def spent(self, **match) -> PrivacyLedger:
        """The ledger of every reservation (whose info matches ``match``, if given)."""
        rows = [r for r in self.reservations() if all(r.get(k) == v for k, v in match.items())]
        return _ledger_of(rows)


# ---------------------------------------------------------------------- helpers
def _ledger_of(reservations: list[dict]) -> PrivacyLedger:
    ledger = PrivacyLedger()
    for r in reservations:
        ledger.extend(event_from_dict(e) for e in r["events"])
    return ledger


def _encode(doc: dict) -> bytes:
    return json.dumps(doc, indent=1, allow_nan=False).encode("utf-8")


def _chained_part(record: dict) -> dict:
    return {"index": record["index"], "reservation": record["reservation"]}


def _link(key: bytes, prev: str, body) -> str:
    """The hash of ``body`` chained to ``prev``, keyed (HMAC-SHA-256)."""
    return link(prev, body, key=key)


def _old_format(path: str) -> str:
    return (
        f"The privacy ledger {path} was written by a pymc_dp older than hash-chained ledgers "
        "(format 1): its records cannot be verified, and an unverified ledger is not taken "
        f"on trust. {_NEW_STEP} Count what the old ledger records as already spent when "
        "you choose the new budget."
    )


def _check_directory(directory: Path) -> None:
    """Refuse a ledger directory that another user owns or may write to."""
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise LedgerIntegrityError(f"The ledger directory {directory} is not a directory.")
    if st.st_uid != os.geteuid():
        raise LedgerIntegrityError(
            f"The ledger directory {directory} belongs to another user, who could replace "
            "the budget ledgers in it. Choose a directory of your own (ledger_dir=... or "
            "$PYMC_DP_LEDGER_DIR); pymc_dp creates it with mode 0700."
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise LedgerIntegrityError(
            f"The ledger directory {directory} is writable by its group or by other users "
            f"(mode {stat.S_IMODE(st.st_mode):04o}), who could replace the budget ledgers in "
            f"it. Run `chmod 700 {directory}`, or choose another directory (ledger_dir=... "
            "or $PYMC_DP_LEDGER_DIR)."
        )


def _open_own(path: str) -> int:
    """A read-only descriptor of ``path``: a regular file of this user, mode 0600."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError:  # ELOOP: a symbolic link
        raise LedgerIntegrityError(
            f"The ledger file {path} cannot be opened as a regular file (a symbolic link?); "
            f"ledger files are regular files of their owner. {_NEW_STEP}"
        ) from None
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif st.st_uid != os.geteuid():
        problem = "belongs to another user"
    elif st.st_mode & 0o077:
        problem = (
            f"can be read or written by other users (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"ledger files are 0600: run `chmod 600 {path}` if you trust it (its content is "
            "still verified)"
        )
    if problem is not None:
        os.close(fd)
        raise LedgerIntegrityError(f"The ledger file {path} {problem}. Refused; no data was read.")
    return fd


def _create(path: str, content: bytes) -> None:
    """Write a new file of mode 0600 (whatever the umask); fails if it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with open(fd, "wb") as f:
        os.fchmod(fd, 0o600)
        f.write(content)
        f.flush()
        os.fsync(fd)


def _replace(path: str, content: bytes) -> None:
    """Replace ``path`` atomically by a new file of mode 0600 holding ``content``."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".", suffix=".tmp")
    try:
        with open(fd, "wb") as f:
            os.fchmod(fd, 0o600)
            f.write(content)
            f.flush()
            os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
