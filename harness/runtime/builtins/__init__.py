"""Built-in function families of docs/spec.md §7, one module per family.

Each module exports ``FUNCTIONS: dict[str, Callable]`` keyed by dotted name
(``"fs.read"``); every function takes the :class:`~harness.runtime.context.CallContext`
first and raises :class:`~harness.errors.BuiltinError` (or ``JailError``) on bad input.
"""
