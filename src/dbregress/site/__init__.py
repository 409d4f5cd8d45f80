"""The run history as a static site (`dbregress site`): gathered from the history and
the run folders (gather, moved), drawn (charts, pages) and written incrementally (write)."""
