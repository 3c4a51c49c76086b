// Selects, predicates, min/max and NaN handling; boolean logic.
extern "C" __global__ void selects(const float* a, const float* b, const int* c, float* out, int* iout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    int z = c[i];
    bool p = x < y, q = z > 3, r = isnan(x);
    out[i] = p ? x : (q ? y : 0.0f);
    out[n + i] = (p && q) || r ? fmaxf(x, y) : fminf(x, y);
    iout[i] = (p ^ q) + 2 * (p != r) + 4 * !q + (z < 0 ? -z : z) + (z & 1 ? 7 : 9);
    iout[n + i] = min(max(z, -5), 5) + (unsigned)z % 7u + (z >= 0 ? z / 4 : -(-z / 4));
}

extern "C" __global__ void bool_arrays(const bool* in, bool* out, unsigned char* cnt, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool v = in[i];
    out[i] = !v || (i & 1);
    cnt[i] = (unsigned char)(v + in[(i + 1) % n] + in[(i + 2) % n]);
}
