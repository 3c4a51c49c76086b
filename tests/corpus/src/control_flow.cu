// Branches, switches (jump tables), loops, early exits, goto.
extern "C" __global__ void switch_table(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i], r;
    switch (v & 15) {
        case 0: r = v * 3; break;
        case 1: r = v + 7; break;
        case 2: r = v ^ 0x55; break;
        case 3: r = -v; break;
        case 4: r = v << 2; break;
        case 5: r = v >> 1; break;
        case 6: r = v * v; break;
        case 7: r = v - 100; break;
        case 9: r = 42; break;
        case 11: r = v | 1; break;
        default: r = 0;
    }
    out[i] = r;
}

extern "C" __global__ void nested_loops(const int* in, int* out, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int acc = 0;
    for (int a = 0; a < m; ++a) {
        if (in[(i + a) % n] < 0) continue;
        for (int b = 0; b < a; ++b) {
            acc += in[(i + b) % n] * a;
            if (acc > 100000) goto done;
        }
        int w = in[i];
        while (w > 1) {
            w = (w & 1) ? 3 * w + 1 : w / 2;
            ++acc;
            if (acc & 0x10000) break;
        }
    }
done:
    do {
        acc -= 3;
    } while (acc > 50000);
    out[i] = acc;
}

extern "C" __global__ void divergent(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    if (threadIdx.x & 1) {
        if (x > 0) x = sqrtf(x); else x = -x;
    } else if (threadIdx.x & 2) {
        for (int k = 0; k < (int)threadIdx.x; ++k) x = x * 0.5f + 1.0f;
    } else {
        x = x > 10.0f ? 10.0f : (x < -10.0f ? -10.0f : x);
    }
    out[i] = x;
}

extern "C" __global__ void multi_exit(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    if (v == 0) { out[i] = -1; return; }
    if (v == 1) { out[i] = -2; return; }
    for (int k = 0; k < 32; ++k) {
        if ((v >> k) & 1) { out[i] = k; return; }
    }
    out[i] = 99;
}
