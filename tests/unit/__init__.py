"""Tests that need neither NVRTC nor a GPU."""
