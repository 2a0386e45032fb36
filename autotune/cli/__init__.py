"""The command line: click commands that wire the rooms together."""
