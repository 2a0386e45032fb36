"""Fused epilogues of a 2D convolution: what a problem's `epilogue` name asks the kernel to apply
to each output before it is stored.

Grammar, one table: [scale_]bias[_add][_relu|_silu|_gelu]. In order, per output element of
filter f: times scale[f] (a folded inference BatchNorm), plus bias[f], plus the residual (an
extra input of the output's shape and layout), then the activation; the result is written in
the output's storage type. Every extra input is stored in the problem's storage type. The empty
name is no epilogue (the default: such a problem keys and computes as it always has).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

DEFAULT_EPILOGUE = ""
ACTIVATIONS = ("none", "relu", "silu", "gelu")  # code = position (EPI_ACT of the kernels)
GRAMMAR = "[scale_]bias[_add][_relu|_silu|_gelu]"


class EpilogueError(ValueError):
    """An epilogue name outside the grammar."""


@dataclass(frozen=True, slots=True)
class Epilogue:
    name: str
    scale: bool
    bias: bool
    residual: bool
    activation: str  # one of ACTIVATIONS; GELU is the exact one, x * Phi(x) (PyTorch's default)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The extra input buffers, in the order the kernels take them: scale and bias of F
        values, the residual of the output's shape."""
        wanted = (("scale", self.scale), ("bias", self.bias), ("residual", self.residual))
        return tuple(name for name, used in wanted if used)

    def defines(self) -> tuple[tuple[str, int], ...]:
        """-D defines that compile it into a kernel (and the float64 reference)."""
        return (
            ("EPILOGUE", 1),
            ("EPI_SCALE", int(self.scale)),
            ("EPI_BIAS", int(self.bias)),
            ("EPI_RESIDUAL", int(self.residual)),
            ("EPI_ACT", ACTIVATIONS.index(self.activation)),
        )


def _table() -> dict[str, Epilogue]:
    table = {}
    for scale in (False, True):
        for residual in (False, True):
            for activation in ACTIVATIONS:
                parts = ["scale"] * scale + ["bias"] + ["add"] * residual
                parts += [activation] if activation != "none" else []
                name = "_".join(parts)
                table[name] = Epilogue(name, scale, True, residual, activation)
    return table


EPILOGUES: dict[str, Epilogue] = _table()


def check_epilogue(name: object) -> str:
    if not isinstance(name, str) or (name != DEFAULT_EPILOGUE and name not in EPILOGUES):
        raise EpilogueError(f"unknown epilogue {name!r} (known: {GRAMMAR}, e.g. bias_add_relu)")
    return str(name)


@functools.cache  # asked once per runtime call
def epilogue_name(bias: bool, residual: bool = False, activation: str = "") -> str:
    """The name of the epilogue that adds a bias, then a residual, then applies `activation`
    ("" or one of ACTIVATIONS); "" without a bias, which every named epilogue has."""
    if activation not in ("", *ACTIVATIONS):
        raise EpilogueError(f"unknown activation {activation!r} (known: {', '.join(ACTIVATIONS)})")
    if not bias:
        return DEFAULT_EPILOGUE
    parts = [
        "bias",
        *(["add"] if residual else []),
        *([activation] if activation not in ("", "none") else []),
    ]
    return "_".join(parts)


def epilogue_of(name: str) -> Epilogue | None:
    """The epilogue a name asks for; None for the empty name (none)."""
    return EPILOGUES[check_epilogue(name)] if name else None


__all__ = [
    "ACTIVATIONS",
    "DEFAULT_EPILOGUE",
    "EPILOGUES",
    "GRAMMAR",
    "Epilogue",
    "EpilogueError",
    "check_epilogue",
    "epilogue_name",
    "epilogue_of",
]
