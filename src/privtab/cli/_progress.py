"""Progress lines on stderr for long-running commands (throttled; no output on stdout)."""

from __future__ import annotations

import sys
import time


class ProgressLine:
    """Prints ``label: done/total (pct), rate, ETA`` on stderr at most every ``every`` s.

    On a terminal the line is rewritten in place; otherwise one line per update.
    """

    def __init__(self, label: str, unit: str = "rows", every: float = 1.0, quiet: bool = False):
        self.label = label
        self.unit = unit
        self.every = every
        self.quiet = quiet
        self._last = 0.0
        self._tty = sys.stderr.isatty()
        self._shown = False

    def __call__(self, done: int, total: int | None, seconds: float) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        final = total is not None and done >= total
        if not final and now - self._last < self.every:
            return
        self._last = now
        rate = done / seconds if seconds > 0 else 0.0
        if total:
            eta = (total - done) / rate if rate > 0 else float("nan")
            text = (
                f"{self.label}: {done:,}/{total:,} {self.unit} ({100 * done / total:5.1f}%), "
                f"{rate / 1e6:.2f} M {self.unit}/s, ETA {eta:.0f} s"
            )
        else:
            text = f"{self.label}: {done:,} {self.unit}, {rate / 1e6:.2f} M {self.unit}/s"
        if self._tty:
            sys.stderr.write("\r" + text + ("\n" if final else ""))
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()
        self._shown = True

    def close(self) -> None:
        if self._tty and self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
