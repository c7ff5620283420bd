"""The skeleton of a release run, whatever the product: refuse early, stage, publish.

Every product's ``run_release`` is the same shape; only what happens inside the staging
folder is the product's. The skeleton:

1. **refuses early** (:func:`start_release`, before any confidential file is read): a
   noise-off run without ``allow_insecure``, an insecure random source without it
   (:func:`privtab.mechanisms.base.release_source`), an output location that would
   overwrite or lose something, is a symbolic link, or whose parent folder is missing
   without ``parents`` (:func:`privtab.atomic.check_output`), a run record inside the
   release folder (:func:`privtab.release.record.check_record_path`); it fixes the run's
   start (:func:`privtab.publish.context.started_now`);
2. **builds in a staging folder** (:func:`publish_release`): the product's ``build(tmp)``
   runs in a worker thread while the main thread waits, so SIGINT, SIGTERM and SIGHUP are
   honoured within a fraction of a second at any point before publication
   (:func:`privtab.publish.worker.in_worker`, :class:`privtab.atomic.InterruptGuard`);
   a write failure (disk full, read-only) becomes a located
   :class:`~privtab.errors.UsageError`, a Spark job failure a
   :class:`~privtab.errors.RunFailedError`; on any failure or interrupt the ledger
   reservation is withdrawn (:func:`privtab.publish.ledgering.withdraw`);
3. inside the build, the product calls :func:`finish_staged`: its output validation
   runs in a background thread (:func:`check_staged`: a failure is a defect of the run,
   :class:`~privtab.errors.RunFailedError`, and publishes nothing) while ``release.json``,
   the ``NOT_PRIVATE`` marker of a test run and ``report.html`` are written;
4. **publishes**: the staging folder, with its marker (the folder id the ledger entry
   records) and every file stamped with the run's start, is renamed onto ``out``
   (:func:`privtab.atomic.atomic_directory`); the engine is closed (never raising); the
   ledger entry is committed (:func:`~privtab.publish.ledgering.commit_quietly`); the
   confidential run record is written **outside** the folder.

A product uses it as follows (SafeTab-P: :mod:`privtab.tabulate.run`; SafeTab-H:
:mod:`privtab.safetab_h.run`)::

    start = start_release(opts, product="TopDown", out=out, protect=[data, config])
    ctx = MyContext(out=Path(out), opts=opts, source=start.source, say=...,
                    started_utc=start.started_utc, started_at=start.started_at, ...)
    done = publish_release(ctx, start, engine, lambda tmp: build(ctx, tmp))
    return MyResult(out=ctx.out, document=done.built.document, record=done.built.record,
                    record_path=done.record_path, warnings=done.warnings,
                    interrupted_after_publication=done.interrupted_after_publication)

where ``build(ctx, tmp)`` reads the public inputs, fingerprints the inputs
(:func:`~privtab.publish.ledgering.fingerprints`), reserves the release
(:func:`~privtab.publish.ledgering.reserve_release`), reads the confidential records,
identifies them (:func:`~privtab.publish.ledgering.identify_release`), tabulates into
``tmp``, calls :func:`finish_staged` and returns a :class:`Built` (anything with a
``document`` and a confidential ``record``). :class:`ReleaseResult` is the common result.

Privacy: the skeleton publishes only what ``build`` wrote plus the folder's marker (kind,
version, random id, the names and sizes of the published files); file times are the run's
start; the run record (timings, input hashes, exact counts) never enters the folder.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from privtab.accounting.exact import ExactGuarantee
from privtab.atomic import InterruptGuard, atomic_directory, check_output
from privtab.errors import RunFailedError, UsageError
from privtab.publish.context import ReleaseContext, ReleaseOptions, started_now
from privtab.publish.ledgering import commit_quietly, withdraw
from privtab.publish.worker import background, in_worker
from privtab.random import RandomSource
from privtab.release.document import ReleaseDocument, RunEntry
from privtab.release.record import RunRecord, check_record_path, default_record_path

__all__ = [
    "Built",
    "Closable",
    "Published",
    "ReleaseResult",
    "Start",
    "check_staged",
    "finish_staged",
    "new_release_document",
    "public_config",
    "public_label",
    "publish_release",
    "read_unchanged",
    "start_release",
]


class Closable(Protocol):
    """An engine as the skeleton sees it: a name (for messages) and :meth:`close`."""

    @property
    def name(self) -> str: ...
    def close(self) -> None: ...


class Built(Protocol):
    """What a product's build produced in the staging folder: at least the run record."""

    @property
    def record(self) -> RunRecord: ...


B = TypeVar("B", bound=Built)
T = TypeVar("T")


@dataclass(frozen=True)
class Start:
    """A run that passed the early refusals: its random ``source``, the confidential run
    record's path, the protected inputs and its start (:func:`start_release`)."""

    source: RandomSource
    record_path: Path
    protect: tuple[Path, ...]
    started_utc: str
    started_at: float


