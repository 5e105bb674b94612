"""Experiments: the scenario schema, the runner and the metrics of a run."""
