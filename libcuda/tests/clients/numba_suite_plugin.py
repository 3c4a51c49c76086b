"""pytest plugin for running numba-cuda's own test suite from its wheel.

The wheel ships the tests but not the conftest.py that defines the
`initialize_from_pytest_config` fixture their base class uses; this plugin
provides it. See README.md next to this file for the command.

It also imports each test module under its real name. The wheel installs the
tests at numba_cuda/numba/cuda/tests/..., reached as `numba.cuda.tests...`
through numba-cuda's import redirector; `--import-mode=importlib` would name
them after the directory layout (`cuda.tests.cudapy.test_extending`), and
tests that look at their own module's name (test_extending's docstring and
overload-signature checks, and the subprocess it starts with
`python -m unittest <module>`) then fail although the driver is not involved.
"""
import importlib

import pytest


class _NamedModule(pytest.Module):
    """A test module imported as `numba.cuda.tests...`, as unittest does."""

    real_name = ""

    def _getobj(self):
        return importlib.import_module(self.real_name)


def pytest_pycollect_makemodule(module_path, parent):
    parts = module_path.parts
    if module_path.suffix != ".py" or "numba_cuda" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("numba_cuda")
    rel = parts[at + 1:]
    if rel[:3] != ("numba", "cuda", "tests") or not module_path.name.startswith("test_"):
        return None
    mod = _NamedModule.from_parent(parent, path=module_path)
    mod.real_name = ".".join(rel)[: -len(".py")]
    return mod


def pytest_addoption(parser):
    parser.addoption("--dump-failed-filechecks", action="store_true",
                     help="Dump reproducers for FileCheck tests that fail.")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    """Gives the test class the option numba-cuda's conftest would give it."""
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
