// nvcc -arch=sm_90a -ptx tma_tile.cu -o tma_tile.ptx
// TMA tensor copies for runtime/tests/tma.rs. Every block copies one box,
// at the coordinates coords[5 * blockIdx.x ..], between the tensor described
// by the CUtensorMap and a 1024-byte-aligned shared tile:
// - tma_load_Nd: the tile is poisoned, loaded (cp.async.bulk.tensor.Nd ...
//   .tile.mbarrier::complete_tx::bytes, one thread arrives with expect_tx and
//   issues, all wait with try_wait.parity) and its first image_bytes (the
//   box rounded up to whole 128-byte lines, which swizzling permutes) are
//   dumped raw to out.
// - tma_load_2d_global / tma_load_2d_const: the same with the map in global
//   memory (a pointer parameter) and in a __constant__ variable.
// - tma_store_Nd: image_bytes of the tile are filled from in, then stored (op 0) or reduced
//   (op 1 add, 2 min, 3 max, 4 inc, 5 dec, 6 and, 7 or, 8 xor) into the
//   tensor by one thread, which commits and waits for the bulk group.
#include <cuda.h>

#define TILE_WORDS 4000

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

template <int R>
__device__ __forceinline__ void issue_load(unsigned dst, const void* map, unsigned bar, const int* c)
{
    if constexpr (R == 1)
        asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];"
                     :: "r"(dst), "l"(map), "r"(bar), "r"(c[0]) : "memory");
    if constexpr (R == 2)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
                     :: "r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1]) : "memory");
    if constexpr (R == 3)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
                     :: "r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
    if constexpr (R == 4)
        asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];"
                     :: "r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
    if constexpr (R == 5)
        asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
                     :: "r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]) : "memory");
}

template <int R>
__device__ __forceinline__ void load_box(const void* map, const int* coords, unsigned* out, unsigned box_bytes,
                                         unsigned image_bytes, unsigned* tile, unsigned long long* bar)
{
    int t = threadIdx.x;
    for (int k = t; k < TILE_WORDS; k += blockDim.x)
        tile[k] = 0xDEADBEEFu;
    unsigned b = smem_u32(bar);
    if (t == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(1) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (t == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(box_bytes) : "memory");
        issue_load<R>(smem_u32(tile), map, b, coords + 5 * blockIdx.x);
    }
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(b), "r"(0u) : "memory");
    }
    for (unsigned k = t; k < image_bytes / 4; k += blockDim.x)
        out[blockIdx.x * (image_bytes / 4) + k] = tile[k];
}

#define LOAD_KERNEL(NAME, R, MAPDECL, MAPEXPR)                                                                 \
    extern "C" __global__ void NAME(MAPDECL, const int* __restrict__ coords, unsigned* __restrict__ out,       \
                                    unsigned box_bytes, unsigned image_bytes)                                  \
    {                                                                                                          \
        __shared__ alignas(1024) unsigned tile[TILE_WORDS];                                                    \
        __shared__ alignas(8) unsigned long long bar;                                                          \
        load_box<R>(MAPEXPR, coords, out, box_bytes, image_bytes, tile, &bar);                                 \
    }

LOAD_KERNEL(tma_load_1d, 1, const __grid_constant__ CUtensorMap map, &map)
LOAD_KERNEL(tma_load_2d, 2, const __grid_constant__ CUtensorMap map, &map)
LOAD_KERNEL(tma_load_3d, 3, const __grid_constant__ CUtensorMap map, &map)
LOAD_KERNEL(tma_load_4d, 4, const __grid_constant__ CUtensorMap map, &map)
LOAD_KERNEL(tma_load_5d, 5, const __grid_constant__ CUtensorMap map, &map)
LOAD_KERNEL(tma_load_2d_global, 2, const CUtensorMap* __restrict__ map, map)

__constant__ CUtensorMap const_map;
LOAD_KERNEL(tma_load_2d_const, 2, int unused, &const_map)

#define STORE_OP(R, COORDS, OPNAME, ...)                                                                          \
    asm volatile("cp.reduce.async.bulk.tensor." #R "d.global.shared::cta." OPNAME ".tile.bulk_group [%0, " COORDS "], [%1];" \
                 :: "l"(map), "r"(src), __VA_ARGS__ : "memory")

template <int R>
__device__ __forceinline__ void issue_store(const void* map, unsigned src, const int* c, int op)
{
#define COORD_ARGS_1 "r"(c[0])
#define COORD_ARGS_2 "r"(c[0]), "r"(c[1])
#define COORD_ARGS_3 "r"(c[0]), "r"(c[1]), "r"(c[2])
#define COORD_ARGS_4 "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
#define COORD_ARGS_5 "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
#define ALL_OPS(R, COORDS, ARGS)                                                                                  \
    switch (op) {                                                                                                 \
    case 0:                                                                                                       \
        asm volatile("cp.async.bulk.tensor." #R "d.global.shared::cta.tile.bulk_group [%0, " COORDS "], [%1];"     \
                     :: "l"(map), "r"(src), ARGS : "memory");                                                     \
        break;                                                                                                    \
    case 1: STORE_OP(R, COORDS, "add", ARGS); break;                                                              \
    case 2: STORE_OP(R, COORDS, "min", ARGS); break;                                                              \
    case 3: STORE_OP(R, COORDS, "max", ARGS); break;                                                              \
    case 4: STORE_OP(R, COORDS, "inc", ARGS); break;                                                              \
    case 5: STORE_OP(R, COORDS, "dec", ARGS); break;                                                              \
    case 6: STORE_OP(R, COORDS, "and", ARGS); break;                                                              \
    case 7: STORE_OP(R, COORDS, "or", ARGS); break;                                                               \
    case 8: STORE_OP(R, COORDS, "xor", ARGS); break;                                                              \
    }
    if constexpr (R == 1) { ALL_OPS(1, "{%2}", COORD_ARGS_1) }
    if constexpr (R == 2) { ALL_OPS(2, "{%2, %3}", COORD_ARGS_2) }
    if constexpr (R == 3) { ALL_OPS(3, "{%2, %3, %4}", COORD_ARGS_3) }
    if constexpr (R == 4) { ALL_OPS(4, "{%2, %3, %4, %5}", COORD_ARGS_4) }
    if constexpr (R == 5) { ALL_OPS(5, "{%2, %3, %4, %5, %6}", COORD_ARGS_5) }
}

template <int R>
__device__ __forceinline__ void store_box(const void* map, const int* coords, const unsigned* in, unsigned image_bytes,
                                          int op, unsigned* tile)
{
    int t = threadIdx.x;
    for (unsigned k = t; k < image_bytes / 4; k += blockDim.x)
        tile[k] = in[blockIdx.x * (image_bytes / 4) + k];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (t == 0) {
        issue_store<R>(map, smem_u32(tile), coords + 5 * blockIdx.x, op);
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
    __syncthreads();
}

#define STORE_KERNEL(NAME, R)                                                                                  \
    extern "C" __global__ void NAME(const __grid_constant__ CUtensorMap map, const int* __restrict__ coords,    \
                                    const unsigned* __restrict__ in, unsigned image_bytes, int op)             \
    {                                                                                                          \
        __shared__ alignas(1024) unsigned tile[TILE_WORDS];                                                    \
        store_box<R>(&map, coords, in, image_bytes, op, tile);                                                 \
    }

STORE_KERNEL(tma_store_1d, 1)
STORE_KERNEL(tma_store_2d, 2)
STORE_KERNEL(tma_store_3d, 3)
STORE_KERNEL(tma_store_4d, 4)
STORE_KERNEL(tma_store_5d, 5)
