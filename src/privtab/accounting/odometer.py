"""A privacy ledger across releases (an odometer): every private release of a data set,
recorded in a confidential file the operator controls, composed, and checked against a
lifetime budget before the next release is made. Product-neutral: any product that
publishes a release of confidential records records it here.

The file
--------
One JSON document (``schema_version`` 2; version 1 files are read and upgraded on their
next change) at, in order of precedence, the path given, the environment variable
``PRIVTAB_LEDGER``, ``$XDG_STATE_HOME/privtab/ledger.json`` or
``~/.local/state/privtab/ledger.json``. It is **confidential**: it holds fingerprints of
each confidential input, so it is created with mode 0600 (its directory 0700 when privtab
creates it) and must never be published with a release.

**One file, one lock.** The path given is resolved first: symbolic links are followed
(the ledger is the file they name, created there if absent; a link loop is refused), and
every change replaces *that* file and locks the sibling ``<real file>.lock``, so two names
of one ledger share its lock and its history. A ledger with **hard links** (more than one
name for one file) is refused: the atomic rewrite would give the path a new file and leave
every other name with the old history. Every change is one transaction under an exclusive
lock (``fcntl.flock``), written atomically (temporary file, ``fsync``, ``os.replace``,
``fsync`` of the directory), so a reader sees the old or the new ledger, never half of one,
and two runs can never both pass the lifetime check on the same remaining budget.

What a data set is
------------------
Each entry has a ``dataset`` key — the name the operator declared (``--dataset-id``), else
the records digest — and its ``identities``: confidential fingerprints of the records it
was computed from, ``records:<hex>`` (the order- and encoding-independent digest of the
parsed records, :class:`~privtab.accounting.digest.RecordDigest`) and ``sha256:<hex>`` (the
bytes of the file, known before the file is parsed). Two entries belong to the **same data
set** when they share a key or an identity, transitively: a CRLF or re-sorted copy of a
file shares the records digest; a declared name groups versions of a population whose
records differ. When one content appears under two declared names, the ledger composes
them and the run says so.

Composition
-----------
Releases of one data set compose sequentially (they are computed from the same people with
independent noise): Σε if every release is pure DP, else Σρ in zCDP with each pure ε
entering as ε²/2 (Bun & Steinke 2016, Prop. 1.4 and Lemma 2.3), in exact rationals
(:mod:`privtab.accounting.exact`). The lifetime budgets that apply are the one passed,
every one set for a key of the data set and, if none is set, the ledger's default: the
strictest binds.

Reserve, identify, then commit
------------------------------
A release takes hours; the check must happen before the data are read and the record only
once the release exists. :meth:`ReleaseLedger.reserve` checks the lifetime budget and
writes a *pending* entry in one locked transaction (with what is known before reading:
the declared name and the file's bytes); :meth:`Reservation.identify` adds the records
digest once the records were read — before any noise is drawn — and checks again against
everything released of those records; :meth:`Reservation.commit` turns the entry into a
published one after the release folder is in place; :meth:`Reservation.cancel` removes it
when the run failed before anything was published. The lock is held only during each
transaction, and the kernel drops a ``flock`` when its process dies, so a crash never
leaves the ledger locked.

A pending entry **counts as spent** in every check and total until it is settled: a run
killed between publishing and committing leaves a pending entry, and the ledger cannot
tell by itself whether that release reached disk, so it assumes it did (never double
spending). Every later reservation reports every such entry with the exact command that
settles it (:meth:`ReleaseLedger.settle_command`, which looks at the entry's release
folder), and ``privtab ledger show`` lists it. :meth:`ReleaseLedger.settle` checks the
folder: a release folder carries a random id in its marker (:mod:`privtab.atomic`) that
the entry recorded when it was reserved, so an entry is settled as published only if the
folder at its path is its own, and as not published only if it is not.

An entry's ``delivery`` says where the release went: ``folder`` (published at
``release``) or ``caller`` (returned to the calling program, e.g.
``privtab.safetab.release()`` without ``out=``: no folder at a path).

Only private releases belong here: a seeded or noise-off run protects nobody, must not be
published, and is never recorded; the caller skips the ledger for such runs
(``safetab run`` does).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shlex
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from privtab._json import Record
from privtab.accounting.digest import RECORDS_PREFIX, RecordDigest
from privtab.accounting.exact import ExactGuarantee, compose_exact, float_down, float_up
from privtab.errors import InputError, UsageError

__all__ = [
    "LEDGER_ENV",
    "SCHEMA_VERSION",
    "History",
    "LedgerEntry",
    "LifetimeBudgetExceededError",
    "RecordDigest",
    "ReleaseLedger",
    "Reservation",
    "SettleRefusedError",
    "default_ledger_path",
    "fingerprint_files",
    "short_key",
]

#: Environment variable naming the ledger file.
LEDGER_ENV = "PRIVTAB_LEDGER"
#: Version of the ledger file's layout (version 1, without identities, is still read).
SCHEMA_VERSION = 2
_READABLE = (1, 2)
_KIND = "privtab release ledger"
_LOCK_TIMEOUT = 60.0
Status = Literal["published", "pending"]
Delivery = Literal["folder", "caller"]


_MAX_LEDGER_BYTES = 1 << 30
"""A ledger larger than this (1 GiB, millions of entries) is refused, not read whole."""


class LifetimeBudgetExceededError(UsageError):
    """A release would take a data set past its lifetime budget (nothing was recorded)."""


class SettleRefusedError(UsageError):
    """``settle`` was asked for an outcome that the entry's release folder contradicts."""


