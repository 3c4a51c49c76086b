"""PyTorch 2.15 (the default PyPI wheel, CUDA 13) through the shim.

Issue 22. The wheel ships its own kernels as cubins only (no PTX), so
PyTorch's elementwise and reduction kernels cannot run on ptxvk: they fail
with cudaErrorNoKernelImageForDevice at their launch, as on an NVIDIA GPU
the wheel was not built for. What runs: start-up, device properties,
copies, and everything PyTorch hands to cuBLAS, whose PTX ptxvk runs
(cuBLAS is told capability 13.0 and picks kernels it ships as PTX).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "cuda"):
    # This test's own folder, found as a namespace package named torch.
    pytest.skip("PyTorch is not installed here (run torch/run.sh)", allow_module_level=True)


def _rel(got, want):
    return float(abs(got.astype(np.float64) - want).max() / abs(want).max())


def test_starts_and_reports_the_device():
    assert torch.cuda.is_available()
    assert torch.cuda.device_count() >= 1
    props = torch.cuda.get_device_properties(0)
    # Through the shared CUDA runtime: the libraries' capability.
    assert (props.major, props.minor) == (13, 0)
    assert props.total_memory > 0 and props.multi_processor_count >= 1


def test_copies_round_trip():
    rng = np.random.default_rng(15)
    for dtype in (np.float32, np.float64, np.int64, np.uint8):
        a = (rng.standard_normal(4099) * 1000).astype(dtype)
        t = torch.from_numpy(a).cuda()
        assert t.is_cuda
        assert np.array_equal(t.cpu().numpy(), a)
        # Device to device.
        assert np.array_equal(t.clone().cpu().numpy(), a)


def test_matmul_and_linear_through_cublas_match_numpy():
    rng = np.random.default_rng(16)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    got = torch.matmul(torch.from_numpy(a).cuda(), torch.from_numpy(a).cuda()).cpu().numpy()
    assert _rel(got, a.astype(np.float64) @ a) < 3e-6
    x = rng.standard_normal((16, 40)).astype(np.float32)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    tx, tw, tb = (torch.from_numpy(v).cuda() for v in (x, w, bias))
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    assert _rel(torch.nn.functional.linear(tx, tw).cpu().numpy(), want) < 2e-6
    assert _rel(torch.nn.functional.linear(tx, tw, tb).cpu().numpy(), want + bias) < 2e-6
    d = rng.standard_normal((70, 33))
    e = rng.standard_normal((33, 9))
    assert _rel(torch.mm(torch.from_numpy(d).cuda(), torch.from_numpy(e).cuda()).cpu().numpy(), d @ e) < 1e-14


def test_own_kernels_fail_loudly_and_cublas_still_works():
    # PyTorch's own kernel (a fill, then an add): machine code only.
    with pytest.raises(Exception, match="no kernel image is available"):
        (torch.ones(4, device="cuda") + 1).cpu()
    rng = np.random.default_rng(17)
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((30, 10)).astype(np.float32)
    got = torch.mm(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()).cpu().numpy()
    assert _rel(got, a.astype(np.float64) @ b) < 2e-6
