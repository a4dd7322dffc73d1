"""Sagaway's internal core. Not a public API: import from ``sagaway`` instead."""
