"""The stages the CLI runs, each reading and writing a run directory (see ``rundir.py``)."""
