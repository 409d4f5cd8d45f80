"""Address-space layout randomization (ASLR) for the processes a run starts.

Where code, heap, stacks and shared libraries land in memory changes how they collide in
caches and TLBs, so with ASLR each fresh engine draws a slightly different speed. A lab
can turn it off for the processes it starts (`aslr = false`): the personality flag
ADDR_NO_RANDOMIZE, which `setarch --addr-no-randomize` sets, is set on dbregress's own
process and inherited by every server and loadgen it starts from then on. dbregress's
own layout is not changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util

from dbregress.collect.host import read_text

ADDR_NO_RANDOMIZE = 0x0040000
_QUERY = 0xFFFFFFFF  # personality(0xffffffff) returns the current one unchanged


def _personality(value: int) -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    result: int = libc.personality(ctypes.c_ulong(value))
    return result


def set_randomization(randomize: bool) -> None:
    """Makes the processes started from now on randomize their layout, or not."""
    current = _personality(_QUERY)
    if current == -1:
        raise OSError(ctypes.get_errno(), "personality() failed")
    wanted = current & ~ADDR_NO_RANDOMIZE if randomize else current | ADDR_NO_RANDOMIZE
    if wanted != current and _personality(wanted) == -1:
        raise OSError(ctypes.get_errno(), "personality() failed")


def state() -> str:
    """`on`, `off` (this process's flag, or the kernel's randomize_va_space = 0) or
    `unknown`: what the processes started now get."""
    kernel = (read_text("/proc/sys/kernel/randomize_va_space") or "").strip()
    current = _personality(_QUERY)
    if kernel == "0" or (current != -1 and current & ADDR_NO_RANDOMIZE):
        return "off"
    return "on" if kernel in ("1", "2") else "unknown"
