"""Timing samples as stored: packed bytes, about 1.5 bytes a sample instead of 10 as JSON text.

CUDA events resolve about half a microsecond and H100 events tick in multiples of 32 ns, so a
sample is kept to the nanosecond (what the JSON form kept: six decimals of a millisecond) as an
integer count of the row's tick, the greatest common divisor of its samples in ns. The counts
are written as zigzag varints of their differences from the previous sample: consecutive samples
of one configuration differ by a few ticks, so most take one or two bytes. Lossless against the
JSON form: unpack(pack(json)) gives the same floats.

Layout: byte 0 the format; format 1: varint tick (ns), then one varint per sample; format 2 (any
sample not finite, which no timer gives but nothing refuses): little-endian float64 values."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable

_TICKS, _FLOAT64 = 1, 2
NS_PER_MS = 1_000_000


def pack(samples_ms: Iterable[float]) -> bytes:
    """The samples as stored (empty bytes for none)."""
    values = [float(s) for s in samples_ms]
    if not values:
        return b""
    if not all(math.isfinite(v) for v in values):
        return bytes([_FLOAT64]) + struct.pack(f"<{len(values)}d", *values)
    ns = [round(v * NS_PER_MS) for v in values]
    tick = math.gcd(*ns) or 1
    out = bytearray([_TICKS])
    _varint(out, tick)
    previous = 0
    for value in ns:
        count = value // tick
        step = count - previous
        _varint(out, step * 2 if step >= 0 else -step * 2 - 1)  # zigzag: small either way
        previous = count
    return bytes(out)


def unpack(data: bytes | None) -> list[float]:
    """The samples in ms, in the order measured."""
    if not data:
        return []
    data = bytes(data)
    if data[0] == _FLOAT64:
        return list(struct.unpack(f"<{(len(data) - 1) // 8}d", data[1:]))
    if data[0] != _TICKS:
        raise ValueError(f"timing samples in an unknown format ({data[0]})")
    numbers = _varints(data, 1)
    tick, count, out = next(numbers), 0, []
    for zigzag in numbers:
        count += zigzag >> 1 if not zigzag & 1 else -((zigzag + 1) >> 1)
        out.append(count * tick / NS_PER_MS)
    return out


def pack_json(text: str | None) -> bytes:
    """A JSON list of samples, as older schemas stored them, packed (the schema upgrade)."""
    return pack(json.loads(text) if text else [])


def _varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _varints(data: bytes, start: int):
    value = shift = 0
    for byte in data[start:]:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
        else:
            yield value
            value = shift = 0
