// nvcc -ptx -arch=sm_80 -O3 shared_stencil.cu -o shared_stencil.ptx
// The cost of shared memory beyond the device's Workgroup memory
// (`ptxvk-bench shared`): each block stages TILE floats (and a halo) in
// dynamic shared memory at word `pad`, then applies a 5-point stencil
// PASSES times, ping-ponging between two shared buffers with a barrier per
// pass. With `pad` past the device's Workgroup memory every shared access
// goes to the block's spill area in device memory.
#define TILE 1024
#define HALO 2
#define PASSES 16

extern "C" __global__ void stencil(const float* in, float* out, int n, int pad) {
    extern __shared__ float smem[];
    float* a = smem + pad;
    float* b = a + TILE + 2 * HALO;
    int base = blockIdx.x * TILE;
    for (int i = threadIdx.x; i < TILE + 2 * HALO; i += blockDim.x) {
        int g = base + i - HALO;
        a[i] = (g >= 0 && g < n) ? in[g] : 0.0f;
        b[i] = a[i];
    }
    __syncthreads();
    for (int p = 0; p < PASSES; p++) {
        for (int i = threadIdx.x + HALO; i < TILE + HALO; i += blockDim.x)
            b[i] = 0.1f * a[i - 2] + 0.2f * a[i - 1] + 0.4f * a[i] + 0.2f * a[i + 1] + 0.1f * a[i + 2];
        __syncthreads();
        float* t = a;
        a = b;
        b = t;
    }
    for (int i = threadIdx.x; i < TILE; i += blockDim.x)
        if (base + i < n) out[base + i] = a[i + HALO];
}
