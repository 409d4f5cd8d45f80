"""Benchmarks: an ordered list of steps, each turned into a loadgen step spec."""
