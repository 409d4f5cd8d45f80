"""Analysis: pure functions over stored results; no I/O."""
