"""How a run was measured (identity): the method identity every run and counting replay
records (loadgen binary, valgrind, libc, caches, cost model, counting profile, CPU
features), its keys, and what changed between two."""
