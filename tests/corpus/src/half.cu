// __half and __half2 arithmetic, comparisons and conversions.
#include <cuda_fp16.h>

extern "C" __global__ void half_ops(const __half* a, const __half* b, const __half* c, __half* out, float* fout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half x = a[i], y = b[i], z = c[i];
    out[8 * i + 0] = __hadd(x, y);
    out[8 * i + 1] = __hsub(x, y);
    out[8 * i + 2] = __hmul(x, y);
    out[8 * i + 3] = __hfma(x, y, z);
    out[8 * i + 4] = __hdiv(x, y);
    out[8 * i + 5] = __hneg(__habs(x));
    out[8 * i + 6] = __hmax(x, y) + __hmin(y, z);
    out[8 * i + 7] = __hadd_sat(x, z) + __hfma_sat(x, y, z) + hsqrt(__habs(x)) + hrcp(y);
    fout[2 * i] = __half2float(x) + (__hlt(x, y) ? 1.f : 0.f) + (__hgeu(y, z) ? 2.f : 0.f) + (__hisnan(z) ? 4.f : 0.f);
    fout[2 * i + 1] = (float)__half2int_rn(x) + (float)__half2uint_rz(y) + __half2float(__float2half_rz(fout[2 * i]));
}

extern "C" __global__ void half2_ops(const __half2* a, const __half2* b, __half2* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half2 x = a[i], y = b[i];
    __half2 r = __hadd2(x, y);
    r = __hfma2(r, x, y);
    r = __hmul2(r, __hsub2(x, y));
    r = __hmax2(r, __hneg2(x));
    r = __hadd2(r, __halves2half2(__low2half(x), __high2half(y)));
    r = __hadd2(r, __hle2(x, y));
    r = __h2div(r, __float2half2_rn(3.0f));
    out[i] = h2exp(r);
}

extern "C" __global__ void half_convert(const float* f, const double* d, const int* s, __half* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[4 * i + 0] = __float2half(f[i]);
    out[4 * i + 1] = __double2half(d[i]);
    out[4 * i + 2] = __int2half_rn(s[i]) ;
    out[4 * i + 3] = __ushort_as_half(__half_as_ushort(__float2half_ru(f[i])) ^ 0x8000);
}
