"""Tables, plots and REPORT.md, read from the results database only."""