def default_ledger_path() -> Path:
    """``$PRIVTAB_LEDGER``, else ``$XDG_STATE_HOME/privtab/ledger.json``, else
    ``~/.local/state/privtab/ledger.json``."""
    env = os.environ.get(LEDGER_ENV)
    if env:
        return Path(env).expanduser()
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state).expanduser() if state else Path.home() / ".local" / "state"
    return base / "privtab" / "ledger.json"


def fingerprint_files(paths: Iterable[str | Path]) -> str:
    """``"sha256:<hex>"`` of the contents of ``paths``, streamed in 1 MiB blocks: for one
    file its plain SHA-256 (what ``sha256sum`` prints, so an operator can check it); for
    several, the SHA-256 of their contents in the order given, each length-prefixed.
    Confidential: store it only in the ledger and the run record. (A file's bytes change
    with its encoding and row order; :class:`RecordDigest` does not.)"""
    files = [Path(p) for p in paths]
    if len(files) == 1:
        h = hashlib.sha256()
        with files[0].open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        return "sha256:" + h.hexdigest()
    h = hashlib.sha256(b"privtab-dataset-v1\0")
    for p in files:
        path = Path(p)
        h.update(path.stat().st_size.to_bytes(8, "little"))
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    return "sha256:" + h.hexdigest()


def _every_definition(total: ExactGuarantee, delta: float) -> dict[str, Any]:
    """ρ (exact and rounded up) and ε: pure (if pure) and at ``delta`` by each zCDP
    conversion of ρ (pure ε enters as ε²/2)."""
    from privtab.accounting.guarantees import ZCDP
    from privtab.accounting.summary import epsilon_by_method

    rho = total.as_zcdp().value
    eps: dict[str, float] = {}
    if total.definition == "pure":
        eps["pure"] = float_up(total.value)
    for method, v in epsilon_by_method(ZCDP(float_up(rho)), delta).items():
        eps[f"zcdp_{method}"] = v["epsilon"]
    return {"rho": {"value": str(rho), "value_float": float_up(rho)}, "epsilon": eps}


def _remaining(total: ExactGuarantee, life: ExactGuarantee | None) -> dict[str, Any] | None:
    """What is left of ``life`` after ``total`` (exact; float rounded down), or ``None``
    when there is no lifetime budget or it cannot bound ``total`` (zCDP under pure)."""
    if life is None or (life.definition == "pure" and total.definition == "zcdp"):
        return None
    spent = total.value if life.definition == total.definition else total.as_zcdp().value
    left = max(life.value - spent, Fraction(0))
    return {"definition": life.definition, "value": str(left), "value_float": float_down(left)}


def short_key(dataset: str) -> str:
    """A short display form of a data-set key (a fingerprint's first 12 hex digits)."""
    for prefix in ("sha256:", RECORDS_PREFIX):
        if dataset.startswith(prefix):
            return dataset[: len(prefix) + 12]
    return dataset


def _fingerprint(key: str) -> bool:
    return key.startswith(("sha256:", RECORDS_PREFIX))


def epsilon_text(total: ExactGuarantee, delta: float) -> str:
    """``ρ = … (ε ≤ … at δ = …)`` of a composed guarantee: ρ exact or rounded up, ε at
    ``delta`` (optimal zCDP conversion; pure ε as it is) rounded up to 4 decimals."""
    if total.definition == "pure":
        return str(total)
    eps = _every_definition(total, delta)["epsilon"]["zcdp_optimal"]
    up = Decimal(eps).quantize(Decimal("0.0001"), rounding=ROUND_CEILING)
    return f"{total} (ε ≤ {up} at δ = {delta:g})"


