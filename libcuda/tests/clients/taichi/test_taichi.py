"""Taichi 1.7.4's CUDA backend on ptxvk's libcuda.so.1 (run.sh).

Taichi's sparse data structures allocate their cells on the device: the
lanes of a warp that activate cells elect one lane per cell (match.any),
and the elected lanes take the node allocator's lock with an atom.exch spin
loop. That needs forward progress for the diverged lanes of a warp (issue
21, translator/src/progress.rs); before it, every test here failed with
CUDA_ERROR_LAUNCH_FAILED at lavapipe's loop limit. Random inputs with fixed
seeds, checked against numpy.
"""
import pytest

# Collected by the main client run too (libcuda/tests/clients/run.sh), whose
# venv has no Taichi: skip there.
np = pytest.importorskip("numpy")
ti = pytest.importorskip("taichi")


@pytest.fixture()
def cuda():
    ti.init(arch=ti.cuda, offline_cache=False, random_seed=1)
    assert ti.lang.impl.current_cfg().arch == ti.cuda, "Taichi fell back from CUDA"
    yield
    ti.reset()


def test_pointer_snode_activation_from_many_lanes(cuda):
    n = 8192
    x = ti.field(ti.i32)
    ti.root.pointer(ti.i, n // 8).dense(ti.i, 8).place(x)
    rng = np.random.default_rng(5)
    values = rng.integers(-(2**20), 2**20, size=n, dtype=np.int32)
    keep = rng.random(n) < 0.6

    @ti.kernel
    def fill(v: ti.types.ndarray(), k: ti.types.ndarray()):
        for i in range(n):
            if k[i]:
                x[i] = v[i]

    @ti.kernel
    def active_blocks() -> ti.i32:
        c = 0
        for b in range(n // 8):
            if ti.is_active(x.parent(2), [b]):
                c += 1
        return c

    @ti.kernel
    def total() -> ti.i64:
        s = ti.i64(0)
        for i in x:  # a struct-for over the active cells only
            s += x[i]
        return s

    fill(values, keep.astype(np.int32))
    want = np.where(keep, values, 0)
    np.testing.assert_array_equal(x.to_numpy(), want)
    blocks = keep.reshape(-1, 8).any(axis=1)
    assert active_blocks() == int(blocks.sum())
    assert total() == int(want.astype(np.int64).sum())


def test_dynamic_snode_append_from_many_threads(cuda):
    lists, n = 16, 20000
    x = ti.field(ti.i32)
    ti.root.dense(ti.i, lists).dynamic(ti.j, 4096, chunk_size=32).place(x)
    keys = np.random.default_rng(9).integers(0, lists, size=n, dtype=np.int32)

    @ti.kernel
    def scatter(k: ti.types.ndarray()):
        for i in range(n):
            ti.append(x.parent(), k[i], i)

    @ti.kernel
    def length(l: ti.i32) -> ti.i32:
        return ti.length(x.parent(), l)

    scatter(keys)
    got = x.to_numpy()
    for l in range(lists):
        want = np.flatnonzero(keys == l)
        assert length(l) == len(want), f"list {l}"
        np.testing.assert_array_equal(np.sort(got[l, : len(want)]), want, err_msg=f"list {l}")


def test_nested_pointers_deactivate_and_reactivate(cuda):
    n = 4096
    x = ti.field(ti.f32)
    ti.root.pointer(ti.i, n // 256).pointer(ti.i, 8).dense(ti.i, 32).place(x)
    rng = np.random.default_rng(13)
    a = rng.standard_normal(n).astype(np.float32)
    first = rng.random(n) < 0.3
    second = rng.random(n) < 0.3

    @ti.kernel
    def scatter(v: ti.types.ndarray(), k: ti.types.ndarray()):
        for i in range(n):
            if k[i]:
                x[i] = v[i] * 2.0

    @ti.kernel
    def clear():
        for i in x:
            ti.deactivate(x.parent(2), [i])

    scatter(a, first.astype(np.int32))
    np.testing.assert_array_equal(x.to_numpy(), np.where(first, a * 2, 0).astype(np.float32))
    clear()
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(n, np.float32))
    scatter(a, second.astype(np.int32))
    np.testing.assert_array_equal(x.to_numpy(), np.where(second, a * 2, 0).astype(np.float32))
