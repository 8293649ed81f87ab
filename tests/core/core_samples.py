"""Artifact texts shared by the core tests."""

ECHO = """
---
parameters:
  path: {type: string, required: true}
  n: {type: integer}
script: |
  def run(args):
      return {"path": args["path"], "n": args.get("n", 0)}
---
Echo the arguments back.
"""
