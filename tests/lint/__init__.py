"""Tests of `sagaway lint` (sagaway.analysis)."""
