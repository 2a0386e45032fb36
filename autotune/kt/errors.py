"""tune_kernel's one error: an argument that cannot be used, named in one line."""


class TuneKernelError(ValueError):
    """An argument of tune_kernel that cannot be used: one line naming it."""


__all__ = ["TuneKernelError"]
