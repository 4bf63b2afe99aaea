"""Submission: rules per round, tree layout, assembly, truncation, prechecks, checker, reports."""