@dataclass(frozen=True)
class Published(Generic[B]):
    """What :func:`publish_release` returns: the product's build, where the run record
    went (``None`` if it could not be written: a warning says why), whether a signal cut
    the clean-up after publication short, and every warning of the run."""

    built: B
    record_path: Path | None
    interrupted_after_publication: bool
    warnings: list[str]


@dataclass
class ReleaseResult:
    """What a run published (``document``) and what only the operator may see (``record``)."""

    out: Path
    document: ReleaseDocument
    record: RunRecord
    record_path: Path | None
    interrupted_after_publication: bool = False
    """A signal arrived while or after the release was renamed into place: the release is
    complete on disk; only clean-up after it was cut short."""
    warnings: list[str] = field(default_factory=list)

    @property
    def private(self) -> bool:
        return self.document.private

    @property
    def release(self) -> dict[str, Any]:
        """``release.json`` as a JSON object."""
        return self.document.to_json()

    @property
    def seconds(self) -> dict[str, float]:
        return self.record.seconds


def start_release(
    opts: ReleaseOptions, *, product: str, out: str | Path, protect: Sequence[Path]
) -> Start:
    """The early refusals of a run (module docstring, step 1): raises a
    :class:`privtab.errors.UserError` naming the reason; nothing is read or written."""
    if not opts.noise and not opts.allow_insecure:
        raise UsageError("noise=False releases exact counts: allowed only with allow_insecure")
    from privtab.mechanisms.base import release_source

    source = release_source(opts.source, opts.allow_insecure, product)
    check_output(out, overwrite=opts.overwrite, kind="release", protect=protect,
                 parents=opts.parents)  # fmt: skip
    record_path = Path(opts.run_record) if opts.run_record else default_record_path(out)
    check_record_path(record_path, out, parents=opts.parents)
    utc, at = started_now()
    return Start(source, record_path, tuple(protect), utc, at)


def publish_release(
    ctx: ReleaseContext, start: Start, engine: Closable, build: Callable[[Path], B]
) -> Published[B]:
    """Build the release in a staging folder, publish it and record it (module docstring,
    steps 2 and 4). Raises a :class:`privtab.errors.UserError` for anything the user can
    fix, :class:`KeyboardInterrupt` (:class:`privtab.atomic.Terminated` for
    SIGTERM/SIGHUP) when interrupted before publication — nothing is written then, and the
    ledger reservation is withdrawn."""
    began = time.monotonic()
    with InterruptGuard() as guard:
        try:
            built = _staged(ctx, start, guard, engine, build)
        finally:
            warnings = [*ctx.warnings, *_close_quietly(engine)]
        ctx.hook("published")
        built.record.ledger = commit_quietly(ctx.reservation, ctx.out, warnings, ctx.opts.returned)
        built.record.seconds["total"] = time.monotonic() - began
        written = built.record.write_or_warn(start.record_path, warnings)
    return Published(built, written, guard.deferred is not None, warnings)


def _staged(
    ctx: ReleaseContext,
    start: Start,
    guard: InterruptGuard,
    engine: Closable,
    build: Callable[[Path], B],
) -> B:
    """Build the release in a staging folder (in the worker) and rename it into place;
    on any failure or interrupt before the rename, withdraw the ledger reservation."""
    try:
        with atomic_directory(
            ctx.out,
            kind="release",
            overwrite=ctx.opts.overwrite,
            protect=start.protect,
            guard=guard,
            parents=ctx.opts.parents,
            folder_id=ctx.folder_id,
            stamp=ctx.started_at,
        ) as tmp:
            try:
                return in_worker(lambda: build(tmp), ctx.cancel)
            except OSError as exc:
                raise _write_error(exc, tmp, ctx.out) or exc from None
            except BaseException as exc:
                raise _engine_failure(exc, engine) or exc from None
    except BaseException:
        withdraw(ctx, guard)  # refused, failed or interrupted: nothing published
        raise


def finish_staged(
    ctx: ReleaseContext,
    tmp: Path,
    *,
    validate: Callable[[], None],
    document: Callable[[], ReleaseDocument],
    report: Callable[[ReleaseDocument], None] | None = None,
) -> ReleaseDocument:
    """The last steps inside the staging folder ``tmp`` (module docstring, step 3): the
    written tables are checked (``validate``, in a background thread: polars works off the
    GIL) while ``release.json`` (``document()``), the ``NOT_PRIVATE`` marker of a test run
    and — with ``opts.report`` — ``report.html`` (``report(document)``) are written; a
    failed check is raised first (:func:`check_staged`) and publishes nothing."""
    from privtab.release.marking import write_not_private

    validated = background(partial(check_staged, ctx, tmp, validate))
    try:
        doc = document()
        doc.write(tmp)
        if not doc.private:
            write_not_private(tmp, doc.noise)
        if report is not None and ctx.opts.report:
            ctx.progress("writing report.html")
            report(doc)
    finally:
        validated()
    return doc


