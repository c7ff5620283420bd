"""``python -m privtab``: the ``privtab`` command line."""

from privtab.cli import main

main()
