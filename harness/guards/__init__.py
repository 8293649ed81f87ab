"""The guard checker of ``harness validate``: what hook scripts read, followed through
``when`` and ``handle`` against the payloads, tools and decisions of the project."""
