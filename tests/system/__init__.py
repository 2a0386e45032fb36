"""Tests of whole processes: campaigns in subprocesses, PostgreSQL, pip (wheel, extras); the long
ones are marked slow."""
