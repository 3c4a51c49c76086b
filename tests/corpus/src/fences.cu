// Memory fences, acquire/release atomics via libcu++ atomic_ref, scopes.
#include <cuda/atomic>

extern "C" __global__ void fences(int* data, int* flag) {
    data[threadIdx.x] = threadIdx.x;
    __threadfence_block();
    __threadfence();
    __threadfence_system();
    if (threadIdx.x == 0) atomicExch(flag, 1);
}

extern "C" __global__ void acquire_release(int* data, int* flag, int* out) {
    cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
    cuda::atomic_ref<int, cuda::thread_scope_block> d(data[threadIdx.x & 31]);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        data[100] = 7;
        f.store(1, cuda::memory_order_release);
    } else if (threadIdx.x == 0) {
        int spins = 0;
        while (f.load(cuda::memory_order_acquire) == 0 && ++spins < 100) {}
        out[blockIdx.x] = data[100] + spins;
    }
    d.fetch_add(1, cuda::memory_order_relaxed);
    int old = d.exchange(5, cuda::memory_order_acq_rel);
    int expected = 5;
    d.compare_exchange_strong(expected, old, cuda::memory_order_seq_cst);
    cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);
}

extern "C" __global__ void system_atomics(unsigned long long* p) {
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> a(*p);
    a.fetch_or(1ull << (threadIdx.x & 63), cuda::memory_order_relaxed);
    a.fetch_max(threadIdx.x, cuda::memory_order_release);
}
