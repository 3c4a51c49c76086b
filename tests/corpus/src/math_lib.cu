// CUDA math library functions (single precision).
extern "C" __global__ void math_f32(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    out[8 * i + 0] = sinf(x) + cosf(x);
    out[8 * i + 1] = tanf(x);
    out[8 * i + 2] = expf(x) + exp10f(x);
    out[8 * i + 3] = logf(fabsf(x) + 1.0f) + log2f(fabsf(x) + 1.0f) + log1pf(fabsf(x));
    out[8 * i + 4] = powf(fabsf(x), 1.5f);
    out[8 * i + 5] = atan2f(x, 1.0f) + asinf(x * 0.1f);
    out[8 * i + 6] = tanhf(x) + erff(x);
    out[8 * i + 7] = cbrtf(x) + hypotf(x, 2.0f) + fmodf(x, 3.0f);
}

extern "C" __global__ void sincos_f32(const float* in, float* s, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sincosf(in[i], &s[i], &c[i]);
    float ip;
    c[i] += modff(in[i], &ip) + ip + ldexpf(in[i], 3) + scalbnf(in[i], -2);
    int e;
    s[i] += frexpf(in[i], &e) + e + ilogbf(in[i] + 1.0f);
}
