// Double precision arithmetic and rounding-mode intrinsics.
extern "C" __global__ void f64_basic(const double* a, const double* b, const double* c, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i], z = c[i];
    out[12 * i + 0] = x + y * z;
    out[12 * i + 1] = fma(x, y, z);
    out[12 * i + 2] = x / y;
    out[12 * i + 3] = sqrt(fabs(x));
    out[12 * i + 4] = rsqrt(fabs(y) + 1.0);
    out[12 * i + 5] = fmin(x, y) + fmax(y, z);
    out[12 * i + 6] = copysign(x, y) + floor(x) + ceil(y) + trunc(z) + rint(x) + round(y);
    out[12 * i + 7] = __dadd_rn(x, y) + __dadd_rz(x, y) + __dadd_ru(x, y) + __dadd_rd(x, y);
    out[12 * i + 8] = __dmul_rn(x, y) + __dmul_rz(x, y) + __dmul_ru(y, z) + __dmul_rd(y, z);
    out[12 * i + 9] = __ddiv_rn(x, y) + __ddiv_rz(x, y) + __drcp_rn(y) + __dsqrt_rn(fabs(z));
    out[12 * i + 10] = __fma_rn(x, y, z) + __fma_rz(x, y, z) + __fma_ru(x, y, z) + __fma_rd(x, y, z);
    out[12 * i + 11] = (x < y) ? __longlong_as_double(__double_as_longlong(z) ^ 1) : __hiloint2double(__double2hiint(x), __double2loint(y));
}

extern "C" __global__ void f64_math(const double* a, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i];
    out[i] = exp(x) + log(fabs(x) + 1.0) + sin(x) * cos(x);
}
