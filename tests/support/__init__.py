"""Helpers shared by the tests: hostile inputs, interruptions, videos, processes (not tests themselves)."""
