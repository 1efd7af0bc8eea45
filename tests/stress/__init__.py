"""Shared machinery for the fault, load and hostile-input tests and the bench/faults scripts."""
