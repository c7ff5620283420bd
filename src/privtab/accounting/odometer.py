"""A privacy ledger across releases (an odometer): every private release of a data set,
recorded in a confidential file the operator controls, composed, and checked against a
lifetime budget before the next release is made.

The file
--------
One JSON document (``schema_version`` 1) at, in order of precedence, the path given, the
environment variable ``PRIVTAB_LEDGER``, ``$XDG_STATE_HOME/privtab/ledger.json`` or
``~/.local/state/privtab/ledger.json``. It is **confidential**: it holds a fingerprint of
each confidential input (see :func:`fingerprint_files`), so it is created with mode 0600
(its directory 0700 when privtab creates it) and must never be published with a release.
Every change is made under an exclusive lock (``fcntl.flock`` on the sibling file
``<ledger>.lock``) and written atomically (temporary file, ``fsync``, ``os.replace``,
``fsync`` of the directory), so a reader sees the old or the new ledger, never half of one,
and two runs can never both pass the lifetime check on the same remaining budget.

Composition
-----------
Releases of one data set compose sequentially (they are computed from the same people with
independent noise): Σε if every release is pure DP, else Σρ in zCDP with each pure ε
entering as ε²/2 (Bun & Steinke 2016, Prop. 1.4 and Lemma 2.3), in exact rationals
(:mod:`privtab.accounting.exact`). Releases are matched by their ``dataset`` key: the
content fingerprint by default, so an edited or re-encoded copy of the same people is a new
key — give an explicit data-set name to compose across versions of one population.

Reserve, then commit
--------------------
A release takes hours; the check must happen before the data are read and the record only
once the release exists. :meth:`ReleaseLedger.reserve` checks the lifetime budget and
writes a *pending* entry in one locked transaction; :meth:`Reservation.commit` turns it into
a published one after the release folder is in place; :meth:`Reservation.cancel` removes
it when the run failed before anything was published. The lock is held only during each
transaction, and the kernel drops a ``flock`` when its process dies, so a crash never
leaves the ledger locked.

A pending entry **counts as spent** in every check and total until it is settled: a run
killed between publishing and committing leaves a pending entry, and the ledger cannot
tell whether that release reached disk, so it assumes it did (never double spending). The
operator settles it — ``privtab ledger settle ID --published`` or ``--not-published`` —
after looking at the release path; ``privtab ledger show`` lists it as unconfirmed.

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
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from privtab._json import Record
from privtab.accounting.exact import ExactGuarantee, compose_exact, float_down, float_up
from privtab.errors import InputError, UsageError

__all__ = [
    "LEDGER_ENV",
    "SCHEMA_VERSION",
    "LedgerEntry",
    "LifetimeBudgetExceededError",
    "ReleaseLedger",
    "Reservation",
    "default_ledger_path",
    "fingerprint_files",
    "short_key",
]

#: Environment variable naming the ledger file.
LEDGER_ENV = "PRIVTAB_LEDGER"
#: Version of the ledger file's layout.
SCHEMA_VERSION = 1
_KIND = "privtab release ledger"
_LOCK_TIMEOUT = 60.0
Status = Literal["published", "pending"]


class LifetimeBudgetExceededError(UsageError):
    """A release would take a data set past its lifetime budget (nothing was recorded)."""


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
    Confidential: store it only in the ledger and the run record."""
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
    return dataset[:19] if dataset.startswith("sha256:") else dataset


