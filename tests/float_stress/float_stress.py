#!/usr/bin/env python3
"""Stress the float arithmetic of a libcuda.so.1 against the host's C library.

Random operands weighted to where emulations go wrong (huge and tiny
factors, subnormal addends, near cancellations, products on a midpoint,
specials) go through one PTX instruction per launch (`fma`, `mul`, `add`,
`div`, `sqrt` of f64; `fma`, `mul`, `add`, `sqrt`, `cvt.f32.f64` of f32) in
each rounding mode; every result is compared bit for bit with glibc's
`fma`/`fmaf`/`sqrt`/`sqrtf` and the host FPU under `fesetround` (NaN
matches any NaN). Python 3 standard library only; Linux with glibc.

    python3 tests/float_stress/float_stress.py --lib target/release/libcuda.so.1
    python3 tests/float_stress/float_stress.py --lib L --seed 7 --count 400000 --ops fma64,div64

Prints one line per instruction and mode, up to three wrong operands for
each, and `float_stress: N checks, M wrong`; exit status 1 when any is
wrong, 2 when the library or the host reference is missing.
"""
import argparse
import ctypes
import math
import random
import struct
import sys

import platform

# glibc's FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO.
MODES = {
    "x86_64": {"rn": 0, "rm": 0x400, "rp": 0x800, "rz": 0xC00},
    "aarch64": {"rn": 0, "rm": 0x800000, "rp": 0x400000, "rz": 0xC00000},
}.get(platform.machine(), {"rn": 0})
MAX = sys.float_info.max

