"""pytest plugin for running numba-cuda's own test suite from its wheel.

The wheel ships the tests but not the conftest.py that defines the
`initialize_from_pytest_config` fixture their base class uses; this plugin
provides it. See README.md next to this file for the command.
"""
import pytest


def pytest_addoption(parser):
    parser.addoption("--dump-failed-filechecks", action="store_true",
                     help="Dump reproducers for FileCheck tests that fail.")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    """Gives the test class the option numba-cuda's conftest would give it."""
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
