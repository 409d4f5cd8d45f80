"""Results of other tools (sysbench, db_bench, the Insert Benchmark, published tables)
turned into run folders that `dbregress report` and `dbregress compare` read like native
runs: one parser per kind, and a writer they share (docs/imports.md)."""