KERNEL = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd, .param .u32 n)
{
 .reg .b64 %rd<16>;
 .reg .f64 %fd<8>;
 .reg .f32 %f<8>;
 .reg .b32 %r<8>;
 .reg .pred %p<2>;
 ld.param.u32 %r1, [n];
 mov.u32 %r2, %ctaid.x;
 mov.u32 %r3, %ntid.x;
 mov.u32 %r4, %tid.x;
 mad.lo.s32 %r5, %r2, %r3, %r4;
 setp.ge.u32 %p1, %r5, %r1;
 @%p1 bra DONE;
 mul.wide.u32 %rd1, %r5, 8;
 ld.param.u64 %rd2, [pa];
 ld.param.u64 %rd3, [pb];
 ld.param.u64 %rd4, [pc];
 ld.param.u64 %rd5, [pd];
 add.s64 %rd6, %rd2, %rd1;
 add.s64 %rd7, %rd3, %rd1;
 add.s64 %rd8, %rd4, %rd1;
 add.s64 %rd9, %rd5, %rd1;
 ld.global.f64 %fd1, [%rd6];
 ld.global.f64 %fd2, [%rd7];
 ld.global.f64 %fd3, [%rd8];
 cvt.rn.f32.f64 %f1, %fd1;
 cvt.rn.f32.f64 %f2, %fd2;
 cvt.rn.f32.f64 %f3, %fd3;
 BODY
 st.global.f64 [%rd9], %fd4;
DONE:
 ret;
}
"""


def div64(libm, a, b, c):
    if b != 0:
        return a / b
    # Python raises where IEEE gives an infinity or NaN.
    return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)


# Name: (PTX body, leaving the result in %fd4 (f32 results widened exactly),
# whether its operands are the f32 ones, the host's result under the
# rounding mode set by fesetround).
OPS = {
    "fma64": ("fma.{m}.f64 %fd4, %fd1, %fd2, %fd3;", False, lambda libm, a, b, c: libm.fma(a, b, c)),
    "mul64": ("mul.{m}.f64 %fd4, %fd1, %fd2;", False, lambda libm, a, b, c: a * b),
    "add64": ("add.{m}.f64 %fd4, %fd1, %fd2;", False, lambda libm, a, b, c: a + b),
    "div64": ("div.{m}.f64 %fd4, %fd1, %fd2;", False, div64),
    "sqrt64": ("sqrt.{m}.f64 %fd4, %fd1;", False, lambda libm, a, b, c: libm.sqrt(a)),
    "fma32": ("fma.{m}.f32 %f4, %f1, %f2, %f3; cvt.f64.f32 %fd4, %f4;", True, lambda libm, a, b, c: libm.fmaf(a, b, c)),
    # The f64 product of two f32 values is exact: one rounding to f32.
    "mul32": ("mul.{m}.f32 %f4, %f1, %f2; cvt.f64.f32 %fd4, %f4;", True, lambda libm, a, b, c: ctypes.c_float(a * b).value),
    "add32": ("add.{m}.f32 %f4, %f1, %f2; cvt.f64.f32 %fd4, %f4;", True, lambda libm, a, b, c: libm.fmaf(a, 1.0, b)),
    "sqrt32": ("sqrt.{m}.f32 %f4, %f1; cvt.f64.f32 %fd4, %f4;", True, lambda libm, a, b, c: libm.sqrtf(a)),
    # The f64 operand as it is.
    "cvt32": ("cvt.{m}.f32.f64 %f4, %fd1; cvt.f64.f32 %fd4, %f4;", False, lambda libm, a, b, c: ctypes.c_float(a).value),
}


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def to32(x):
    """x rounded to f32 to nearest (the kernel's cvt.rn of its inputs)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def ldexp(m, e):
    try:
        return math.ldexp(m, e)
    except OverflowError:
        return math.inf


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def value(self):
        r = self.r
        k = r.random()
        if k < 0.3:
            e = r.randint(-1074, 1023)
        elif k < 0.6:
            e = r.choice([r.randint(-1074, -899), r.randint(900, 1023)])
        else:
            e = r.randint(-60, 60)
        m = r.getrandbits(52) | (1 << 52)
        if r.random() < 0.3:
            m = (m >> r.randint(0, 50)) << r.randint(0, 2)
        x = ldexp(m, e - 52)
        if not math.isfinite(x):
            x = MAX
        if r.random() < 0.02:
            x = r.choice([0.0, math.inf, math.nan, MAX, 2.0**-1074, 2.0**-1022])
        return -x if r.random() < 0.5 else x

    def triple(self):
        r = self.r
        k = r.random()
        if k < 0.15:
            # Tiny products near the subnormal grid.
            a = ldexp(r.getrandbits(53) | 1, r.randint(-600, -400) - 52) * r.choice([1, -1])
            b = ldexp(r.getrandbits(53) | 1, r.randint(-680, -450) - 52) * r.choice([1, -1])
            p = a * b
            c = r.choice([-p, p, 0.0, -0.0, ldexp(r.getrandbits(52), -1074) * r.choice([1, -1]),
                          ldexp(r.getrandbits(53), r.randint(-1080, -1000))])
            return a, b, c
        if k < 0.25:
            # A product on a midpoint, a tiny addend that breaks the tie.
            a = ldexp(1 + r.randint(1, 7) * 2.0**-52, r.choice([r.randint(-1074, 1000), r.randint(990, 1000)]))
            b = r.choice([1.5, 1.25, 1.75, 3.0]) * 2.0 ** r.randint(-100, 20)
            return a, b, r.choice([1, -1]) * ldexp(r.randint(1, 5), r.randint(-1074, -900))
        a, b = self.value(), self.value()
        p = a * b
        k = r.random()
        if k < 0.3:
            c = self.value()
        elif k < 0.6 and math.isfinite(p) and p != 0:
            c = -p
            if r.random() < 0.7:
                c = struct.unpack("<d", struct.pack("<Q", max(0, (bits(c) & ~(1 << 63)) + r.randint(-3, 3)) | (bits(c) & (1 << 63))))[0]
        elif k < 0.8:
            c = r.choice([1, -1]) * ldexp(r.randint(1, 7), r.randint(-1074, -1000))
        elif math.isfinite(p):
            c = p * r.choice([1.0, -1.0, 0.5, 2.0, 1e-20, 1e20, -1e-300])
        else:
            c = self.value()
        if math.isnan(c) and r.random() < 0.9:
            c = 1.0
        return a, b, c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default="target/release/libcuda.so.1")
    ap.add_argument("--seed", type=int, default=20261208)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--modes", default="rn,rz,rm,rp")
    args = ap.parse_args()
    try:
        cu = ctypes.CDLL(args.lib)
        libm = ctypes.CDLL("libm.so.6")
    except OSError as e:
        print(f"float_stress: {e}")
        return 2
    libm.fesetround.argtypes = [ctypes.c_int]
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES or libm.fesetround(MODES[m]) != 0:
            print(f"float_stress: cannot set the host's rounding mode {m} on {platform.machine()}")
            return 2
    libm.fesetround(0)
    for f, t in [("fma", ctypes.c_double), ("sqrt", ctypes.c_double), ("fmaf", ctypes.c_float), ("sqrtf", ctypes.c_float)]:
        getattr(libm, f).restype = t
        getattr(libm, f).argtypes = [t] * (3 if f.startswith("fma") else 1)

    def ck(r, what):
        if r:
            raise SystemExit(f"float_stress: {what} returned CUresult {r}")

    ck(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    g = Gen(args.seed)
    n = args.count
    cases = [g.triple() for _ in range(n)]
    bufs = []
    for i in range(4):
        p = ctypes.c_uint64()
        ck(cu.cuMemAlloc_v2(ctypes.byref(p), n * 8), "cuMemAlloc")
        bufs.append(p)
    for i in range(3):
        arr = (ctypes.c_double * n)(*[c[i] for c in cases])
        ck(cu.cuMemcpyHtoD_v2(bufs[i], arr, n * 8), "cuMemcpyHtoD")
    # The kernel's cvt.rn.f32.f64 of the operands, rounded here before any
    # other mode is set (the conversion follows the host's mode).
    cases32 = [tuple(to32(x) for x in t) for t in cases]
    checks = wrong = 0
    for op in args.ops.split(","):
        body, narrow, ref = OPS[op]
        operands = cases32 if narrow else cases
        for m in modes:
            ptx = KERNEL.replace("BODY", body.format(m=m))
            mod = ctypes.c_void_p()
            ck(cu.cuModuleLoadData(ctypes.byref(mod), ptx.encode() + b"\0"), "cuModuleLoadData")
            f = ctypes.c_void_p()
            ck(cu.cuModuleGetFunction(ctypes.byref(f), mod, b"k"), "cuModuleGetFunction")
            nn = ctypes.c_uint32(n)
            kargs = (ctypes.c_void_p * 5)(*[ctypes.cast(ctypes.byref(b), ctypes.c_void_p) for b in bufs],
                                          ctypes.cast(ctypes.byref(nn), ctypes.c_void_p))
            ck(cu.cuLaunchKernel(f, (n + 127) // 128, 1, 1, 128, 1, 1, 0, None, kargs, None), "cuLaunchKernel")
            ck(cu.cuCtxSynchronize(), "cuCtxSynchronize")
            out = (ctypes.c_uint64 * n)()
            ck(cu.cuMemcpyDtoH_v2(out, bufs[3], n * 8), "cuMemcpyDtoH")
            ck(cu.cuModuleUnload(mod), "cuModuleUnload")
            libm.fesetround(MODES[m])
            wants = [ref(libm, a, b, c) for a, b, c in operands]
            libm.fesetround(0)
            bad = 0
            for (a, b, c), w, got in zip(operands, wants, out):
                gv = struct.unpack("<d", struct.pack("<Q", got))[0]
                if not ((math.isnan(w) and math.isnan(gv)) or bits(w) == got):
                    bad += 1
                    if bad <= 3:
                        print(f"  {op}.{m}: a={a.hex()} b={b.hex()} c={c.hex()} got {gv.hex()} want {w.hex()}")
            checks += n
            wrong += bad
            print(f"float_stress: {op}.{m}: {n - bad} of {n} right", flush=True)
    print(f"float_stress: {checks} checks, {wrong} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
