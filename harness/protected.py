"""The names harness loads its own configuration and artifacts from: the one list of
workspace entries no sandboxed command, upstream server or fs call may create or change.

Every other list derives from this one: ``config.ALWAYS_PROTECTED`` (what the sandbox
mounts read-only and gives a placeholder when missing, runtime/placeholders.py), the fs
jail's hidden and read-only entries (runtime/jail.py), the sandbox's artifact entries
that must not be symbolic links (runtime/sandbox.py) and the root files the loader
reads (artifacts/loader.py).
"""

from __future__ import annotations

# harness.md, and ai-harness's project file: a root harness.yaml/.yml without harness.md
# is a load error (issue 23), so planting one would stop the project from loading.
CONFIG_FILES = ("harness.md", "harness.yaml", "harness.yml")
HARNESS_DIR = ".harness"
ALWAYS_PROTECTED = (HARNESS_DIR, *CONFIG_FILES, ".git")
