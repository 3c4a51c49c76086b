// Asynchronous global-to-shared copies (cp.async on sm_80+, plain copies before).
#include <cuda_pipeline.h>

extern "C" __global__ void cp_async_tile(const float4* in, float4* out, int n) {
    __shared__ float4 tile[2][128];
    int base = blockIdx.x * 128 * 4;
    int stage = 0;
    if (base + (int)threadIdx.x < n) __pipeline_memcpy_async(&tile[0][threadIdx.x], &in[base + threadIdx.x], sizeof(float4));
    __pipeline_commit();
    for (int k = 1; k < 4; ++k) {
        int idx = base + k * 128 + threadIdx.x;
        if (idx < n) __pipeline_memcpy_async(&tile[k & 1][threadIdx.x], &in[idx], sizeof(float4));
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        float4 v = tile[stage][threadIdx.x];
        int o = base + (k - 1) * 128 + threadIdx.x;
        if (o < n) out[o] = make_float4(v.x * 2, v.y * 2, v.z * 2, v.w * 2);
        stage ^= 1;
        __syncthreads();
    }
    __pipeline_wait_prior(0);
    __syncthreads();
    int o = base + 3 * 128 + threadIdx.x;
    if (o < n) out[o] = tile[1][threadIdx.x];
}

extern "C" __global__ void cp_async_small(const int* in, int* out, int n) {
    __shared__ int s4[256];
    __shared__ long long s8[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __pipeline_memcpy_async(&s4[threadIdx.x], &in[i], 4);
        __pipeline_memcpy_async(&s8[threadIdx.x], (const long long*)in + i / 2, 8, 4);
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    if (i < n) out[i] = s4[255 - threadIdx.x] + (int)s8[threadIdx.x];
}

#if __CUDA_ARCH__ >= 800
extern "C" __global__ void cp_async_asm(const int4* in, int4* out) {
    __shared__ int4 s[64];
    unsigned saddr = (unsigned)__cvta_generic_to_shared(&s[threadIdx.x]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(in + threadIdx.x));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}
#endif
