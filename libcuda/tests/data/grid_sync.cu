// Grid-wide synchronisation with cooperative groups: row r of m (rows x cols)
// is computed from row r-1 read backwards, so each thread reads what another
// block wrote before the previous grid.sync(). Launched with
// cuLaunchCooperativeKernel (libcuda/tests/cooperative.rs).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void grid_rows(int *m, int rows, int cols) {
    cg::grid_group g = cg::this_grid();
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 1; r < rows; ++r) {
        if (col < cols) {
            m[r * cols + col] = m[(r - 1) * cols + (cols - 1 - col)] * 3 + col;
        }
        g.sync();
    }
}
