"""Tests marked gpu: run on a CUDA device, skipped (with the reason) where there is none."""
