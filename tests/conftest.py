"""For every test: labs that do not set `count` get no cost lane (DBREGRESS_COUNT=0),
so the many small labs of the suite do not each spend minutes counting under valgrind.
The tests of the lane set `count = true` in their labs, which wins over this."""

from __future__ import annotations

import os

os.environ["DBREGRESS_COUNT"] = "0"
