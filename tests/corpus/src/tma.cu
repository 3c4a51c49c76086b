// Hopper bulk and tensor copies with mbarriers (sm_90+), through inline PTX.
#include <cstdint>

#if __CUDA_ARCH__ >= 900
struct alignas(64) TensorMap {
    unsigned char bytes[128];
};

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
    unsigned a = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
    unsigned a = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(bytes));
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned phase) {
    unsigned a = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT;\n"
        "}\n" ::"r"(a),
        "r"(phase));
}

extern "C" __global__ void bulk_copy(const float* in, float* out, int n) {
    __shared__ alignas(128) float buf[1024];
    __shared__ uint64_t bar;
    if (threadIdx.x == 0) {
        mbar_init(&bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(&bar, sizeof(buf));
        unsigned s = (unsigned)__cvta_generic_to_shared(buf);
        unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(s),
                     "l"(in + blockIdx.x * 1024), "r"((unsigned)sizeof(buf)), "r"(b)
                     : "memory");
    }
    mbar_wait(&bar, 0);
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) buf[i] *= 2.0f;
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned s = (unsigned)__cvta_generic_to_shared(buf);
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out + blockIdx.x * 1024), "r"(s),
                     "r"((unsigned)sizeof(buf))
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read 0;");
    }
}

extern "C" __global__ void tensor_copy_2d(const __grid_constant__ TensorMap map_in, const __grid_constant__ TensorMap map_out) {
    __shared__ alignas(128) float tile[32 * 32];
    __shared__ uint64_t bar;
    int x = blockIdx.x * 32, y = blockIdx.y * 32;
    if (threadIdx.x == 0) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(&map_in) : "memory");
        mbar_init(&bar, 1);
        asm volatile("fence.proxy.async.shared::cta;");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(&bar, sizeof(tile));
        unsigned s = (unsigned)__cvta_generic_to_shared(tile);
        unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(s),
            "l"(&map_in), "r"(x), "r"(y), "r"(b)
            : "memory");
    }
    mbar_wait(&bar, 0);
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) tile[i] += 1.0f;
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned s = (unsigned)__cvta_generic_to_shared(tile);
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(&map_out), "r"(x),
                     "r"(y), "r"(s)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group 0;");
    }
}
#else
extern "C" __global__ void tma_unsupported(int* out) { out[threadIdx.x] = -1; }
#endif
