"""Workloads captured from a live server: what it ran (``statements.py``, pure) and the
bundle on disk (``bundle.py``).  The reading of the server is ``session/capture.py``'s."""