@dataclass(frozen=True)
class LedgerEntry(Record):
    """One release of a data set.

    ``when`` is UTC ISO 8601; ``dataset`` the data-set key; ``release`` the output path
    (``""`` when the release was returned to the caller); ``plan`` a short label of the
    release plan; ``guarantee`` exact; ``over_lifetime`` is true when it was recorded past
    the lifetime budget (``--allow-more-releases``); ``status`` is ``"pending"`` between
    :meth:`ReleaseLedger.reserve` and commit (counted as spent), else ``"published"``;
    ``process`` is ``host:pid`` of the run that wrote it; ``identities`` the confidential
    fingerprints of its records (module docstring); ``folder`` the id of the release
    folder the run wrote (the marker's ``id``, :mod:`privtab.atomic`; ``""`` if unknown);
    ``delivery`` ``"folder"`` or ``"caller"``.
    """

    id: str
    when: str
    dataset: str
    release: str
    plan: str
    guarantee: ExactGuarantee
    over_lifetime: bool = False
    note: str = ""
    status: Status = "published"
    process: str = ""
    identities: tuple[str, ...] = ()
    folder: str = ""
    delivery: Delivery = "folder"

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def tokens(self) -> frozenset[str]:
        """Every key that ties this entry to a data set: its key and its identities."""
        return frozenset((self.dataset, *self.identities))

    def process_alive(self) -> bool | None:
        """For a pending entry: whether the run that wrote it is still running on this host
        (``None`` if it ran on another host). Informational: a pending entry counts as
        spent either way."""
        host, _, pid = self.process.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return None
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    @property
    def where(self) -> str:
        """Where the release went, in words."""
        return self.release if self.delivery == "folder" else "returned to the caller"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LedgerEntry:
        status = d.get("status", "published")
        if status not in ("published", "pending"):
            raise ValueError(f"unknown status {status!r}")
        delivery = d.get("delivery", "folder")
        if delivery not in ("folder", "caller"):
            raise ValueError(f"unknown delivery {delivery!r}")
        ids = d.get("identities", [])
        if not isinstance(ids, list):
            raise ValueError("identities must be a list")
        return cls(
            id=str(d["id"]),
            when=str(d["when"]),
            dataset=str(d["dataset"]),
            release=str(d["release"]),
            plan=str(d.get("plan", "")),
            guarantee=ExactGuarantee.from_dict(d["guarantee"]),
            over_lifetime=bool(d.get("over_lifetime", False)),
            note=str(d.get("note", "")),
            status=status,
            process=str(d.get("process", "")),
            identities=tuple(str(i) for i in ids),
            folder=str(d.get("folder", "")),
            delivery=delivery,
        )


@dataclass(frozen=True)
class History:
    """What the ledger held of a data set when a release of it was reserved or identified:
    its ``earlier`` releases (published and pending, in the order recorded), ``total`` —
    their exact composition with this release — and ``other_names``: declared data-set
    names under which the same records were released before (the ledger composes them)."""

    earlier: tuple[LedgerEntry, ...] = ()
    total: ExactGuarantee | None = None
    other_names: tuple[str, ...] = ()

    def notes(self, ledger: Path, delta: float = 1e-10) -> list[str]:
        """What a run says about it (nothing for a first release): the earlier releases
        and the composed guarantee (ρ and ε), the other names of the same records."""
        out = []
        if self.other_names:
            names = ", ".join(repr(n) for n in self.other_names)
            out.append(
                f"the same records were released before under the data-set name(s) {names} "
                f"in the ledger {ledger}: the ledger counts them as one data set"
            )
        if self.earlier and self.total is not None:
            prior = compose_exact(e.guarantee for e in self.earlier)
            pending = sum(e.pending for e in self.earlier)
            ids = ", ".join(e.id for e in self.earlier[-5:])
            more = " …" if len(self.earlier) > 5 else ""
            out.append(
                f"this data set already has {len(self.earlier)} release(s) in the ledger "
                f"{ledger} (entries {ids}{more}"
                + (f"; {pending} of them unconfirmed" if pending else "")
                + f") totalling {prior}; with this release it has spent "
                f"{epsilon_text(self.total, delta)}"
            )
        return out


@dataclass
class _Doc:
    """The parsed ledger file."""

    entries: list[LedgerEntry]
    default_lifetime: ExactGuarantee | None
    lifetimes: dict[str, ExactGuarantee]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": _KIND,
            "lifetime": {
                "default": (
                    None if self.default_lifetime is None else self.default_lifetime.to_dict()
                ),
                "datasets": {k: v.to_dict() for k, v in sorted(self.lifetimes.items())},
            },
            "entries": [e.to_dict() for e in self.entries],
        }

    def index(self, entry_id: str) -> int | None:
        return next((k for k, e in enumerate(self.entries) if e.id == entry_id), None)

    def related(self, tokens: Iterable[str], exclude: str | None = None) -> list[LedgerEntry]:
        """Every entry of the data set that ``tokens`` name (sharing a key or an identity,
        transitively), in the order recorded; ``exclude``: an entry id left out."""
        seen = set(tokens)
        chosen: set[str] = set()
        grew = True
        while grew:
            grew = False
            for e in self.entries:
                if e.id not in chosen and e.id != exclude and e.tokens & seen:
                    chosen.add(e.id)
                    seen |= e.tokens
                    grew = True
        return [e for e in self.entries if e.id in chosen]

    def groups(self) -> list[list[LedgerEntry]]:
        """The entries partitioned into data sets, in order of first release."""
        out: list[list[LedgerEntry]] = []
        done: set[str] = set()
        for e in self.entries:
            if e.id not in done:
                group = self.related(e.tokens)
                done |= {g.id for g in group}
                out.append(group)
        return out

    def limits(self, keys: Iterable[str]) -> list[ExactGuarantee]:
        """The lifetime budgets set for any of ``keys``, else the default (if any)."""
        own = [self.lifetimes[k] for k in dict.fromkeys(keys) if k in self.lifetimes]
        if own:
            return own
        return [] if self.default_lifetime is None else [self.default_lifetime]


