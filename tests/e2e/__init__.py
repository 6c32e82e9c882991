"""End-to-end tests: subprocesses (python sweep.py, the verl stand-in, real verl, mlflow server, Slurm,
Chromium, ./quickstart). Helpers and stand-ins are in tests/support/; fixtures in tests/conftest.py."""
