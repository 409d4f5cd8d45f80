"""A Ctrl-C that Python drops (raised while a finalizer runs) is raised again at the
lab's next checkpoint, so a run cannot end "ok" after it."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Iterator

import pytest

from dbregress.model import interrupts


@pytest.fixture
def installed() -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    interrupts.install()
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        interrupts._state.installed = False
        interrupts._state.count = 0
        interrupts._state.name = None


class _SignalsWhenCollected:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the handler raises here, and Python drops it


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_lost_in_a_finalizer_is_raised_at_the_next_check(installed: None) -> None:
    interrupts.check()  # nothing received: nothing raised
    obj = _SignalsWhenCollected()
    del obj  # the KeyboardInterrupt raised in __del__ is dropped: we get past this line
    gc.collect()
    assert interrupts._state.count == 1
    with pytest.raises(KeyboardInterrupt, match="SIGINT"):
        interrupts.check()


def test_check_waits_for_a_shielded_block_and_stops_after_settle(installed: None) -> None:
    # raised on leaving the shield
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), interrupts.shielded():
        os.kill(os.getpid(), signal.SIGTERM)  # deferred by the shield...
        interrupts.check()  # ...and not raised by a check inside it
    # had it been lost, a check wherever the lab goes next raises it again
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        interrupts.check()
    interrupts.settle()
    interrupts.check()  # the lab is over: only the exit is left
