"""The test suite: a package, so that tests import their helpers as tests.<module> whether
pytest runs as `pytest` or `python -m pytest`."""
