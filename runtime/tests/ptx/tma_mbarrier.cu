// nvcc -arch=sm_90a -ptx tma_mbarrier.cu -o tma_mbarrier.ptx
// mbarrier phases, bulk (non-tensor) copies and a two-stage TMA pipeline,
// for runtime/tests/tma.rs.
#include <cuda.h>

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ unsigned long long arrive(unsigned b, unsigned count)
{
    unsigned long long s;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], %2;" : "=l"(s) : "r"(b), "r"(count) : "memory");
    return s;
}

__device__ __forceinline__ unsigned test_state(unsigned b, unsigned long long s)
{
    unsigned r;
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(r) : "r"(b), "l"(s) : "memory");
    return r;
}

__device__ __forceinline__ unsigned try_state(unsigned b, unsigned long long s)
{
    unsigned r;
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.shared::cta.b64 p, [%1], %2, 1000;\n\tselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(r) : "r"(b), "l"(s) : "memory");
    return r;
}

__device__ __forceinline__ unsigned test_parity(unsigned b, unsigned parity)
{
    unsigned r;
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(r) : "r"(b), "r"(parity) : "memory");
    return r;
}

__device__ __forceinline__ unsigned try_parity(unsigned b, unsigned parity)
{
    unsigned r;
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(r) : "r"(b), "r"(parity) : "memory");
    return r;
}

__device__ __forceinline__ unsigned pending(unsigned long long s)
{
    unsigned c;
    asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(c) : "l"(s));
    return c;
}

// One thread walks an mbarrier through four phases, recording what the
// waits and pending counts say at each step (out[0..15]).
extern "C" __global__ void mbarrier_single(unsigned* out)
{
    __shared__ alignas(8) unsigned long long bar;
    if (threadIdx.x != 0)
        return;
    unsigned b = smem_u32(&bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(3) : "memory");
    // Phase 0 (parity 0): three arrivals.
    unsigned long long s1 = arrive(b, 1);
    out[0] = test_state(b, s1);          // 0: two arrivals missing
    out[1] = pending(s1);                // 3: the count before this arrival
    unsigned long long s2 = arrive(b, 2);
    out[2] = test_state(b, s2);          // 1
    out[3] = try_state(b, s1);           // 1
    out[4] = try_parity(b, 0);           // 1: phase 0 is complete
    out[5] = test_parity(b, 1);          // 0: phase 1 is not
    // Phase 1 (parity 1): arrivals plus 64 transaction bytes.
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(64) : "memory");
    unsigned long long s3 = arrive(b, 3);
    out[6] = test_state(b, s3);          // 0: 64 bytes outstanding
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(32) : "memory");
    out[7] = test_parity(b, 1);          // 0: 32 bytes outstanding
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(32) : "memory");
    out[8] = test_parity(b, 1);          // 1
    // Phase 2 (parity 0): arrive with expect_tx, one arrival without
    // completion, one arrival that also drops an expected arrival.
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(16) : "memory");
    unsigned long long s4;
    asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 %0, [%1], %2;" : "=l"(s4) : "r"(b), "r"(1) : "memory");
    out[9] = pending(s4);                // 2
    asm volatile("mbarrier.arrive_drop.shared::cta.b64 _, [%0];" :: "r"(b) : "memory");
    out[10] = test_parity(b, 0);         // 0: 16 bytes outstanding
    out[11] = test_parity(b, 1);         // 1: phase 1 stays complete
    asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(16) : "memory");
    out[12] = test_parity(b, 0);         // 1
    // Phase 3 (parity 1): the drop left two expected arrivals.
    unsigned long long s5 = arrive(b, 1);
    out[13] = pending(s5);               // 2
    arrive(b, 1);
    out[14] = test_parity(b, 1);         // 1
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(b) : "memory");
    out[15] = 0xC0FFEEu;
}

// Every thread arrives on each of `phases` phases; after __syncthreads the
// phase must be complete for everyone (out[tid] counts the completed phases).
extern "C" __global__ void mbarrier_all(unsigned* out, int phases)
{
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    if (threadIdx.x == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(blockDim.x) : "memory");
    __syncthreads();
    unsigned count = 0;
    for (int p = 0; p < phases; p++) {
        unsigned long long s = arrive(b, 1);
        __syncthreads();
        count += try_state(b, s);
        count += try_parity(b, p & 1);
        count += 1 - test_parity(b, (p + 1) & 1);
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = count;
}

// Ampere cp.async completing on an mbarrier: every thread copies 16 bytes
// with cp.async and arrives with cp.async.mbarrier.arrive.noinc.
extern "C" __global__ void mbarrier_cp_async(const uint4* __restrict__ in, uint4* __restrict__ out)
{
    __shared__ alignas(16) uint4 buf[256];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    int t = threadIdx.x;
    if (t == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(blockDim.x) : "memory");
    __syncthreads();
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem_u32(&buf[t])), "l"(in + blockIdx.x * blockDim.x + t)
                 : "memory");
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(b) : "memory");
    __syncthreads();
    while (!try_parity(b, 0)) {
    }
    out[blockIdx.x * blockDim.x + t] = buf[(t + 1) % blockDim.x];
}

