"""TopDown: the 2020 redistricting data (P.L. 94-171) on open solvers.

The persons histogram and its Kronecker queries are :mod:`privtab.topdown.histogram`.
"""

from __future__ import annotations

__all__: list[str] = []
