// nvcc -arch=sm_100a -ptx tma_modes.cu -o tma_modes.ptx
// TMA copy modes beyond .tile, for runtime/tests/tma.rs. Each block copies
// at the coordinates coords[5 * blockIdx.x ..] (and, for im2col, the
// offsets offs[3 * blockIdx.x ..]); the shared tile (1024-byte aligned) is
// poisoned first and its first image_bytes are dumped to out:
// - tma_im2col_Nd: cp.async.bulk.tensor.Nd ... .im2col with im2col offsets;
// - tma_gather4: cp.async.bulk.tensor.2d ... .tile::gather4 (four rows);
// - tma_scatter4: the four rows of in written back with .tile::scatter4;
// - tma_im2col_store_4d: image_bytes of in written back with .im2col_no_offs;
// - tma_im2col_w_Nd, tma_im2col_w128_Nd: .im2col::w and .im2col::w::128 loads
//   with {wHalo, wOffset} = {offs[3 * blockIdx.x], offs[3 * blockIdx.x + 1]}.
#include <cuda.h>

#define TILE_WORDS 4000

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void prologue(unsigned* tile, unsigned b)
{
    for (int k = threadIdx.x; k < TILE_WORDS; k += blockDim.x)
        tile[k] = 0xDEADBEEFu;
    if (threadIdx.x == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(1) : "memory");
    __syncthreads();
}

__device__ __forceinline__ void epilogue(const unsigned* tile, unsigned b, unsigned* out, unsigned image_bytes)
{
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(b), "r"(0u) : "memory");
    }
    for (unsigned k = threadIdx.x; k < image_bytes / 4; k += blockDim.x)
        out[blockIdx.x * (image_bytes / 4) + k] = tile[k];
}

#define EXPECT(b, bytes) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory")

extern "C" __global__ void tma_im2col_3d(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords,
                                         const unsigned* __restrict__ offs, unsigned* __restrict__ out,
                                         unsigned box_bytes, unsigned image_bytes)
{
    __shared__ alignas(1024) unsigned tile[TILE_WORDS];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    prologue(tile, b);
    if (threadIdx.x == 0) {
        const int* c = coords + 5 * blockIdx.x;
        const unsigned* o = offs + 3 * blockIdx.x;
        EXPECT(b, box_bytes);
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%3, %4, %5}], [%2], {%6};"
                     :: "r"(smem_u32(tile)), "l"(&map), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]),
                        "h"((unsigned short)o[0]) : "memory");
    }
    epilogue(tile, b, out, image_bytes);
}

extern "C" __global__ void tma_im2col_4d(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords,
                                         const unsigned* __restrict__ offs, unsigned* __restrict__ out,
                                         unsigned box_bytes, unsigned image_bytes)
{
    __shared__ alignas(1024) unsigned tile[TILE_WORDS];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    prologue(tile, b);
    if (threadIdx.x == 0) {
        const int* c = coords + 5 * blockIdx.x;
        const unsigned* o = offs + 3 * blockIdx.x;
        EXPECT(b, box_bytes);
        asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};"
                     :: "r"(smem_u32(tile)), "l"(&map), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]),
                        "h"((unsigned short)o[0]), "h"((unsigned short)o[1]) : "memory");
    }
    epilogue(tile, b, out, image_bytes);
}

extern "C" __global__ void tma_im2col_5d(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords,
                                         const unsigned* __restrict__ offs, unsigned* __restrict__ out,
                                         unsigned box_bytes, unsigned image_bytes)
{
    __shared__ alignas(1024) unsigned tile[TILE_WORDS];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    prologue(tile, b);
    if (threadIdx.x == 0) {
        const int* c = coords + 5 * blockIdx.x;
        const unsigned* o = offs + 3 * blockIdx.x;
        EXPECT(b, box_bytes);
        asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%3, %4, %5, %6, %7}], [%2], {%8, %9, %10};"
                     :: "r"(smem_u32(tile)), "l"(&map), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]),
                        "r"(c[4]), "h"((unsigned short)o[0]), "h"((unsigned short)o[1]),
                        "h"((unsigned short)o[2]) : "memory");
    }
    epilogue(tile, b, out, image_bytes);
}

