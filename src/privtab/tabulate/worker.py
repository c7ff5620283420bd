"""Threads of a run: the worker that does the work, daemon threads for side computations.

Python runs signal handlers in the main thread only, between bytecodes — never during a
long polars or numpy call. A run therefore does its work in a worker thread while the main
thread waits (:func:`in_worker`), so SIGINT, SIGTERM and SIGHUP are honoured at once; side
computations (the privacy analyses) run in daemon threads (:func:`background`) so that an
interrupted process never waits for them at exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["background", "in_worker"]

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
