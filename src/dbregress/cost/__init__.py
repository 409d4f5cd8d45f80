"""The cost lane: exact counts per operation from replays under valgrind, and their
verdicts (docs/verdicts.md, "The cost lane")."""
