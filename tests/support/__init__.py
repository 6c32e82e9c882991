"""Helpers, stand-ins and data the tests share (never imported by the verlsweep package)."""
