"""Running a lab across a fleet of benchmark hosts, on Dask distributed.

A lab is cut into units (a comparison's warm-up job, or one round: every column's job of
one repeat). The coordinator (`dbregress run LAB --scheduler ADDR`, coordinator.py) sends
units to workers (`dbregress worker --scheduler ADDR`, worker.py), one at a time per host
(a worker resource), keeps each comparison's time-lane units on hosts that may be compared
(host.py), and writes every step into its own results store and history as the worker
finishes it (ship.py). Dask does the scheduling, the transport and the rescheduling of a
unit whose worker died; what is ours is what a unit is, where it may run and how its
results come home.
"""
