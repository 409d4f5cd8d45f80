"""What every layer shares: errors, the records of a run's jobs and steps, the run record
(run.json) built in one place, the TOML reader, the step-spec schema's defaults, and the
handling of interrupts."""
