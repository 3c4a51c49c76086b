"""Warp's tiled GMRES least-squares kernel
(`make_gmres_solve_least_squares_kernel_tiled`, one block of K threads per
batch; `bar.sync`, `shfl.sync.down`, `vote.ballot`) against its scalar twin
and numpy, on an upper Hessenberg system of k columns. Its lanes read a
broadcast element of a shared tile and lane 0 then overwrites it, with no
barrier between (warp-synchronous write after read). On lavapipe, where a
warp of 16 or 32 threads is emulated over 2 or 4 subgroups, that was
silently wrong (test_linear_solvers.py's GMRES residuals of 1e15 and more)
until translator/src/emit/lockstep.rs made a shared store after shared
loads a lock-step point. The Warp selection (run.sh) runs it.

Run with the shim on the library path, in the Warp venv:
    LD_LIBRARY_PATH=$(libcuda/build-libcuda.sh) \
        /tmp/ptxvk-warp-venv/bin/python libcuda/tests/clients/warp/gmres_least_squares.py [k ...]
Exits 1 when a tiled result differs from numpy's least squares.
"""

import sys

import numpy as np
import warp as wp
from warp._src.optim.linear import _gmres_solve_least_squares, make_gmres_solve_least_squares_kernel_tiled


def run(k: int, device: str) -> float:
    tile = 1 << int(np.ceil(np.log2(k)))
    rng = np.random.default_rng(3)
    batch = 2
    # H[b, row, col], upper Hessenberg (row <= col + 1), k + 1 rows, k columns.
    h = rng.uniform(-1, 1, size=(batch, k + 1, tile)).astype(np.float32)
    rows = np.arange(k + 1)[:, None]
    cols = np.arange(tile)[None, :]
    h *= ((rows <= cols + 1) & (cols < k)).astype(np.float32)
    beta = rng.uniform(1, 2, size=batch).astype(np.float32)
    want = []
    for b in range(batch):
        rhs = np.zeros(k + 1)
        rhs[0] = beta[b]
        want.append(np.linalg.lstsq(h[b, :, :k].astype(np.float64), rhs, rcond=None)[0])
    worst = 0.0
    for name, kernel, threads in [
        ("scalar", _gmres_solve_least_squares, 1),
        ("tiled", make_gmres_solve_least_squares_kernel_tiled(tile), tile),
    ]:
        hd = wp.array(h.copy(), dtype=wp.float32, device=device)
        y = wp.zeros((batch, tile), dtype=wp.float32, device=device)
        bd = wp.array(beta, dtype=wp.float32, device=device)
        wp.launch(
            kernel,
            dim=(batch, threads),
            block_dim=threads if threads > 1 else None,
            inputs=[k, 1e-30, bd, hd, y],
            device=device,
        )
        got = y.numpy()[:, :k]
        err = max(float(np.max(np.abs(got[b] - want[b]) / (np.abs(want[b]) + 1e-3))) for b in range(batch))
        print(f"k={k} block={threads} {name}: largest relative error {err:.3g}")
        if name == "tiled":
            worst = err
    return worst


def main() -> int:
    wp.init()
    ks = [int(a) for a in sys.argv[1:]] or [8, 16, 32]
    bad = [k for k in ks if run(k, "cuda:0") > 1e-3]
    if bad:
        print(f"wrong tiled results for k = {bad}")
        return 1
    print("all right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
