"""The error model of released counts: moved, unchanged, to :mod:`privtab.mechanisms.counts`
(SafeTab-P and SafeTab-H share it)."""

from privtab.mechanisms.counts import CountError, count_error

__all__ = ["CountError", "count_error"]
