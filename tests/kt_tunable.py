"""Kernel Tuner's Tunable by its interface, for the tests of tune_kernel's Tunable arguments
(kernel_tuner.accuracy need not be installed)."""

from __future__ import annotations

from collections import UserDict


class Tunable(UserDict):
    """The arrays of one argument by a tunable's value; the configuration selects one."""

    def __init__(self, param_key, arrays) -> None:
        super().__init__(arrays)
        self.param_key = param_key

    def select_for_configuration(self, params):
        return self.data[params[self.param_key]]