def _real_path(given: Path) -> Path:
    """The ledger file ``given`` names: absolute, symbolic links followed (refused: a link
    loop, a directory, a file with hard links)."""
    absolute = Path(os.path.abspath(given))
    real = Path(os.path.realpath(absolute))
    if real.is_symlink():  # realpath leaves a link it cannot resolve (a loop) in place
        raise UsageError(
            f"the ledger path {given} is a loop of symbolic links",
            hint="give the ledger file's real path with --ledger or PRIVTAB_LEDGER",
        )
    if real.is_dir():
        raise UsageError(
            f"the ledger {given} is a directory", hint="give a file path with --ledger"
        )
    _refuse_hard_links(real, given)
    return real


def _refuse_hard_links(real: Path, given: Path) -> None:
    try:
        links = os.lstat(real).st_nlink
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot read the ledger: {exc.strerror}", file=str(given)) from exc
    if links > 1:
        raise UsageError(
            f"the ledger {real} has {links} hard links (names): privtab replaces the ledger "
            "atomically, which would leave every other name with the old history, so it "
            "refuses a hard-linked ledger",
            file=str(given),
            hint="keep one name for the ledger file (a symbolic link to it is fine) and "
            "remove the other hard links",
        )


class ReleaseLedger:
    """The ledger file at :attr:`path` (see the module docstring). Every method reads the
    file afresh; every change is one locked, atomic transaction."""

    def __init__(self, path: Path) -> None:
        self._path = path

    @classmethod
    def open(cls, path: str | Path | None = None) -> ReleaseLedger:
        """The ledger at ``path`` (default: :func:`default_ledger_path`), symbolic links
        followed. The file need not exist yet (it is created by the first change); an
        existing one is validated. Raises :class:`~privtab.errors.UsageError` for a link
        loop, a directory or a hard-linked file."""
        given = Path(path).expanduser() if path is not None else default_ledger_path()
        ledger = cls(_real_path(given))
        ledger._read()
        return ledger

    @property
    def path(self) -> Path:
        """The ledger file itself (symbolic links resolved)."""
        return self._path

    @property
    def exists(self) -> bool:
        return self._path.exists()

    # ------------------------------------------------------------------ reading
    def _read(self) -> _Doc:
        from privtab._files import file_problem

        problem = file_problem(self._path, _MAX_LEDGER_BYTES)
        if problem is not None and problem[0] != "missing_file":
            raise UsageError(f"cannot read the ledger: {problem[1]}", file=str(self._path))
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _Doc([], None, {})
        except OSError as exc:
            raise UsageError(
                f"cannot read the ledger: {exc.strerror}", file=str(self._path)
            ) from exc
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"the ledger is not valid JSON ({exc.msg})", file=str(self._path), row=exc.lineno
            ) from exc
        if not isinstance(raw, dict) or raw.get("kind") != _KIND:
            raise InputError(
                "this file is not a privtab release ledger",
                file=str(self._path),
                hint="give the ledger's own path with --ledger or PRIVTAB_LEDGER",
            )
        version = raw.get("schema_version")
        if version not in _READABLE:
            raise InputError(
                f"ledger schema_version {version!r} is not supported (this privtab reads "
                f"{', '.join(map(str, _READABLE))})",
                file=str(self._path),
                hint="use the privtab version that wrote it",
            )
        try:
            life = raw.get("lifetime") or {}
            default = life.get("default")
            return _Doc(
                entries=[LedgerEntry.from_dict(e) for e in raw.get("entries", [])],
                default_lifetime=None if default is None else ExactGuarantee.from_dict(default),
                lifetimes={
                    str(k): ExactGuarantee.from_dict(v)
                    for k, v in (life.get("datasets") or {}).items()
                },
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(
                f"the ledger is damaged: {exc}",
                file=str(self._path),
                hint="restore it from a backup; never delete a ledger to make room",
            ) from exc

    def entries(self, dataset: str | None = None) -> list[LedgerEntry]:
        """Every release (published and pending) in the order recorded, or those of the
        data set that ``dataset`` (a key or an identity) belongs to."""
        doc = self._read()
        return doc.entries if dataset is None else doc.related([dataset])

    def datasets(self) -> list[str]:
        """The data-set keys with at least one release, in order of first release."""
        return list(dict.fromkeys(e.dataset for e in self._read().entries))

    def composed(self, dataset: str) -> ExactGuarantee | None:
        """The exact sequential composition of every release (pending ones included) of
        the data set ``dataset`` belongs to; ``None`` if it has none."""
        return compose_exact(e.guarantee for e in self.entries(dataset))

    def lifetime(self, dataset: str | None = None) -> ExactGuarantee | None:
        """The lifetime budget set in the ledger for the key ``dataset`` (else the ledger's
        default), or ``None``."""
        doc = self._read()
        if dataset is not None and dataset in doc.lifetimes:
            return doc.lifetimes[dataset]
        return doc.default_lifetime

    def lifetimes(self) -> tuple[ExactGuarantee | None, dict[str, ExactGuarantee]]:
        """The ledger's default lifetime budget and the per-data-set ones."""
        doc = self._read()
        return doc.default_lifetime, dict(doc.lifetimes)

    def unconfirmed(self, exclude: str | None = None) -> list[LedgerEntry]:
        """Pending entries whose run is not running on this host any more (or ran on
        another host): each must be settled; ``exclude``: an entry id left out."""
        return [
            e
            for e in self._read().entries
            if e.pending and e.id != exclude and e.process_alive() is not True
        ]

    def settle_command(self, entry: LedgerEntry) -> str:
        """The exact command that settles the pending ``entry``: ``--published`` when its
        own release folder is at its path (or it was returned to a caller that may hold
        it), else ``--not-published``."""
        return self._settle_text(entry, self._read())

    def _settle_text(self, entry: LedgerEntry, doc: _Doc) -> str:
        state = _folder_state(entry, None, doc)
        published = state in ("own", "caller") or (
            state == "unchecked" and Path(entry.release).is_dir()
        )
        flag = "--published" if published else "--not-published"
        return f"privtab ledger settle {entry.id} {flag} --ledger {shlex.quote(str(self._path))}"

    def pending_notes(self, exclude: str | None = None) -> list[str]:
        """One line per unconfirmed entry (:meth:`unconfirmed`): what it is, why it counts,
        and the command that settles it."""
        out = []
        for e in self.unconfirmed(exclude):
            out.append(
                f"ledger entry {e.id} (reserved {e.when}, {e.guarantee}, release "
                f"{e.where}) is UNCONFIRMED: its run ended without settling it, so it "
                f"counts as spent; settle it: {self.settle_command(e)}"
            )
        return out

    def summary(self, delta: float = 1e-10, dataset: str | None = None) -> dict[str, Any]:
        """JSON-ready: the ledger's settings, every release, and per data set (entries
        sharing a key or an identity) its keys, the composed guarantee in every
        definition (exact ρ or ε; ε at ``delta`` by the zCDP conversions, as ``privtab
        safetab plan`` reports them) and what is left of its lifetime budget (rounded
        down); pending releases with the command that settles them. Floats of spent
        privacy are rounded up."""
        doc = self._read()
        groups = doc.groups()
        if dataset is not None:
            groups = [g for g in groups if any(dataset in e.tokens for e in g)]
        sets = []
        for mine in groups:
            total = compose_exact(e.guarantee for e in mine)
            assert total is not None
            keys = list(dict.fromkeys(e.dataset for e in mine))
            limits = doc.limits(keys)
            life = min(limits, key=lambda g: _headroom(total, g)) if limits else None
            sets.append(
                {
                    "dataset": keys[0],
                    "keys": keys,
                    "releases": sum(not e.pending for e in mine),
                    "pending": sum(e.pending for e in mine),
                    "over_lifetime": sum(e.over_lifetime for e in mine),
                    "composed": total.to_dict(),
                    **_every_definition(total, delta),
                    "lifetime": None if life is None else life.to_dict(),
                    "remaining": _remaining(total, life),
                }
            )
        chosen = {e.id for g in groups for e in g}
        releases = []
        for e in doc.entries:
            if e.id not in chosen:
                continue
            d = e.to_dict()
            if e.pending:
                d["process_alive"] = e.process_alive()
                d["settle"] = self.settle_command(e)
            releases.append(d)
        return {
            "ledger": str(self._path),
            "exists": self.exists,
            "schema_version": SCHEMA_VERSION,
            "delta": delta,
            "lifetime": {
                "default": None if doc.default_lifetime is None else doc.default_lifetime.to_dict(),
                "datasets": {k: v.to_dict() for k, v in sorted(doc.lifetimes.items())},
            },
            "datasets": sets,
            "releases": releases,
        }

    # ------------------------------------------------------------------ checking
    def _check(
        self,
        doc: _Doc,
        tokens: Sequence[str],
        new: ExactGuarantee,
        lifetime: ExactGuarantee | None,
        allow_more: bool,
        exclude: str | None = None,
    ) -> tuple[bool, History]:
        """Raise :class:`LifetimeBudgetExceededError` unless ``new`` fits every lifetime
        budget that applies to the data set ``tokens`` name; return whether it is over one
        (only possible with ``allow_more``) and the data set's history."""
        earlier = doc.related(tokens, exclude)
        total = compose_exact([*(e.guarantee for e in earlier), new])
        assert total is not None
        keys = [tokens[0], *(e.dataset for e in earlier)]
        limits = ([lifetime] if lifetime is not None else []) + doc.limits(keys)
        over = [lim for lim in limits if not total.fits(lim)]
        history = History(tuple(earlier), total, _other_names(tokens, earlier))
        if not over or allow_more:
            return bool(over), history
        lim = over[0]
        before = compose_exact(e.guarantee for e in earlier)
        pending = [e for e in earlier if e.pending]
        shown = total if lim.definition == total.definition else total.as_zcdp()
        why = (
            "a zCDP guarantee cannot be bounded by a pure-DP lifetime budget"
            if lim.definition == "pure" and total.definition == "zcdp"
            else f"together {shown} > lifetime {lim}"
        )
        earlier_text = (
            "no earlier release"
            if before is None
            else f"{len(earlier)} earlier release(s) totalling {before}"
            + (
                f", {len(pending)} of them unconfirmed (ids {', '.join(e.id for e in pending)};"
                " settle with privtab ledger settle)"
                if pending
                else ""
            )
        )
        raise LifetimeBudgetExceededError(
            f"data set {short_key(tokens[0])} has {earlier_text}; this release is {new}; {why}",
            file=str(self._path),
            hint="nothing was recorded or released; raise the lifetime budget (--lifetime-rho/"
            "--lifetime-epsilon, privtab ledger set-lifetime) or pass --allow-more-releases "
            "to release anyway and record it as over the lifetime budget",
        )

    def check(
        self,
        dataset: str,
        new: ExactGuarantee,
        lifetime: ExactGuarantee | None = None,
        allow_more: bool = False,
        identities: Sequence[str] = (),
    ) -> bool:
        """Whether a release of ``dataset`` with guarantee ``new`` may be made now.

        Composes ``new`` with every earlier (and pending) release of the data set —
        entries sharing the key ``dataset`` or one of ``identities``, transitively — and
        compares the total exactly with every lifetime budget that applies: ``lifetime``
        (e.g. from ``--lifetime-rho``) and the ledger's settings for the data set's keys
        (else its default). Raises :class:`LifetimeBudgetExceededError` (naming the
        ledger, the earlier total, the new guarantee and the budget) if one would be
        exceeded, unless ``allow_more``; returns whether the release is over a lifetime
        budget. Read-only: use :meth:`reserve` to check and claim in one transaction.
        """
        return self._check(self._read(), [dataset, *identities], new, lifetime, allow_more)[0]

    # ------------------------------------------------------------------ changing
    @contextlib.contextmanager
    def _transaction(self) -> Iterator[_Doc]:
        """Lock, read, let the caller change the document, write it atomically, unlock."""
        self._ensure_dir()
        lock_path = self._path.with_name(self._path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UsageError(
                f"cannot open the ledger lock {lock_path}: {exc.strerror}", file=str(self._path)
            ) from exc
        try:
            deadline = time.monotonic() + _LOCK_TIMEOUT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise UsageError(
                            f"the ledger is locked by another process for over "
                            f"{_LOCK_TIMEOUT:.0f} s",
                            file=str(self._path),
                            hint="wait for the other privtab run to finish its ledger update",
                        ) from exc
                    time.sleep(0.05)
            _refuse_hard_links(self._path, self._path)  # a link made since open()
            doc = self._read()
            yield doc
            self._write(doc)
        finally:
            os.close(fd)  # releases the flock

    def _ensure_dir(self) -> None:
        d = self._path.parent
        if not d.exists():
            try:
                d.mkdir(mode=0o700, parents=True)
            except FileExistsError:
                pass
            except OSError as exc:
                raise UsageError(
                    f"cannot create the ledger directory {d}: {exc.strerror}",
                    file=str(self._path),
                ) from exc

    def _write(self, doc: _Doc) -> None:
        from privtab.atomic import atomic_write

        data = json.dumps(doc.to_json(), indent=2, ensure_ascii=False) + "\n"
        try:
            atomic_write(self._path, data, mode=0o600, durable=True)
        except OSError as exc:
            raise UsageError(
                f"cannot write the ledger: {exc.strerror}; it is unchanged",
                file=str(self._path),
            ) from exc

    def _add(
        self,
        entry: LedgerEntry,
        lifetime: ExactGuarantee | None,
        allow_more: bool,
        replaces: str = "",
    ) -> tuple[LedgerEntry, History]:
        """:meth:`check` and append ``entry`` in one locked transaction — the one body of
        :meth:`reserve` (pending) and :meth:`record` (published): no other process can
        record between the check and the entry."""
        if not entry.dataset:
            raise ValueError("a release needs a data-set key")
        with self._transaction() as doc:
            owner = next((e for e in doc.entries if replaces and e.folder == replaces), None)
            if owner is not None and owner.pending:
                raise UsageError(
                    f"the output {entry.release} holds the release of ledger entry "
                    f"{owner.id}, which is unconfirmed: replacing it would lose the evidence "
                    "that it was published",
                    file=str(self._path),
                    hint=f"settle it first: {self._settle_text(owner, doc)}",
                )
            tokens = [entry.dataset, *entry.identities]
            over, history = self._check(doc, tokens, entry.guarantee, lifetime, allow_more)
            entry = replace(entry, over_lifetime=over)
            doc.entries.append(entry)
        return entry, history

    def _entry(
        self,
        dataset: str,
        guarantee: ExactGuarantee,
        release: str | Path | None,
        status: Status,
        **fields: Any,
    ) -> LedgerEntry:
        return LedgerEntry(
            id=uuid.uuid4().hex[:12],
            when=datetime.now(UTC).isoformat(timespec="seconds"),
            dataset=dataset,
            release="" if release is None else str(release),
            guarantee=guarantee,
            status=status,
            process=f"{socket.gethostname()}:{os.getpid()}",
            delivery="caller" if release is None else "folder",
            **fields,
        )

    def reserve(
        self,
        dataset: str,
        guarantee: ExactGuarantee,
        *,
        release: str | Path | None,
        plan: str = "",
        lifetime: ExactGuarantee | None = None,
        allow_more: bool = False,
        note: str = "",
        identities: Sequence[str] = (),
        folder: str = "",
        replaces: str = "",
    ) -> Reservation:
        """:meth:`check`, then record a *pending* release, in one locked transaction.

        ``release``: the folder the release is published at (``None``: returned to the
        calling program, no folder); ``folder``: the id of that folder (its marker's
        ``id``), which :meth:`settle` compares; ``identities``: the fingerprints known now
        (e.g. the file's ``sha256:``); ``replaces``: the id of the folder this release will
        replace (``--overwrite``) — refused while that folder is the release of an
        unconfirmed entry (replacing it would destroy the evidence that it was published:
        settle that entry first). Call it before reading the confidential data; then
        :meth:`Reservation.identify` once the records were read,
        :meth:`Reservation.commit` once the release is in place, or
        :meth:`Reservation.cancel` if the run ends before anything was published. A
        pending entry counts as spent until settled.
        """
        entry = self._entry(
            dataset, guarantee, release, "pending",
            plan=plan, note=note, identities=tuple(dict.fromkeys(identities)), folder=folder,
        )  # fmt: skip
        done, history = self._add(entry, lifetime, allow_more, replaces)
        return Reservation(self, done, history)

    def record(
        self,
        dataset: str,
        guarantee: ExactGuarantee,
        *,
        release: str | Path | None,
        plan: str = "",
        lifetime: ExactGuarantee | None = None,
        allow_more: bool = False,
        note: str = "",
        identities: Sequence[str] = (),
    ) -> LedgerEntry:
        """:meth:`check` and record a published release in one locked transaction (for a
        release that already exists; a run that is about to publish uses :meth:`reserve`)."""
        entry = self._entry(
            dataset, guarantee, release, "published",
            plan=plan, note=note, identities=tuple(dict.fromkeys(identities)),
        )  # fmt: skip
        return self._add(entry, lifetime, allow_more)[0]

    def settle(
        self, entry_id: str, *, published: bool, release: str | Path | None = None
    ) -> LedgerEntry | None:
        """Resolve a pending entry: mark it published (optionally with its final path
        ``release``) or remove it (``published=False``: nothing was released). Returns the
        published entry, or ``None`` when removed. A published entry is never removed.

        The entry's release folder decides what may be said (:class:`SettleRefusedError`
        otherwise): ``published`` needs the folder at its path (or at ``release``) to be
        the one its run wrote (the marker's ``id`` equals the entry's ``folder``) — a
        folder another entry wrote, a foreign folder or no folder is refused; not
        published is refused while its own folder is at its path. An entry returned to a
        caller, or recorded without a folder id (ledger schema 1), is not checked."""
        with self._transaction() as doc:
            i = doc.index(entry_id)
            if i is None:
                raise UsageError(
                    f"no release with id {entry_id!r} in the ledger", file=str(self._path)
                )
            e = doc.entries[i]
            if e.pending:
                _verify_settlement(doc, e, published, release, self._path)
            return _resolve(doc, i, e, published, release, self._path)

    def set_lifetime(self, guarantee: ExactGuarantee | None, dataset: str | None = None) -> None:
        """Set (``None``: clear) the lifetime budget of ``dataset``, or the ledger's default
        for every data set without its own when ``dataset`` is ``None``."""
        with self._transaction() as doc:
            if dataset is None:
                doc.default_lifetime = guarantee
            elif guarantee is None:
                doc.lifetimes.pop(dataset, None)
            else:
                doc.lifetimes[dataset] = guarantee


def _headroom(total: ExactGuarantee, life: ExactGuarantee) -> Fraction:
    """How much of ``life`` is left after ``total`` (negative: over; −∞-like when a pure
    budget cannot bound zCDP) — to show the binding budget."""
    if life.definition == "pure" and total.definition == "zcdp":
        return Fraction(-(10**30))
    spent = total.value if life.definition == total.definition else total.as_zcdp().value
    return life.value - spent


def _other_names(tokens: Sequence[str], earlier: Iterable[LedgerEntry]) -> tuple[str, ...]:
    """Declared data-set names, other than this release's, of earlier entries that share
    one of its records digests (the same content under another name)."""
    records = {t for t in tokens if t.startswith(RECORDS_PREFIX)}
    mine = tokens[0]
    names = [
        e.dataset
        for e in earlier
        if e.dataset != mine and not _fingerprint(e.dataset) and records & set(e.identities)
    ]
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Reservation:
    """A pending release returned by :meth:`ReleaseLedger.reserve`; ``history`` is what the
    ledger held of its data set at the last check."""

    ledger: ReleaseLedger
    entry: LedgerEntry
    history: History = field(default_factory=History)

    @property
    def over_lifetime(self) -> bool:
        return self.entry.over_lifetime

    def identify(
        self,
        identities: Sequence[str],
        *,
        dataset: str | None = None,
        lifetime: ExactGuarantee | None = None,
        allow_more: bool = False,
    ) -> Reservation:
        """The records were read: add their ``identities`` (e.g. the records digest) to the
        pending entry, rename its key to ``dataset`` if given (the records digest when no
        name was declared; the old key stays an identity), and check the lifetime budgets
        again against everything released of the data set it now belongs to — in one
        transaction. Over a budget
        (without ``allow_more``) the entry is removed and
        :class:`LifetimeBudgetExceededError` is raised: nothing was drawn yet. Returns the
        updated reservation (its :attr:`history` says what was released before)."""
        with self.ledger._transaction() as doc:
            i = doc.index(self.entry.id)
            base = self.entry if i is None else doc.entries[i]
            if not base.pending:
                return replace(self, entry=base)
            renamed = [base.dataset] if dataset and dataset != base.dataset else []
            grown = replace(
                base,
                dataset=dataset or base.dataset,
                identities=tuple(dict.fromkeys((*renamed, *base.identities, *identities))),
            )
            tokens = [grown.dataset, *grown.identities]
            refused: LifetimeBudgetExceededError | None = None
            try:
                over, history = self.ledger._check(
                    doc, tokens, grown.guarantee, lifetime, allow_more, exclude=grown.id
                )
            except LifetimeBudgetExceededError as exc:
                refused = exc
                if i is not None:
                    del doc.entries[i]  # the claim is withdrawn (written at the block's end)
            else:
                grown = replace(grown, over_lifetime=over or grown.over_lifetime)
                if i is None:
                    doc.entries.append(grown)
                else:
                    doc.entries[i] = grown
        if refused is not None:
            raise refused
        return Reservation(self.ledger, grown, history)

    def commit(self, release: str | Path | None = None) -> LedgerEntry:
        """The release is in place: record it as published (at ``release`` if it moved).
        If the operator removed the pending entry meanwhile, it is recorded again: a
        published release is never left out."""
        with self.ledger._transaction() as doc:
            i = doc.index(self.entry.id)
            if i is None:
                doc.entries.append(self.entry)
                i = len(doc.entries) - 1
            done = _resolve(doc, i, doc.entries[i], True, release, self.ledger.path)
        assert done is not None
        return done

    def cancel(self) -> None:
        """Nothing was published: remove the pending entry (nothing happens if it is
        already gone or was settled as published)."""
        with self.ledger._transaction() as doc:
            doc.entries = [e for e in doc.entries if not (e.id == self.entry.id and e.pending)]


FolderState = Literal["own", "other", "foreign", "absent", "caller", "unchecked"]


def _folder_state(e: LedgerEntry, release: str | Path | None, doc: _Doc) -> FolderState:
    """What is at the release path of ``e`` (or ``release``): its own folder (the marker's
    id is the entry's ``folder``), the folder of another entry, a folder it did not write,
    nothing — or ``caller`` / ``unchecked`` (no folder to look at, no id to compare)."""
    if e.delivery == "caller":
        return "caller"
    if not e.folder:
        return "unchecked"
    path = Path(release if release is not None else e.release)
    if not path.exists() and not path.is_symlink():
        return "absent"
    folder_id = _marker_id(path)
    if folder_id == e.folder:
        return "own"
    if folder_id and any(o.folder == folder_id for o in doc.entries if o.id != e.id):
        return "other"
    return "foreign"


def _marker_id(path: Path) -> str:
    from privtab.atomic import read_marker

    if path.is_symlink() or not path.is_dir():
        return ""
    marker = read_marker(path) or {}
    return str(marker.get("id", ""))


def _verify_settlement(
    doc: _Doc, e: LedgerEntry, published: bool, release: str | Path | None, ledger: Path
) -> None:
    """Refuse an outcome the release folder contradicts (see :meth:`ReleaseLedger.settle`)."""
    state = _folder_state(e, release, doc)
    path = release if release is not None else e.release
    if state in ("caller", "unchecked"):
        return
    if published and state != "own":
        if state == "other":
            owner = next(o for o in doc.entries if o.id != e.id and o.folder == _marker_id(
                Path(path)))  # fmt: skip
            why = (
                f"the release at {path} was written by the run of ledger entry {owner.id} "
                f"({owner.status}), not by the run of entry {e.id}"
            )
        elif state == "absent":
            why = f"there is no release folder at {path}"
        else:
            why = f"the folder at {path} is not the release folder the run of entry {e.id} wrote"
        raise SettleRefusedError(
            f"entry {e.id} cannot be settled as published: {why}",
            file=str(ledger),
            hint=f"if that run published nothing: privtab ledger settle {e.id} "
            "--not-published; if its release folder was moved: --published --release NEW_PATH",
        )
    if not published and state == "own":
        raise SettleRefusedError(
            f"entry {e.id} cannot be settled as not published: its own release folder is at "
            f"{path} (the folder's id matches the entry)",
            file=str(ledger),
            hint=f"privtab ledger settle {e.id} --published; or, if that release never left "
            "this machine, delete the folder first",
        )


def _resolve(
    doc: _Doc,
    i: int,
    e: LedgerEntry,
    published: bool,
    release: str | Path | None,
    path: Path,
) -> LedgerEntry | None:
    if not e.pending:
        if published:
            return e
        raise UsageError(
            f"release {e.id} is recorded as published; a published release is never "
            "removed from the ledger",
            file=str(path),
        )
    if not published:
        del doc.entries[i]
        return None
    done = replace(e, status="published", release=e.release if release is None else str(release))
    doc.entries[i] = done
    return done
