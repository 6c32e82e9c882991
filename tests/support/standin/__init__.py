"""Test-only stand-ins for external programs (never imported by the ``verlsweep`` package)."""
