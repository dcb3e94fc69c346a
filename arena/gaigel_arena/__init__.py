"""Gaigel bot arena: schedule, journal, ratings, runner and report as separate modules."""
