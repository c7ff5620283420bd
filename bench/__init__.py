"""privtab benchmarks (run with ``privtab bench`` or the scripts here)."""
