// Mixed real-world patterns: stencil, histogram, softmax, grid-stride copy.
#include <cuda_fp16.h>

extern "C" __global__ void stencil_3d(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < 1 || y < 1 || z < 1 || x >= nx - 1 || y >= ny - 1 || z >= nz - 1) return;
    long idx = ((long)z * ny + y) * nx + x;
    out[idx] = 0.4f * in[idx] + 0.1f * (in[idx - 1] + in[idx + 1] + in[idx - nx] + in[idx + nx] + in[idx - (long)nx * ny] + in[idx + (long)nx * ny]);
}

extern "C" __global__ void softmax_row(const float* in, float* out, int cols) {
    __shared__ float red[32];
    const float* row = in + (long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float s = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    s = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) s += red[w];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[(long)blockIdx.x * cols + c] = __expf(row[c] - m) / s;
}

extern "C" __global__ void grid_stride_half(const __half* in, float* out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __half2float(in[i]) * 2.0f;
}

extern "C" __global__ void __launch_bounds__(128, 4) bounded(const int* in, int* out) {
    out[blockIdx.x * 128 + threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x] + 1;
}

__constant__ float coeffs[16];
__device__ int global_counter;
__device__ float global_table[4] = {1.0f, 2.0f, 3.0f, 4.0f};

extern "C" __global__ void const_and_globals(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0;
    for (int k = 0; k < 16; ++k) acc += coeffs[k] * in[(i + k) % n];
    out[i] = acc * global_table[i & 3];
    atomicAdd(&global_counter, 1);
}