def check_staged(ctx: ReleaseContext, tmp: Path, validate: Callable[[], None]) -> None:
    """Run the product's output validation on the staged folder ``tmp`` (timed into the
    run record). A :class:`privtab.publish.validation.OutputValidationError` is a defect
    of the run: a :class:`RunFailedError` naming the first problems (with ``tmp`` shown as
    the output path), so nothing is published."""
    from privtab.publish.validation import OutputValidationError

    ctx.progress("validating the written tables (Census output rules)")
    t0 = time.monotonic()
    try:
        validate()
    except OutputValidationError as exc:
        lines = str(exc).replace(str(tmp), str(ctx.out)).splitlines()
        shown = "\n".join(
            lines[:6] + ([f"  ... ({len(lines) - 6} more lines)"] if len(lines) > 6 else [])
        )
        raise RunFailedError(
            f"the written release failed output validation, so it was not published: {shown}",
            hint="this is a defect of privtab: please report it with the message",
        ) from exc
    ctx.seconds["validate_output"] = time.monotonic() - t0


def read_unchanged(path: Path, what: str, read: Callable[[], T]) -> T:
    """``read()`` — the one pass over the confidential ``path`` — refused (a located
    :class:`~privtab.errors.InputError`) when the file changed or vanished meanwhile (size
    or modification time differ): its records are not the ones fingerprinted."""
    from privtab.errors import InputError

    before = path.stat()
    out = read()
    after = path.stat() if path.exists() else None
    if after is None or (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        raise InputError(
            f"the {what} file changed while it was read (size or modification time differ)",
            file=str(path),
            hint="run again on a file that is not being written",
        )
    return out


def new_release_document(
    ctx: ReleaseContext,
    *,
    guarantee: ExactGuarantee,
    runs: dict[str, RunEntry],
    postprocessing: dict[str, Any],
    extra: dict[str, Any],
    kind: str,
    public: Sequence[Path] = (),
    outputs: dict[str, Any] | None = None,
) -> ReleaseDocument:
    """``release.json`` of a run: the product's ``guarantee``, ``runs``, ``postprocessing``
    and ``extra`` fields, with what the run itself says — the privtab version, the start,
    ``private``, the noise — and, when given, the SHA-256 of each ``public`` input (by file
    name) and the ``outputs`` manifest (as the last fields of ``extra``)."""
    from privtab import __version__
    from privtab.data.inputs import sha256_file

    more: dict[str, Any] = {}
    if public:
        more["public_inputs"] = {p.name: {"sha256": sha256_file(p)} for p in public}
    if outputs is not None:
        more["outputs"] = outputs
    return ReleaseDocument(
        privtab_version=__version__,
        started_utc=ctx.started_utc,
        private=ctx.private,
        noise="off (exact counts: NOT PRIVATE)" if not ctx.opts.noise else ctx.source.description,
        guarantee=guarantee,
        runs=runs,
        postprocessing=postprocessing,
        extra={**extra, **more},
        kind=kind,
    )


def public_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A config's values for ``release.json`` (``cfg``: its ``to_dict()``, whose ``source``
    is the file's path): as its source the file's **name and SHA-256** — never its path,
    which names folders of the operator's machine."""
    from privtab.data.inputs import sha256_file

    where = Path(str(cfg.get("source", "")))
    return {
        **cfg,
        "source": where.name,
        "source_sha256": sha256_file(where) if where.is_file() else None,
    }


def public_label(label: str, source: str) -> str:
    """A plan's label with the config's path ``source`` in it replaced by the file's name."""
    return label.replace(source, Path(source).name) if source else label


def _write_error(exc: OSError, staging: Path, out: Path) -> UsageError | None:
    """A failure to write the release (disk full, read-only, no permission) as a user
    error; ``None`` for other OS errors (reading an input, …), which keep their own."""
    text = str(exc)
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT) or any(
        k in text for k in ("No space left on device", "Disk quota exceeded")
    )  # polars' write errors carry no errno, only the OS message
    inside = exc.filename is not None and str(exc.filename).startswith(str(staging))
    if not (full or (inside and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM))):
        return None
    what = "the disk is full" if full else exc.strerror
    return UsageError(
        f"{what} while writing the release to {out}: no release was written",
        hint="free some space or choose another --out" if full else "choose a writable --out",
    )


def _engine_failure(exc: BaseException, engine: Closable) -> RunFailedError | None:
    """A failure of the engine's cluster (a Spark worker died, a job was lost) as one clear
    message (exit code 4); ``None`` for anything else."""
    module = type(exc).__module__ or ""
    if not module.startswith(("py4j", "pyspark")):
        return None
    text = str(exc).strip().splitlines()
    first = next((line for line in text if "Exception" in line or "Error" in line), "")
    return RunFailedError(
        f"the {engine.name} engine's job failed: {first[:300] or type(exc).__name__}; "
        "no release was written",
        hint="a worker process died or ran out of memory: check the cluster's logs and "
        "run again (with more memory per executor if needed)",
    )


def _close_quietly(engine: Closable) -> list[str]:
    """Close the engine; never raise (publication may already have happened)."""
    try:
        engine.close()
    except Exception as exc:  # clean-up failures must not hide the outcome
        return [f"closing the {engine.name} engine failed: {exc}"]
    return []
