"""Lets numba-cuda 0.30's own IPC tests run with cuda-bindings 13.4.

numba pickles an IPC handle as `handle.reserved`, the 64 bytes of the
CUipcMemHandle, and rebuilds it by assigning them back; cuda-bindings 13.4's
CUipcMemHandle no longer has that attribute, so numba.cuda.tests.cudapy.
test_ipc fails before any driver call. Put this folder first on PYTHONPATH
(the spawned workers of those tests inherit it) to give numba a handle type
with the attribute; nothing else changes:

    PYTHONPATH=libcuda/tests/clients/ipc_compat:libcuda/tests/clients \\
        python -m pytest -p numba_suite_plugin --pyargs numba.cuda.tests.cudapy.test_ipc ...

Python imports `sitecustomize` at start-up, so this imports numba's driver
module in every process of that run; keep it off PYTHONPATH otherwise.
"""
import ctypes
import sys
import types

try:
    from cuda.bindings import driver as _bindings
    import numba.cuda.cudadrv.driver as _numba_driver

    if not hasattr(_bindings.CUipcMemHandle(), "reserved"):

        class CUipcMemHandle(_bindings.CUipcMemHandle):
            """The bindings' handle with the 64-byte `reserved` field numba uses."""

            @property
            def reserved(self):
                return ctypes.string_at(self.getPtr(), 64)

            @reserved.setter
            def reserved(self, value):
                ctypes.memmove(self.getPtr(), bytes(value), 64)

        # numba rebuilds unpickled handles with `binding.CUipcMemHandle()`.
        _compat = types.ModuleType(_bindings.__name__)
        _compat.__dict__.update(_bindings.__dict__)
        _compat.CUipcMemHandle = CUipcMemHandle
        _numba_driver.binding = _compat

        _get = _numba_driver.GetIpcHandleMixin.get_ipc_handle

        def _get_ipc_handle(self, memory):
            ipch = _get(self, memory)
            wrapped = CUipcMemHandle()
            ctypes.memmove(wrapped.getPtr(), ipch.handle.getPtr(), 64)
            ipch.handle = wrapped
            return ipch

        _numba_driver.GetIpcHandleMixin.get_ipc_handle = _get_ipc_handle
except Exception as exc:  # numba or the bindings missing: nothing to adapt
    print(f"ipc_compat: not applied ({exc})", file=sys.stderr)
