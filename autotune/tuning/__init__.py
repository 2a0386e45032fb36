"""The tuning loop and what drives it: studies, baselines, workers, re-measurement."""
