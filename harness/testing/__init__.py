"""``harness test`` and ``harness eval``: tests for tools and hooks as files.

- :mod:`harness.testing.spec`: test files (``.harness/tests/*.md``) -> frozen cases (pure);
- :mod:`harness.testing.runner`: each case in a fresh copy of the workspace, in parallel;
- :mod:`harness.testing.expect`: the ``expect:`` keys and failure messages;
- :mod:`harness.testing.report`: text, json, github and junit output;
- :mod:`harness.testing.coverage`: tools, hooks and hook decisions no case reached;
- :mod:`harness.testing.evalspec`, :mod:`harness.testing.evals`: model-driven evals
  (``.harness/evals/*.md``): parsing (pure), running and grading;
- :mod:`harness.testing.pytest_plugin`: the same files as pytest items.

This package imports the pipeline (``harness.load``, ``Harness``, ``Session``); nothing
in the pipeline imports it.
"""