extern "C" __global__ void tma_gather4(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords,
                                       const unsigned* __restrict__ unused, unsigned* __restrict__ out,
                                       unsigned box_bytes, unsigned image_bytes)
{
    __shared__ alignas(1024) unsigned tile[TILE_WORDS];
    __shared__ alignas(8) unsigned long long bar;
    unsigned b = smem_u32(&bar);
    prologue(tile, b);
    if (threadIdx.x == 0) {
        const int* c = coords + 5 * blockIdx.x;
        EXPECT(b, box_bytes);
        asm volatile("cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
                     :: "r"(smem_u32(tile)), "l"(&map), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]),
                        "r"(c[4]) : "memory");
    }
    epilogue(tile, b, out, image_bytes);
}

extern "C" __global__ void tma_scatter4(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords,
                                        const unsigned* __restrict__ in, unsigned image_bytes)
{
    __shared__ alignas(1024) unsigned tile[TILE_WORDS];
    for (unsigned k = threadIdx.x; k < image_bytes / 4; k += blockDim.x)
        tile[k] = in[blockIdx.x * (image_bytes / 4) + k];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        const int* c = coords + 5 * blockIdx.x;
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];"
                     :: "l"(&map), "r"(smem_u32(tile)), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
    __syncthreads();
}

extern "C" __global__ void tma_im2col_store_4d(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords,
                                               const unsigned* __restrict__ in, unsigned image_bytes)
{
    __shared__ alignas(1024) unsigned tile[TILE_WORDS];
    for (unsigned k = threadIdx.x; k < image_bytes / 4; k += blockDim.x)
        tile[k] = in[blockIdx.x * (image_bytes / 4) + k];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        const int* c = coords + 5 * blockIdx.x;
        asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.im2col_no_offs.bulk_group [%0, {%2, %3, %4, %5}], [%1];"
                     :: "l"(&map), "r"(smem_u32(tile)), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
    __syncthreads();
}

#define IM2COL_W(name, mode, dim, coords, args)                                                                  \
    extern "C" __global__ void name(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords_in,  \
                                    const unsigned* __restrict__ offs, unsigned* __restrict__ out,              \
                                    unsigned box_bytes, unsigned image_bytes)                                   \
    {                                                                                                           \
        __shared__ alignas(1024) unsigned tile[TILE_WORDS];                                                     \
        __shared__ alignas(8) unsigned long long bar;                                                           \
        unsigned b = smem_u32(&bar);                                                                            \
        prologue(tile, b);                                                                                      \
        if (threadIdx.x == 0) {                                                                                 \
            const int* c = coords_in + 5 * blockIdx.x;                                                          \
            const unsigned* o = offs + 3 * blockIdx.x;                                                          \
            unsigned short halo = (unsigned short)o[0], woff = (unsigned short)o[1];                            \
            EXPECT(b, box_bytes);                                                                               \
            asm volatile("cp.async.bulk.tensor." dim ".shared::cluster.global." mode                            \
                         ".mbarrier::complete_tx::bytes [%0], [%1, " coords "], [%2], {%3, %4};"                \
                         :: "r"(smem_u32(tile)), "l"(&map), "r"(b), "h"(halo), "h"(woff), args : "memory");     \
        }                                                                                                       \
        epilogue(tile, b, out, image_bytes);                                                                    \
    }

#define ARGS3 "r"(c[0]), "r"(c[1]), "r"(c[2])
#define ARGS4 ARGS3, "r"(c[3])
#define ARGS5 ARGS4, "r"(c[4])
IM2COL_W(tma_im2col_w_3d, "im2col::w", "3d", "{%5, %6, %7}", ARGS3)
IM2COL_W(tma_im2col_w_4d, "im2col::w", "4d", "{%5, %6, %7, %8}", ARGS4)
IM2COL_W(tma_im2col_w_5d, "im2col::w", "5d", "{%5, %6, %7, %8, %9}", ARGS5)
IM2COL_W(tma_im2col_w128_3d, "im2col::w::128", "3d", "{%5, %6, %7}", ARGS3)
IM2COL_W(tma_im2col_w128_4d, "im2col::w::128", "4d", "{%5, %6, %7, %8}", ARGS4)
IM2COL_W(tma_im2col_w128_5d, "im2col::w::128", "5d", "{%5, %6, %7, %8, %9}", ARGS5)