@dataclass(frozen=True)
class LedgerEntry(Record):
    """One release of a data set.

    ``when`` is UTC ISO 8601; ``dataset`` the data-set key; ``release`` the output path as
    given; ``plan`` a short label of the release plan; ``guarantee`` exact;
    ``over_lifetime`` is true when it was recorded past the lifetime budget
    (``--allow-more-releases``); ``status`` is ``"pending"`` between
    :meth:`ReleaseLedger.reserve` and commit (counted as spent), else ``"published"``;
    ``process`` is ``host:pid`` of the run that wrote it.
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

    @property
    def pending(self) -> bool:
        return self.status == "pending"

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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LedgerEntry:
        status = d.get("status", "published")
        if status not in ("published", "pending"):
            raise ValueError(f"unknown status {status!r}")
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
        )


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


class ReleaseLedger:
    """The ledger file at :attr:`path` (see the module docstring). Every method reads the
    file afresh; every change is one locked, atomic transaction."""

    def __init__(self, path: Path) -> None:
        self._path = path

    @classmethod
    def open(cls, path: str | Path | None = None) -> ReleaseLedger:
        """The ledger at ``path`` (default: :func:`default_ledger_path`). The file need not
        exist yet (it is created by the first change); an existing one is validated."""
        p = Path(path).expanduser() if path is not None else default_ledger_path()
        if p.is_dir():
            raise UsageError(
                f"the ledger {p} is a directory", hint="give a file path with --ledger"
            )
        ledger = cls(p.absolute())
        ledger._read()
        return ledger

    @property
    def path(self) -> Path:
        return self._path

    @property
    def exists(self) -> bool:
        return self._path.exists()

    # ------------------------------------------------------------------ reading
    def _read(self) -> _Doc:
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
        if version != SCHEMA_VERSION:
            raise InputError(
                f"ledger schema_version {version!r} is not supported (this privtab reads "
                f"{SCHEMA_VERSION})",
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
        """Every release (published and pending) in the order recorded, or those of
        ``dataset``."""
        return [e for e in self._read().entries if dataset is None or e.dataset == dataset]

    def datasets(self) -> list[str]:
        """The data-set keys with at least one release, in order of first release."""
        return list(dict.fromkeys(e.dataset for e in self._read().entries))

    def composed(self, dataset: str) -> ExactGuarantee | None:
        """The exact sequential composition of every release (pending ones included) of
        ``dataset``; ``None`` if it has none."""
        return compose_exact(e.guarantee for e in self.entries(dataset))

    def lifetime(self, dataset: str | None = None) -> ExactGuarantee | None:
        """The lifetime budget set in the ledger for ``dataset`` (else the ledger's
        default), or ``None``."""
        doc = self._read()
        if dataset is not None and dataset in doc.lifetimes:
            return doc.lifetimes[dataset]
        return doc.default_lifetime

    def lifetimes(self) -> tuple[ExactGuarantee | None, dict[str, ExactGuarantee]]:
        """The ledger's default lifetime budget and the per-data-set ones."""
        doc = self._read()
        return doc.default_lifetime, dict(doc.lifetimes)

    def summary(self, delta: float = 1e-10, dataset: str | None = None) -> dict[str, Any]:
        """JSON-ready: the ledger's settings, every release, and per data set the composed
        guarantee in every definition (exact ρ or ε; ε at ``delta`` by the zCDP
        conversions, as ``privtab safetab plan`` reports them) and what is left of its
        lifetime budget (rounded down). Floats of spent privacy are rounded up."""
        doc = self._read()
        sets = []
        keys = list(dict.fromkeys(e.dataset for e in doc.entries))
        for key in keys if dataset is None else [k for k in keys if k == dataset]:
            mine = [e for e in doc.entries if e.dataset == key]
            total = compose_exact(e.guarantee for e in mine)
            assert total is not None
            life = doc.lifetimes.get(key, doc.default_lifetime)
            sets.append(
                {
                    "dataset": key,
                    "releases": sum(not e.pending for e in mine),
                    "pending": sum(e.pending for e in mine),
                    "over_lifetime": sum(e.over_lifetime for e in mine),
                    "composed": total.to_dict(),
                    **_every_definition(total, delta),
                    "lifetime": None if life is None else life.to_dict(),
                    "remaining": _remaining(total, life),
                }
            )
        releases = []
        for e in doc.entries:
            if dataset is not None and e.dataset != dataset:
                continue
            d = e.to_dict()
            if e.pending:
                d["process_alive"] = e.process_alive()
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
        dataset: str,
        new: ExactGuarantee,
        lifetime: ExactGuarantee | None,
        allow_more: bool,
    ) -> bool:
        """Raise :class:`LifetimeBudgetExceededError` unless ``new`` fits every lifetime budget
        that applies; return whether it is over one (only possible with ``allow_more``)."""
        earlier = [e for e in doc.entries if e.dataset == dataset]
        total = compose_exact([*(e.guarantee for e in earlier), new])
        assert total is not None
        limits = [lifetime] if lifetime is not None else []
        setting = doc.lifetimes.get(dataset, doc.default_lifetime)
        if setting is not None:
            limits.append(setting)
        over = [lim for lim in limits if not total.fits(lim)]
        if not over or allow_more:
            return bool(over)
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
            f"data set {short_key(dataset)} has {earlier_text}; this release is {new}; {why}",
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
    ) -> bool:
        """Whether a release of ``dataset`` with guarantee ``new`` may be made now.

        Composes ``new`` with every earlier (and pending) release of ``dataset`` and
        compares the total exactly with every lifetime budget that applies: ``lifetime``
        (e.g. from ``--lifetime-rho``) and the ledger's setting for the data set (else its
        default). Raises :class:`LifetimeBudgetExceededError` (naming the ledger, the earlier
        total, the new guarantee and the budget) if one would be exceeded, unless
        ``allow_more``; returns whether the release is over a lifetime budget. Read-only:
        use :meth:`reserve` to check and claim in one transaction.
        """
        return self._check(self._read(), dataset, new, lifetime, allow_more)

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
        dataset: str,
        guarantee: ExactGuarantee,
        release: str | Path,
        plan: str,
        lifetime: ExactGuarantee | None,
        allow_more: bool,
        note: str,
        status: Status,
    ) -> LedgerEntry:
        """:meth:`check` and append an entry of ``status`` in one locked transaction — the
        one body of :meth:`reserve` (``pending``) and :meth:`record` (``published``): no
        other process can record between the check and the entry."""
        with self._transaction() as doc:
            over = self._check(doc, dataset, guarantee, lifetime, allow_more)
            if not dataset:
                raise ValueError("a release needs a data-set key")
            entry = LedgerEntry(
                id=uuid.uuid4().hex[:12],
                when=datetime.now(UTC).isoformat(timespec="seconds"),
                dataset=dataset,
                release=str(release),
                plan=plan,
                guarantee=guarantee,
                over_lifetime=over,
                note=note,
                status=status,
                process=f"{socket.gethostname()}:{os.getpid()}",
            )
            doc.entries.append(entry)
        return entry

    def reserve(
        self,
        dataset: str,
        guarantee: ExactGuarantee,
        *,
        release: str | Path,
        plan: str = "",
        lifetime: ExactGuarantee | None = None,
        allow_more: bool = False,
        note: str = "",
    ) -> Reservation:
        """:meth:`check`, then record a *pending* release, in one locked transaction.

        Call it before reading the confidential data; then :meth:`Reservation.commit` once
        the release is in place, or :meth:`Reservation.cancel` if the run ends before
        anything was published. A pending entry counts as spent until settled.
        """
        entry = self._add(dataset, guarantee, release, plan, lifetime, allow_more, note, "pending")
        return Reservation(self, entry)

    def record(
        self,
        dataset: str,
        guarantee: ExactGuarantee,
        *,
        release: str | Path,
        plan: str = "",
        lifetime: ExactGuarantee | None = None,
        allow_more: bool = False,
        note: str = "",
    ) -> LedgerEntry:
        """:meth:`check` and record a published release in one locked transaction (for a
        release that already exists; a run that is about to publish uses :meth:`reserve`)."""
        return self._add(dataset, guarantee, release, plan, lifetime, allow_more, note, "published")

    def settle(
        self, entry_id: str, *, published: bool, release: str | Path | None = None
    ) -> LedgerEntry | None:
        """Resolve a pending entry: mark it published (optionally with its final path) or
        remove it (``published=False``: nothing was released). Returns the published entry,
        or ``None`` when removed. A published entry is never removed."""
        with self._transaction() as doc:
            i = next((k for k, e in enumerate(doc.entries) if e.id == entry_id), None)
            if i is None:
                raise UsageError(
                    f"no release with id {entry_id!r} in the ledger", file=str(self._path)
                )
            return _resolve(doc, i, doc.entries[i], published, release, self._path)

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


@dataclass(frozen=True)
class Reservation:
    """A pending release returned by :meth:`ReleaseLedger.reserve`."""

    ledger: ReleaseLedger
    entry: LedgerEntry

    @property
    def over_lifetime(self) -> bool:
        return self.entry.over_lifetime

    def commit(self, release: str | Path | None = None) -> LedgerEntry:
        """The release is in place: record it as published (at ``release`` if it moved).
        If the operator removed the pending entry meanwhile, it is recorded again: a
        published release is never left out."""
        with self.ledger._transaction() as doc:
            i = next((k for k, e in enumerate(doc.entries) if e.id == self.entry.id), None)
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
