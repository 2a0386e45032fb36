"""Tests that compile with NVRTC (from PyPI; no GPU needed): families, the compiler, the tuner and
the command line over a synthetic GPU."""
