// __nv_bfloat16 and __nv_bfloat162 arithmetic and conversions.
#include <cuda_bf16.h>

extern "C" __global__ void bf16_ops(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                                    __nv_bfloat16* out, float* fout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = a[i], y = b[i], z = c[i];
    out[6 * i + 0] = __hadd(x, y);
    out[6 * i + 1] = __hsub(x, y);
    out[6 * i + 2] = __hmul(x, y);
#if __CUDA_ARCH__ >= 800
    out[6 * i + 3] = __hfma(x, y, z);
#else
    out[6 * i + 3] = __float2bfloat16(fmaf(__bfloat162float(x), __bfloat162float(y), __bfloat162float(z)));
#endif
    out[6 * i + 4] = __hmax(x, y);
    out[6 * i + 5] = __hneg(__habs(z));
    fout[i] = __bfloat162float(x) + (__hlt(x, y) ? 1.f : 0.f) + __bfloat162float(__float2bfloat16_rz(fout[i]));
}

extern "C" __global__ void bf162_ops(const __nv_bfloat162* a, const __nv_bfloat162* b, __nv_bfloat162* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat162 x = a[i], y = b[i];
#if __CUDA_ARCH__ >= 800
    __nv_bfloat162 r = __hfma2(x, y, __hadd2(x, y));
#else
    __nv_bfloat162 r = __hadd2(x, y);
#endif
    r = __hmul2(r, __hsub2(x, y));
    r = __hmin2(r, x);
    out[i] = __floats2bfloat162_rn(__low2float(r) + 1.0f, __high2float(r) * 2.0f);
}
