"""Moved to :mod:`privtab.publish.worker` (the product-neutral floor every product's run
uses); this name stays only for :mod:`privtab.topdown.run`, whose import changes when the
TopDown branches merge (then this module is deleted). Nothing new imports it."""

from __future__ import annotations

from privtab.publish.worker import InOrder, background, in_worker

__all__ = ["InOrder", "background", "in_worker"]
