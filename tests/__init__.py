"""The test suite. A package (as are its folders), so that plain `pytest` puts the checkout's root
on sys.path and the helpers here import as `tests.*`, as they do under `python -m pytest`."""
