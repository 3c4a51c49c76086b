// Single precision arithmetic, rounding modes and fast intrinsics.
extern "C" __global__ void f32_basic(const float* a, const float* b, const float* c, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i], z = c[i];
    out[16 * i + 0] = x + y * z;
    out[16 * i + 1] = fmaf(x, y, z);
    out[16 * i + 2] = x / y;
    out[16 * i + 3] = sqrtf(fabsf(x));
    out[16 * i + 4] = rsqrtf(fabsf(y) + 1.0f);
    out[16 * i + 5] = fminf(x, y) + fmaxf(y, z);
    out[16 * i + 6] = copysignf(x, y);
    out[16 * i + 7] = floorf(x) + ceilf(y) + truncf(z) + rintf(x) + roundf(y);
    out[16 * i + 8] = __fadd_rn(x, y) + __fadd_rz(x, y) + __fadd_ru(x, y) + __fadd_rd(x, y);
    out[16 * i + 9] = __fmul_rn(x, y) + __fmul_rz(x, y) + __fmul_ru(y, z) + __fmul_rd(y, z);
    out[16 * i + 10] = __fdiv_rn(x, y) + __fdiv_rz(x, y) + __frcp_rn(y) + __fsqrt_rn(fabsf(z));
    out[16 * i + 11] = __fmaf_rn(x, y, z) + __fmaf_rz(x, y, z) + __fmaf_ru(x, y, z) + __fmaf_rd(x, y, z);
    out[16 * i + 12] = __sinf(x) + __cosf(y) + __expf(z) + __logf(fabsf(x) + 1.0f);
    out[16 * i + 13] = __fdividef(x, y) + __saturatef(z) + exp2f(x) + __log2f(fabsf(y) + 2.0f);
    out[16 * i + 14] = isnan(x) ? 1.0f : (isinf(y) ? 2.0f : (signbit(z) ? 3.0f : 4.0f));
    out[16 * i + 15] = fdimf(x, y) + __fsub_rn(x, z) + __fsub_ru(x, z);
}

extern "C" __global__ void f32_compare(const float* a, const float* b, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    int r = 0;
    r |= (x < y) << 0;
    r |= (x <= y) << 1;
    r |= (x > y) << 2;
    r |= (x >= y) << 3;
    r |= (x == y) << 4;
    r |= (x != y) << 5;
    r |= (!(x < y)) << 6;
    r |= isfinite(x) << 7;
    out[i] = r;
}
