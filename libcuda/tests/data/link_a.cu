// Kernel half of the linking test (libcuda/tests/clients/c/modules_memory.c):
// calls combine(), defined in link_b.cu, so the two PTX files must be linked.
extern __device__ float combine(float a, float b);

__constant__ float coeffs[3];
__device__ unsigned int hits;

extern "C" __global__ void stencil(const float *in, float *out, int n) {
    extern __shared__ float tile[];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    tile[t + 1] = i < n ? in[i] : 0.0f;
    if (t == 0) tile[0] = (i > 0 && i - 1 < n) ? in[i - 1] : 0.0f;
    if (t == blockDim.x - 1) tile[blockDim.x + 1] = i + 1 < n ? in[i + 1] : 0.0f;
    __syncthreads();
    if (i < n) {
        out[i] = combine(coeffs[0] * tile[t] + coeffs[1] * tile[t + 1], coeffs[2] * tile[t + 2]);
        atomicAdd(&hits, 1u);
    }
}
