"""dbregress explain: why a step got slower, in figures a run cannot give.

For chosen steps and columns it starts each build as the run did, replays the
benchmark's steps, and runs the chosen ones under valgrind's callgrind (instructions,
simulated cache misses and branch mispredictions per operation, per function) and,
separately, under a sampling profiler (flame graphs). cause.py turns the run's metric
verdicts and these figures into a named cause per slower verdict. docs/metrics.md
("Explanations") says how each figure is measured.
"""
