// Static and dynamic shared memory, tiling, block-wide barriers.
#define TILE 16

extern "C" __global__ void transpose(const float* in, float* out, int w, int h) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < w && y < h) tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < h && y < w) out[y * h + x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void matmul_tiled(const float* a, const float* b, float* c, int n) {
    __shared__ float sa[TILE][TILE], sb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < (n + TILE - 1) / TILE; ++t) {
        int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
        sa[threadIdx.y][threadIdx.x] = (row < n && ka < n) ? a[row * n + ka] : 0.f;
        sb[threadIdx.y][threadIdx.x] = (col < n && kb < n) ? b[kb * n + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += sa[threadIdx.y][k] * sb[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) c[row * n + col] = acc;
}

extern "C" __global__ void dynamic_shared(const double* in, double* out, int n) {
    extern __shared__ double buf[];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? in[i] : 0.0;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}

extern "C" __global__ void barrier_counts(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = i < n && in[i] > 0;
    int c = __syncthreads_count(p);
    int a = __syncthreads_and(p);
    int o = __syncthreads_or(p);
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = c;
        out[3 * blockIdx.x + 1] = a;
        out[3 * blockIdx.x + 2] = o;
    }
}

__shared__ int module_shared[64];

extern "C" __global__ void module_scope_shared(int* out) {
    module_shared[threadIdx.x & 63] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = module_shared[(threadIdx.x + 1) & 63];
}
