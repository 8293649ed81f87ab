"""The ``harness`` command line (click). Only this package imports click."""
