"""The GPU side: NVRTC compilation, the worker session, the timer and the checked tasks."""
