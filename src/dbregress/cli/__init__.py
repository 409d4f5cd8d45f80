"""Command line: one module per verb."""
