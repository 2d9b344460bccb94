"""Workarounds for the CPU environment (kept out of the main code path)."""
