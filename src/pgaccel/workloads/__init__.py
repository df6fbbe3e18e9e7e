"""Workloads: each module of this package registers its own in ``base.REGISTRY``
(see ``base.py`` for the interface)."""
