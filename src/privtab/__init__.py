"""privtab: differentially private population tables with end-to-end accounting.

Importing :mod:`privtab` is cheap: it pulls in no numerical or dataframe library.
Subpackages (``privtab.accounting``, ``privtab.random``, ``privtab.mechanisms``, ...)
are imported on demand.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
