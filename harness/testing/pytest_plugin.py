"""pytest plugin: the cases of ``.harness/tests/*.md`` as pytest items.

Installing harness registers the plugin (entry point ``pytest11``); it stays inert
until a project opts in, with ``pytest -p harness.testing.pytest_plugin`` or in the ini
file::

    [pytest]
    # collect .harness/tests/*.md with the rest of the suite
    harness_tests = true

(or ``harness_tests = true`` under ``[tool.pytest.ini_options]`` in pyproject.toml).
When the project sets ``testpaths``, the rootdir's ``.harness/tests`` is collected too
(testpaths would otherwise leave it out) unless paths are given on the command line.

Each test file becomes a collector, each case an item that runs through the same
runner as ``harness test``; a failure shows the same file:line, expected/got and diff.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported on first use: the plugin is loaded by every pytest run
    from harness.testing.runner import Runner
    from harness.testing.spec import Case

NAME = "harness.testing.pytest_plugin"
_runners: dict[Path, Runner] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "harness_tests",
        "collect .harness/tests/*.md of the rootdir's harness project as pytest items",
        type="bool",
        default=False,
    )


def _is_test_file(path: Path) -> bool:
    return (
        path.suffix == ".md"
        and path.parent.name == "tests"
        and path.parent.parent.name == ".harness"
    )


def _active(config: pytest.Config) -> bool:
    """Installed harness registers this plugin everywhere; it works only where a project
    opted in: ``harness_tests = true`` in the ini file, or ``-p`` on the command line."""
    return bool(config.getini("harness_tests")) or NAME in (
        getattr(config.option, "plugins", None) or []
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if _is_test_file(file_path) and _active(parent.config):
        return HarnessTestFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``harness_tests = true``, walk into ``.harness/`` (pytest skips hidden folders
    by default) so the project's test files are collected with the rest of the suite."""
    if not config.getini("harness_tests"):
        return None
    if collection_path.name == ".harness" or (
        collection_path.name == "tests" and collection_path.parent.name == ".harness"
    ):
        return False
    return None


def pytest_configure(config: pytest.Config) -> None:
    """With ``harness_tests = true`` and ``testpaths`` deciding what to collect (no paths on
    the command line), add the rootdir's ``.harness/tests``: the option would otherwise
    collect nothing in a project whose ``testpaths`` does not name it."""
    if not config.getini("harness_tests") or config.args_source != config.ArgsSource.TESTPATHS:
        return
    tests = config.rootpath / ".harness" / "tests"
    covered = any(tests.is_relative_to(Path(arg).resolve()) for arg in config.args)
    if tests.is_dir() and not covered:
        config.args.append(str(tests))


def _runner(root: Path) -> Runner:
    # Lazy on purpose: pytest loads this plugin in every session, harness tests or not.
    from harness.testing.runner import Runner

    runner = _runners.get(root)
    if runner is None:
        runner = _runners[root] = Runner(root)
    return runner


def pytest_unconfigure(config: pytest.Config) -> None:
    while _runners:
        _root, runner = _runners.popitem()
        runner.close()


class HarnessTestFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        root = self.path.parent.parent.parent
        runner = _runner(root)
        files, problems = runner.collect([self.path])
        if problems:
            raise HarnessTestError("\n".join(p.render() for p in problems))
        for tf in files:
            for case in tf.cases:
                yield HarnessCase.from_parent(self, name=case.name, case=case, root=root)


class HarnessTestError(Exception):
    pass


class HarnessCase(pytest.Item):
    def __init__(self, *, case: Case, root: Path, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case
        self.root = root

    def runtest(self) -> None:
        result = _runner(self.root).run_case(self.case)
        if not result.passed:
            raise HarnessCaseFailed("\n".join(f.render() for f in result.failures))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, HarnessCaseFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"{self.case.path}::{self.case.name}"


class HarnessCaseFailed(AssertionError):
    pass
