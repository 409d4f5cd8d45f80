"""Running a lab's steps: the runner (which jobs run, in what order), the executor of a
job, rounds of repeats, step preparation (the spec of each step in each mode), the engine
session, the step (the loadgen's run, its figures, the interleaved step), the log follower
and the IO baseline."""
