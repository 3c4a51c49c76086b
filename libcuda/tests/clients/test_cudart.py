"""CUDA runtime programs built by nvcc (cudart linked statically) on ptxvk's
libcuda.so.1 (run by run.sh; `run.sh -k cudart` runs only these).

nvcc comes from the nvidia-cuda-nvcc wheel of the test environment
(requirements.txt; cooperative_groups.h also needs the CCCL headers of
nvidia-cuda-cccl); without it the tests are skipped. NVCC overrides it, and
CXX names the host compiler nvcc uses (default: g++ from PATH). The programs
are compiled here, from the sources in cu/:

    nvcc -arch=sm_80 -O2 cu/runtime_api.cu -o runtime_api

(`-arch=sm_80` embeds sm_80 machine code and compute_80 PTX; the driver
loads the PTX.)
"""
import glob
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CU = os.path.join(HERE, "cu")


def nvcc():
    if os.environ.get("NVCC"):
        return os.environ["NVCC"]
    try:
        import nvidia
    except ImportError:
        nvidia = None
    for root in getattr(nvidia, "__path__", []):
        hits = sorted(glob.glob(os.path.join(root, "cu*", "bin", "nvcc")))
        if hits:
            return hits[-1]
    pytest.skip("no nvcc: install nvidia-cuda-nvcc (requirements.txt) or set NVCC")


def compile_cu(source, out, flags):
    host = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if host is None:
        pytest.fail("nvcc needs a host C++ compiler (g++), and none is on PATH")
    cmd = [nvcc(), "-ccbin", host, *flags, "-O2", source, "-o", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, " ".join(cmd) + "\n" + run.stdout + run.stderr


def run_program(exe, trace=None):
    env = dict(os.environ)
    if trace is not None:
        env["PTXVK_TRACE"] = trace
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, env=env)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr[-4000:])
    return run


# Default nvcc output (sm_80 SASS + compute_80 PTX, entries compressed as
# nvcc chooses), every entry compressed, PTX only for another target, and the
# per-thread default stream (cudart then calls the _ptsz/_ptds entry points).
@pytest.mark.parametrize(
    "flags",
    [
        ["-arch=sm_80"],
        ["-arch=sm_80", "-Xfatbin", "-compress-all"],
        ["-gencode", "arch=compute_75,code=compute_75"],
        ["-arch=sm_80", "--default-stream", "per-thread"],
    ],
    ids=["sm_80", "compress-all", "compute_75-ptx-only", "per-thread-stream"],
)
def test_runtime_api(flags, tmp_path):
    exe = tmp_path / "runtime_api"
    compile_cu(os.path.join(CU, "runtime_api.cu"), exe, flags)
    run = run_program(exe)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "checks passed" in run.stdout
    for block in range(2):
        for thread in range(3):
            line = "device printf: block %d thread %d tag 42" % (block, thread)
            assert line in run.stdout.splitlines(), line


@pytest.mark.parametrize(
    "flags", [["-arch=sm_80"], ["-gencode", "arch=compute_80,code=compute_80"]], ids=["sm_80", "compute_80-ptx-only"]
)
def test_separate_compilation(flags, tmp_path):
    """-rdc=true: the driver links the PTX of both files' pre-link fat binaries."""
    exe = tmp_path / "rdc"
    compile_cu(os.path.join(CU, "rdc_main.cu"), exe, ["-rdc=true", *flags, os.path.join(CU, "rdc_lib.cu")])
    run = run_program(exe)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "checks passed" in run.stdout


def test_textures_and_surfaces(tmp_path):
    """CUDA arrays, texture objects (linear filtering, normalized reads,
    layered, linear memory, mipmaps) and surface objects, checked against
    CUDA's texture rules on the host."""
    exe = tmp_path / "textures"
    compile_cu(os.path.join(CU, "textures.cu"), exe, ["-arch=sm_80"])
    run = run_program(exe)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "checks passed" in run.stdout


def test_thrust(tmp_path):
    """Thrust's reduce, transform, scans and count_if (CUB kernels)."""
    exe = tmp_path / "thrust_algorithms"
    compile_cu(os.path.join(CU, "thrust_algorithms.cu"), exe, ["-arch=sm_80"])
    run = run_program(exe)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "checks passed" in run.stdout


@pytest.mark.skipif(os.environ.get("PTXVK_SLOW_CLIENT_TESTS") != "1",
                    reason="llvmpipe compiles CUB's onesweep radix-sort kernel (251 barriers on the "
                    "emulated warp path) for more than ten minutes; PTXVK_SLOW_CLIENT_TESTS=1 runs it")
def test_thrust_sort(tmp_path):
    """Thrust's sort and sort_by_key: CUB's onesweep radix sort, 48 KiB of
    shared memory per block (more than lavapipe's Workgroup memory)."""
    exe = tmp_path / "thrust_algorithms"
    compile_cu(os.path.join(CU, "thrust_algorithms.cu"), exe, ["-arch=sm_80"])
    env = dict(os.environ)
    run = subprocess.run([str(exe), "sort"], capture_output=True, text=True, timeout=3600, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "ok     sort, sort_by_key" in run.stdout


def test_machine_code_only_fails_at_the_launch(tmp_path):
    """A program with only SASS (no PTX) runs as on a GPU its machine code
    does not fit: its fat binary loads, memory calls work, and the first
    launch fails with cudaErrorNoKernelImageForDevice; the trace says why."""
    exe = tmp_path / "sass_only"
    compile_cu(os.path.join(CU, "runtime_api.cu"), exe, ["-gencode", "arch=compute_80,code=sm_80"])
    run = run_program(exe, trace="1")
    assert run.returncode != 0
    assert "ok     memory" in run.stdout, run.stdout[-2000:]
    assert "cudaErrorNoKernelImageForDevice" in run.stdout, run.stdout[-2000:]
    assert "holds only cubins (sm_80)" in run.stderr
