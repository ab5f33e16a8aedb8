"""Data pipeline tooling for frugalmqtt (to come)."""
