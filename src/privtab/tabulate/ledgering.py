"""Moved to :mod:`privtab.publish.ledgering` (the release ledger's steps, the same for every
product); this name stays only for :mod:`privtab.topdown.ledger`, whose imports change when
the TopDown branches merge (then this module is deleted). Nothing new imports it."""

from __future__ import annotations

from privtab.publish.ledgering import cancel_quietly, commit_quietly

__all__ = ["cancel_quietly", "commit_quietly"]
