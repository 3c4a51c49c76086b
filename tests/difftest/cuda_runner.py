"""Run the cases of a difftest manifest through a CUDA driver library (ctypes).

    python3 cuda_runner.py MANIFEST.json [--lib PATH] [--start K]

Loads the manifest's PTX once (cuModuleLoadData; a case with its own "ptx"
key uses that module instead, loaded on first use: numba kernels come one
module each), then for each case k >= K:
poisons `out` with 0xABABABAB, uploads `in` and the atom initial values,
launches, synchronises, downloads. Prints one JSON line per case to stdout:
    {"i": k, "out": [...], "atom": [...]}      or      {"i": k, "error": "..."}
preceded by a line {"start": k} (so a caller can tell which case hung or
crashed the process). After a launch error the context may be unusable: the
runner prints the error line and exits with status 5; the caller restarts it
with --start k+1. A module load failure prints {"module_error": "..."} and
exits with status 6; a failure to load a case's own module prints
{"i": k, "module_error": "..."} and goes on with the next case.
A case with "abi": "numba" gets its three arrays as numba-cuda passes them
(7 parameters each, see README.md), others three device pointers.
"""

import ctypes
import json
import os
import sys
import time

POISON = 0xABABABAB


class CudaError(Exception):
    pass


class Driver:
    def __init__(self, lib):
        os.environ.setdefault('VK_ICD_FILENAMES', '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json')
        self.lib = ctypes.CDLL(lib)
        self.ck('cuInit', 0)
        dev = ctypes.c_int()
        self.ck('cuDeviceGet', ctypes.byref(dev), 0)
        self.ctx = ctypes.c_void_p()
        self.ck('cuDevicePrimaryCtxRetain', ctypes.byref(self.ctx), dev)
        self.ck('cuCtxSetCurrent', self.ctx)

    def ck(self, name, *args):
        r = getattr(self.lib, name)(*args)
        if r != 0:
            s = ctypes.c_char_p()
            desc = ''
            try:
                if self.lib.cuGetErrorName(r, ctypes.byref(s)) == 0 and s.value:
                    desc = s.value.decode()
            except Exception:
                pass
            raise CudaError(f'{name} failed: CUresult {r} {desc}')

    def load(self, ptx_text):
        mod = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(ptx_text.encode() + b'\0')
        self.ck('cuModuleLoadData', ctypes.byref(mod), buf)
        return mod

    def unload(self, mod):
        self.ck('cuModuleUnload', mod)

    def alloc(self, nwords):
        p = ctypes.c_uint64()
        self.ck('cuMemAlloc_v2', ctypes.byref(p), ctypes.c_size_t(max(1, nwords) * 4))
        return p

    def free(self, p):
        self.ck('cuMemFree_v2', p)

    def run_case(self, mod, case):
        f = ctypes.c_void_p()
        self.ck('cuModuleGetFunction', ctypes.byref(f), mod, case['kernel'].encode())
        in_words = case['in_words']
        n_out, n_atom = case['out_words'], case['atom_words']
        bufs = [self.alloc(len(in_words)), self.alloc(n_out), self.alloc(n_atom)]
        try:
            d_in, d_out, d_atom = bufs
            h_in = (ctypes.c_uint32 * len(in_words))(*in_words)
            self.ck('cuMemcpyHtoD_v2', d_in, h_in, ctypes.c_size_t(4 * len(in_words)))
            self.ck('cuMemsetD32_v2', d_out, ctypes.c_uint(POISON), ctypes.c_size_t(n_out))
            ai = case['atom_init']
            h_atom = (ctypes.c_uint32 * n_atom)(*ai)
            self.ck('cuMemcpyHtoD_v2', d_atom, h_atom, ctypes.c_size_t(4 * n_atom))
            if case.get('abi') == 'numba':
                # each array is 7 params: meminfo, parent, nitems, itemsize, data, shape[0], strides[0]
                vals = []
                for b, n in zip(bufs, (len(in_words), n_out, n_atom)):
                    vals += [ctypes.c_uint64(0), ctypes.c_uint64(0), ctypes.c_int64(n), ctypes.c_int64(4),
                             ctypes.c_uint64(b.value), ctypes.c_int64(n), ctypes.c_int64(4)]
            else:
                vals = bufs
            params = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
            g, b = case['grid'], case['block']
            self.ck('cuLaunchKernel', f, g[0], g[1], g[2], b[0], b[1], b[2], 0, None, params, None)
            self.ck('cuCtxSynchronize')
            h_out = (ctypes.c_uint32 * n_out)()
            self.ck('cuMemcpyDtoH_v2', h_out, d_out, ctypes.c_size_t(4 * n_out))
            self.ck('cuMemcpyDtoH_v2', h_atom, d_atom, ctypes.c_size_t(4 * n_atom))
            return list(h_out), list(h_atom)
        finally:
            for p in bufs:
                try:
                    self.free(p)
                except CudaError:
                    pass


def main():
    args = sys.argv[1:]
    lib = os.environ.get('DIFFTEST_LIB', '/work/main/target/release/libcuda.so.1')
    start = 0
    if '--lib' in args:
        i = args.index('--lib')
        lib = args[i + 1]
        del args[i:i + 2]
    if '--start' in args:
        i = args.index('--start')
        start = int(args[i + 1])
        del args[i:i + 2]
    man_path = args[0]
    with open(man_path) as fh:
        man = json.load(fh)
    base = os.path.dirname(os.path.abspath(man_path))
    ptx = None
    if man.get('ptx'):
        with open(os.path.join(base, man['ptx'])) as fh:
            ptx = fh.read()
    out = sys.stdout
    timing = os.environ.get('DIFFTEST_TIMING')
    t0 = time.time()
    mod = None
    try:
        drv = Driver(lib)
        if ptx is not None:
            mod = drv.load(ptx)
        if timing:
            sys.stderr.write(f'difftest timing: init+module load {time.time() - t0:.2f} s\n')
    except (CudaError, OSError) as e:
        out.write(json.dumps({'module_error': str(e)}) + '\n')
        out.flush()
        sys.exit(6)
    case_mods = {}   # a case's own "ptx" (numba: one module per kernel)
    for k, case in enumerate(man['cases']):
        if k < start:
            continue
        out.write(json.dumps({'start': k}) + '\n')
        out.flush()
        t1 = time.time()
        cmod = mod
        if case.get('ptx'):
            if case['ptx'] not in case_mods:
                try:
                    with open(os.path.join(base, case['ptx'])) as fh:
                        case_mods[case['ptx']] = drv.load(fh.read())
                except (CudaError, OSError) as e:
                    out.write(json.dumps({'i': k, 'module_error': str(e)}) + '\n')
                    out.flush()
                    continue
            cmod = case_mods[case['ptx']]
        try:
            o, a = drv.run_case(cmod, case)
            if timing:
                sys.stderr.write(f'difftest timing: case {k} {case["kernel"]} {time.time() - t1:.2f} s\n')
            out.write(json.dumps({'i': k, 'out': o, 'atom': a}) + '\n')
            out.flush()
        except CudaError as e:
            out.write(json.dumps({'i': k, 'error': str(e)}) + '\n')
            out.flush()
            sys.exit(5)
    for m in [mod] + list(case_mods.values()):
        try:
            if m is not None:
                drv.unload(m)
        except CudaError:
            pass
    sys.exit(0)


if __name__ == '__main__':
    main()
