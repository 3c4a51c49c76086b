// Cooperative groups: blocks, tiles, coalesced groups, reductions.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void cg_tiles(const int* in, int* out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    cg::thread_block_tile<8> tile8 = cg::tiled_partition<8>(block);
    int i = block.group_index().x * block.size() + block.thread_rank();
    int v = i < n ? in[i] : 0;
    int s = cg::reduce(warp, v, cg::plus<int>());
    int m = cg::reduce(tile8, v, cg::greater<int>());
    int x = warp.shfl_xor(v, 1) + tile8.shfl_down(v, 1);
    block.sync();
    if (i < n) out[i] = s + m + x + (int)warp.ballot(v > 3) + tile8.any(v == 2) + warp.meta_group_rank();
}

extern "C" __global__ void cg_coalesced(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && in[i] > 0) {
        cg::coalesced_group active = cg::coalesced_threads();
        int rank = active.thread_rank();
        int prev;
        if (rank == 0) prev = atomicAdd(out, (int)active.size());
        prev = active.shfl(prev, 0);
        out[1 + i] = prev + rank;
    }
}

extern "C" __global__ void cg_dynamic_partition(const float* in, float* out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_group tile = cg::tiled_partition(block, 4);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.f;
    tile.sync();
    if (i < n) out[i] = v * tile.thread_rank() + tile.size();
}
