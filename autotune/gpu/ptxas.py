"""The ptxas -v report: per-entry registers, shared and constant memory, stack and spills."""

from __future__ import annotations

import re

from autotune.model.records import Resources

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_resources(log: str) -> dict[str, Resources]:
    """Per-entry registers, static shared memory and spills from ptxas -v output."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            found.setdefault(current, {})
            continue
        if m := _PROPS.search(line):
            current = m.group(1)
            found.setdefault(current, {})
            continue
        if current is None:
            continue
        entry = found[current]
        if m := _STACK.search(line):
            entry["stack_bytes"], entry["spill_stores"], entry["spill_loads"] = map(int, m.groups())
        if m := _USED.search(line):
            entry["registers"] = int(m.group(1))
            if s := _SMEM.search(line):
                entry["smem_bytes"] = int(s.group(1))
            if c := _CMEM.search(line):
                entry["cmem_bytes"] = int(c.group(1))
    return {name: Resources(**values) for name, values in found.items()}
