"""A lab run start to end (lab_run): the time lane, then the cost lane, here or on a
fleet; `dbregress run`, `bisect` and `calibrate` all run a lab through it."""
