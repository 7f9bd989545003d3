"""Is it faster, and can we trust it (pure): steady state, statistics, numerics, comparison, gate, lock."""