// Bulk copies: global -> shared on an mbarrier, shared -> global in a bulk
// group, and a bulk add-reduction of every block's data into sum.
extern "C" __global__ void bulk_copy(const unsigned* __restrict__ src, unsigned* __restrict__ dst,
                                     unsigned* __restrict__ sum, unsigned bytes)
{
    __shared__ alignas(128) unsigned buf[2048];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    int t = threadIdx.x;
    unsigned words = bytes / 4;
    for (int k = t; k < 2048; k += blockDim.x)
        buf[k] = 0xDEADBEEFu;
    if (t == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(1) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (t == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(smem_u32(buf)), "l"(src + blockIdx.x * words), "r"(bytes), "r"(b) : "memory");
    }
    while (!try_parity(b, 0)) {
    }
    __syncthreads();
    for (unsigned k = t; k < words; k += blockDim.x)
        buf[k] = buf[k] * 3u + (unsigned)blockIdx.x;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (t == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     :: "l"(dst + blockIdx.x * words), "r"(smem_u32(buf)), "r"(bytes) : "memory");
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%0], [%1], %2;"
                     :: "l"(sum), "r"(smem_u32(buf)), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

// A two-stage TMA pipeline: for k = 0..ktiles-1 thread 0 loads the 32x8 f32
// box at (x0, 8k) into stage k % 2 (mbarrier full[k % 2], phase parity
// (k / 2) % 2); every thread waits, adds its elements into its accumulator,
// and the block synchronises before the stage is reused. out = the sum over
// k of the boxes (a column of tiles), one 32x8 result per block.
extern "C" __global__ void tma_pipeline(const __grid_constant__ CUtensorMap map, float* __restrict__ out, int ktiles)
{
    __shared__ alignas(128) float stage[2][8][32];
    __shared__ alignas(8) unsigned long long full[2];
    int t = threadIdx.x;
    unsigned f0 = smem_u32(&full[0]), f1 = smem_u32(&full[1]);
    if (t == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(f0), "r"(1) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(f1), "r"(1) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    float acc0 = 0.0f, acc1 = 0.0f;
    int x0 = blockIdx.x * 32;
    for (int k = 0; k < ktiles; k++) {
        int s = k & 1;
        unsigned fb = s ? f1 : f0;
        if (t == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(fb), "r"(1024) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                         " [%0], [%1, {%3, %4}], [%2];"
                         :: "r"(smem_u32(&stage[s][0][0])), "l"(&map), "r"(fb), "r"(x0), "r"(8 * k) : "memory");
        }
        while (!try_parity(fb, (k >> 1) & 1)) {
        }
        acc0 += stage[s][t / 32][t % 32];
        acc1 += stage[s][4 + t / 32][t % 32];
        __syncthreads();
    }
    out[blockIdx.x * 256 + t] = acc0;
    out[blockIdx.x * 256 + 128 + t] = acc1;
}

// cp.reduce.async.bulk into shared memory (.shared::cluster, this CTA): block
// k reduces src[k * words ..] into a shared copy of init[k * words ..] with
// case k of the table below, completing on an mbarrier, and writes the
// result to out[k * words ..]. Cases: 0 add.u32, 1 min.u32, 2 max.u32,
// 3 inc.u32, 4 dec.u32, 5 add.s32, 6 min.s32, 7 max.s32, 8 and.b32,
// 9 or.b32, 10 xor.b32, 11 add.u64 (the only 64-bit reduction into shared
// memory that ptxas accepts).
#define RED_SHARED(op)                                                                                           \
    asm volatile("cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes." op             \
                 " [%0], [%1], %2, [%3];" :: "r"(d), "r"(s), "r"(bytes), "r"(b) : "memory")

extern "C" __global__ void bulk_reduce_shared(const unsigned* __restrict__ init, const unsigned* __restrict__ src,
                                              unsigned* __restrict__ out, unsigned bytes)
{
    __shared__ alignas(128) unsigned acc[1024];
    __shared__ alignas(128) unsigned in[1024];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    int t = threadIdx.x;
    unsigned words = bytes / 4;
    for (unsigned k = t; k < words; k += blockDim.x) {
        acc[k] = init[blockIdx.x * words + k];
        in[k] = src[blockIdx.x * words + k];
    }
    if (t == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(1) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (t == 0) {
        unsigned d = smem_u32(acc), s = smem_u32(in);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
        switch (blockIdx.x) {
        case 0: RED_SHARED("add.u32"); break;
        case 1: RED_SHARED("min.u32"); break;
        case 2: RED_SHARED("max.u32"); break;
        case 3: RED_SHARED("inc.u32"); break;
        case 4: RED_SHARED("dec.u32"); break;
        case 5: RED_SHARED("add.s32"); break;
        case 6: RED_SHARED("min.s32"); break;
        case 7: RED_SHARED("max.s32"); break;
        case 8: RED_SHARED("and.b32"); break;
        case 9: RED_SHARED("or.b32"); break;
        case 10: RED_SHARED("xor.b32"); break;
        default: RED_SHARED("add.u64"); break;
        }
    }
    while (!try_parity(b, 0)) {
    }
    __syncthreads();
    for (unsigned k = t; k < words; k += blockDim.x)
        out[blockIdx.x * words + k] = acc[k];
}
