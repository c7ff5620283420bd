"""Threads of a run: the worker that does the work, daemon threads for side computations.

Python runs signal handlers in the main thread only, between bytecodes — never during a
long polars or numpy call. A run therefore does its work in a worker thread while the main
thread waits (:func:`in_worker`), so SIGINT, SIGTERM and SIGHUP are honoured at once; side
computations (the privacy analyses) run in daemon threads (:func:`background`) so that an
interrupted process never waits for them at exit; :class:`InOrder` runs a sequence of jobs
(writing a level's tables) one at a time beside the thread that produces them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["InOrder", "background", "in_worker"]

T = TypeVar("T")


def in_worker(fn: Callable[[], T], cancel: threading.Event) -> T:
    """Run ``fn`` in a worker thread while the main thread waits, so that signals are
    handled promptly (Python runs signal handlers in the main thread only, between
    bytecodes — never during a long polars or numpy call). On an interrupt the worker is
    told to stop at its next safe point and the interrupt is re-raised at once."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the main thread below
            box["error"] = exc

    worker = threading.Thread(target=target, name="privtab-release", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.05)
    except BaseException:
        cancel.set()
        raise
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])


def background(fn: Callable[[], T]) -> Callable[[], T]:
    """Start ``fn`` in a daemon thread (an interrupted run must not wait for it at exit);
    the returned function waits for its result (or raises its exception)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised by the getter
            box["error"] = exc

    thread = threading.Thread(target=target, name="privtab-analysis", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        if "error" in box:
            raise box["error"]
        return cast(T, box["value"])

    return result


class InOrder:
    """Jobs run one at a time, in the order submitted, each in a daemon thread beside the
    caller (e.g. writing one chunk's tables while the next chunk is drawn).

    :meth:`submit` first waits for the previous job, so at most one job runs while the
    caller prepares the next (memory holds two jobs' data, not a queue of them). A job's
    exception is raised by the next :meth:`submit` or :meth:`wait` (and the job it would
    have started is not run)."""

    def __init__(self, name: str = "privtab-writer") -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, fn: Callable[[], object]) -> None:
        """Wait for the previous job (raising its error), then start ``fn``."""
        self.wait()

        def target() -> None:
            try:
                fn()
            except BaseException as exc:  # raised in the caller by wait()
                self._error = exc

        self._thread = threading.Thread(target=target, name=self.name, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait until the last job is done; raise the error of a job that failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error

    def wait_quietly(self) -> None:
        """Wait until the last job is done, ignoring any error (on the way out of a failed
        run, whose own error is the one to report)."""
        with contextlib.suppress(BaseException):  # the caller is already failing
            self.wait()
