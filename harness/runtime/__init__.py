"""Executes scripts. ``engine.py`` is the only module that imports ``starlark``."""
