// nvcc -arch=sm_90a -O3 -ptx tma_copy.cu -o tma_copy.ptx
// Copy throughput of the emulated copy engine against plain loads and
// stores (bench/src/tma.rs). Both kernels copy a 2-D f32 tensor box by box
// through shared memory, one 64 x 32 box (8 KiB) per block:
// - tma_copy: thread 0 loads the box with cp.async.bulk.tensor (mbarrier
//   completion), every thread waits, then thread 0 stores it with
//   cp.async.bulk.tensor into the output tensor;
// - ldst_copy: every thread loads its share of the box with ld.global into
//   shared memory, the block synchronises, and every thread stores its share.
#include <cuda.h>

#define BW 64
#define BH 32

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

extern "C" __global__ void tma_copy(const __grid_constant__ CUtensorMap in, const __grid_constant__ CUtensorMap out)
{
    __shared__ alignas(128) float tile[BW * BH];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    int x = blockIdx.x * BW, y = blockIdx.y * BH;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(1) : "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(BW * BH * 4) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(smem_u32(tile)), "l"(&in), "r"(x), "r"(y), "r"(b) : "memory");
    }
    __syncthreads();
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(b), "r"(0u) : "memory");
    }
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                     :: "l"(&out), "r"(x), "r"(y), "r"(smem_u32(tile)) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

extern "C" __global__ void ldst_copy(const float* __restrict__ in, float* __restrict__ out, int width)
{
    __shared__ alignas(128) float tile[BW * BH];
    int x = blockIdx.x * BW, y = blockIdx.y * BH;
    for (int k = threadIdx.x; k < BW * BH; k += blockDim.x)
        tile[k] = in[(size_t)(y + k / BW) * width + x + k % BW];
    __syncthreads();
    for (int k = threadIdx.x; k < BW * BH; k += blockDim.x)
        out[(size_t)(y + k / BW) * width + x + k % BW] = tile[k];
}
