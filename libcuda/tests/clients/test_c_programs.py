"""C programs written against NVIDIA's cuda.h, linked with -lcuda against
ptxvk's libcuda.so.1 and run (run by run.sh).

cuda.h comes from the nvidia-cuda-runtime wheel in the test environment (the
project does not redistribute NVIDIA's headers); CUDA_INCLUDE overrides it.
"""
import glob
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")


def cuda_include():
    if os.environ.get("CUDA_INCLUDE"):
        return os.environ["CUDA_INCLUDE"]
    import nvidia

    for root in nvidia.__path__:
        hits = sorted(glob.glob(os.path.join(root, "cu*", "include", "cuda.h")))
        if hits:
            return os.path.dirname(hits[-1])
    pytest.skip("no cuda.h: install nvidia-cuda-runtime or set CUDA_INCLUDE")


def libcuda_dir():
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d and os.path.exists(os.path.join(d, "libcuda.so.1")):
            return d
    pytest.fail("libcuda.so.1 of ptxvk is not on LD_LIBRARY_PATH")


@pytest.mark.parametrize("program", sorted(glob.glob(os.path.join(HERE, "c", "*.c"))), ids=os.path.basename)
def test_c_program(program, tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler")
    exe = tmp_path / "prog"
    lib = libcuda_dir()
    subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-I", cuda_include(),
                    program, "-L", lib, "-lcuda", "-lpthread", "-o", str(exe)], check=True)
    # Each program takes the folder of the test kernels (libcuda/tests/data).
    run = subprocess.run([str(exe), DATA], capture_output=True, text=True, timeout=300)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "checks passed" in run.stdout
