"""Device memory the runtime keeps per (device, stream) for the plans it launches there: the
workspace (padded inputs, scratch), which every plan overwrites as it likes, and the counters
region (KernelPlan.counters), which every plan's run leaves zeroed. Calls on one stream run in
order, so they share both; the two are never the same memory, or a plan's scratch would leave
the next plan's counters non-zero."""

from __future__ import annotations

import cupy as cp


class StreamMemory:
    """The workspace and the counters region of each (device, stream), grown on demand."""

    def __init__(self) -> None:
        self._workspaces: dict[tuple[int, int], object] = {}
        self._counters: dict[tuple[int, int], object] = {}

    def workspace(self, device: int, stream: int, nbytes: int) -> int:
        """A buffer of at least nbytes, as left by the stream's previous call."""
        return _held(self._workspaces, device, stream, nbytes, zeroed=False)

    def counters(self, device: int, stream: int, nbytes: int) -> int:
        """A counters region of at least nbytes, zero: zeroed when allocated (in the stream's
        order, before the call's launches), and left zero by every run since."""
        return _held(self._counters, device, stream, nbytes, zeroed=True)


def _held(held_by: dict, device: int, stream: int, nbytes: int, zeroed: bool) -> int:
    """The (device, stream)'s buffer of `held_by`, replaced by a larger one once the stream has
    finished with the old one (a wait only when a call needs more than any before it there)."""
    held = held_by.get((device, stream))
    if held is None or held.mem.size < nbytes:
        if held is not None:
            cp.cuda.runtime.streamSynchronize(stream)
        held = cp.cuda.alloc(nbytes)
        if zeroed:  # all of it (the pool rounds up): a later, larger need within it is zero too
            cp.cuda.runtime.memsetAsync(held.ptr, 0, held.mem.size, stream)
        held_by[(device, stream)] = held
    return held.ptr
