"""verlsweep test suite."""
