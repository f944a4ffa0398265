"""The lab: benchmarks, chaos runs, load generation, replay and the papers' simulations.

It sits above the service (``mgmatch.app``) and the offline pipeline and may import both; nothing of
the service imports it (an import-linter contract in ``pyproject.toml``), so a deployment never
loads a harness. Its commands (``mgmatch bench …``, ``simulate …``, ``replay``, ``generate-tickets``)
are registered by the top-level CLI, :mod:`mgmatch.cli`.
"""
