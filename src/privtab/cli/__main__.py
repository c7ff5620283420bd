"""``python -m privtab.cli``."""

from privtab.cli import main

main()
