"""dbregress: find and explain performance regressions between database engine builds."""

__version__ = "0.1.0"
