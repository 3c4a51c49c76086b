// Conversions between every integer and floating-point type.
#include <cstdint>

extern "C" __global__ void convert_all(const float* f, const double* d, const long long* l, const int* s,
                                       int8_t* o8, uint16_t* o16, int* o32, unsigned long long* o64,
                                       float* of, double* od, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = f[i];
    double y = d[i];
    long long z = l[i];
    int w = s[i];
    o8[i] = (int8_t)w;
    o16[i] = (uint16_t)x;
    o32[4 * i + 0] = __float2int_rn(x);
    o32[4 * i + 1] = __float2int_rd(x) + __float2int_ru(x) + __float2int_rz(x);
    o32[4 * i + 2] = __double2int_rn(y) + (int)__double2uint_ru(y);
    o32[4 * i + 3] = (int)(short)w + (int)(unsigned char)z;
    o64[2 * i] = __float2ull_rz(x) + __double2ull_rd(y) + (unsigned long long)__float2ll_rn(x);
    o64[2 * i + 1] = (unsigned long long)z * (unsigned)w;
    of[4 * i + 0] = (float)z + (float)w + __int2float_rz(w) + __ll2float_ru(z);
    of[4 * i + 1] = __uint2float_rd((unsigned)w) + __ull2float_rn((unsigned long long)z);
    of[4 * i + 2] = __double2float_rz(y) + __double2float_ru(y) + (float)y;
    of[4 * i + 3] = __int_as_float(w) + __uint_as_float(__float_as_uint(x) & 0x7fffffff);
    od[2 * i] = (double)x + (double)z + (double)(unsigned)w + __ll2double_rz(z);
    od[2 * i + 1] = __ull2double_ru((unsigned long long)z) + __int2double_rn(w);
}

extern "C" __global__ void saturate(const float* f, unsigned char* u8, signed char* s8, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = f[i];
    u8[i] = (unsigned char)fminf(fmaxf(x, 0.0f), 255.0f);
    s8[i] = (signed char)max(-128, min(127, __float2int_rn(x)));
}
