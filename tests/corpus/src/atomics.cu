// Atomics of every kind on global and shared memory.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void atomics_global(int* i32, unsigned* u32, unsigned long long* u64, float* f32,
                                          double* f64, const int* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    atomicAdd(&i32[0], v);
    atomicSub(&i32[1], v);
    atomicExch(&i32[2], v);
    atomicMin(&i32[3], v);
    atomicMax(&i32[4], v);
    atomicAnd(&i32[5], v);
    atomicOr(&i32[6], v);
    atomicXor(&i32[7], v);
    atomicInc(&u32[0], 100u);
    atomicDec(&u32[1], 100u);
    atomicCAS(&u32[2], (unsigned)v, (unsigned)i);
    atomicMin(&u32[3], (unsigned)v);
    atomicAdd(&u64[0], (unsigned long long)v);
    atomicCAS(&u64[1], 0ull, (unsigned long long)i);
    atomicMax(&u64[2], (unsigned long long)v);
    atomicAnd(&u64[3], (unsigned long long)v);
    atomicExch(&u64[4], (unsigned long long)i);
    atomicAdd(&f32[0], (float)v);
    atomicExch(&f32[1], (float)v);
    atomicAdd(&f64[0], (double)v);
    int old = atomicAdd_block(&i32[8], 1);
    atomicAdd_system(&i32[9], old);
    atomicMax_block(&i32[10], v);
    atomicOr_system(&u32[4], 1u << (i & 31));
}

extern "C" __global__ void atomics_shared(const int* in, int* out, float* fout, int n) {
    __shared__ int s[32];
    __shared__ float sf[32];
    __shared__ unsigned long long s64[4];
    if (threadIdx.x < 32) {
        s[threadIdx.x] = 0;
        sf[threadIdx.x] = 0.f;
    }
    if (threadIdx.x < 4) s64[threadIdx.x] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = in[i];
        atomicAdd(&s[v & 31], 1);
        atomicMax(&s[(v >> 5) & 31], v);
        atomicAdd(&sf[v & 31], 0.5f);
        atomicCAS(&s[3], 0, v);
        atomicAdd(&s64[v & 3], (unsigned long long)v);
        atomicExch(&s[4], v);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        atomicAdd(&out[threadIdx.x], s[threadIdx.x]);
        atomicAdd(&fout[threadIdx.x], sf[threadIdx.x]);
    }
    if (threadIdx.x < 4) atomicAdd((unsigned long long*)&out[32 + 2 * threadIdx.x], s64[threadIdx.x]);
}

extern "C" __global__ void atomics_half(__half* h, __half2* h2, __nv_bfloat16* b, __nv_bfloat162* b2, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
#if __CUDA_ARCH__ >= 700
    atomicAdd(&h[i & 7], __float2half(1.0f));
    atomicAdd(&h2[i & 7], __floats2half2_rn(1.0f, 2.0f));
#endif
#if __CUDA_ARCH__ >= 800
    atomicAdd(&b[i & 7], __float2bfloat16(1.0f));
    atomicAdd(&b2[i & 7], __floats2bfloat162_rn(1.0f, 2.0f));
#endif
}

extern "C" __global__ void atomic_float_cas(float* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    // A float max through compare-and-swap.
    float v = (float)i * 0.25f;
    int* addr = (int*)p;
    int old = *addr, assumed;
    do {
        assumed = old;
        old = atomicCAS(addr, assumed, __float_as_int(fmaxf(v, __int_as_float(assumed))));
    } while (assumed != old);
}
