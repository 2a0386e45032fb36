"""The code sections of a cubin (ELF64, little-endian): a test helper that compares two builds'
machine code without nvdisasm, whatever metadata sections differ between them."""

from __future__ import annotations

import struct


def sections(cubin: bytes) -> dict[str, bytes]:
    """Every section's bytes by name (SHT_NOBITS sections, which have none in the file, as b"")."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
    ]
    names_offset = headers[shstrndx][4]

    def name(offset: int) -> str:
        end = cubin.index(b"\0", names_offset + offset)
        return cubin[names_offset + offset : end].decode()

    nobits = 8
    return {
        name(h[0]): b"" if h[1] == nobits else cubin[h[4] : h[4] + h[5]] for h in headers if h[1]
    }


def code(cubin: bytes) -> dict[str, bytes]:
    """The machine code of each function: the .text.<function> sections."""
    return {k: v for k, v in sections(cubin).items() if k.startswith(".text.")}
