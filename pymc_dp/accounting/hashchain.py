"""The hash chain shared by the budget ledgers: one canonical encoding, one link function.

A record's hash covers the hash of the record before it and a canonical encoding of its
own content, so that changing, removing, reordering or inserting a record changes every
hash after it. Both ledgers use it: :class:`~pymc_dp.accounting.guard.BudgetGuard` keys it
with a secret that lives only in memory (HMAC-SHA-256), and
:class:`~pymc_dp.accounting.budget.Budget`, whose store is shared by processes that share
no secret, uses plain SHA-256 (what each can and cannot detect is said in their modules).
"""

from __future__ import annotations

import hashlib
import hmac
import json

__all__ = ["canonical", "link"]


def canonical(obj) -> bytes:
    """One byte string per JSON value: sorted keys, no spaces, ASCII, no NaN.

    Examples
    --------
    >>> canonical({"b": 1, "a": [1.5, "é"]})
    b'{"a":[1.5,"\\\\u00e9"],"b":1}'
    """
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def link(prev: str, body, key: bytes | None = None) -> str:
    """The hash of ``body`` chained to the hash ``prev`` (hex).

    HMAC-SHA-256 under ``key`` if given, else SHA-256, of ``prev``, a newline and the
    canonical encoding of ``body``.

    Examples
    --------
    >>> first = link("", {"budget": 1.0})
    >>> len(first), link(first, {"n": 1}) != link(first, {"n": 2})
    (64, True)
    """
    message = prev.encode("ascii") + b"\n" + canonical(body)
    if key is None:
        return hashlib.sha256(message).hexdigest()
    return hmac.new(key, message, hashlib.sha256).hexdigest()
