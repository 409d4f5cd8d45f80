"""The shapes of the JSON records dbregress writes, reads and exchanges.

Each record is a `TypedDict`: at runtime a plain dict, because it comes from JSON or
goes to it (the loadgen's event stream, a stored step result, run.json, verdicts.json,
the step spec the loadgen reads), and to the type checker one named shape that every
writer and reader is held to. The JSON Schemas in schema/ say the same for other
programs and check the files where they are written and read; these say it for ours.

Where a record has variants (a failed, an ok and an imported step result; the engine
block of each driver), the shape is their union flattened into one TypedDict whose
variant-only keys are `NotRequired`: code narrows on the record's own tag (`status`,
`driver`, `kind`) as it always has, and the checker still names every key.
"""
