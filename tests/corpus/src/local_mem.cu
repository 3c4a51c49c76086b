// Dynamically indexed local arrays, structs by value, large parameter lists.
struct Params {
    float scale[8];
    int offset;
    double bias;
    char tag[5];
};

extern "C" __global__ void local_array(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int hist[16];
    for (int k = 0; k < 16; ++k) hist[k] = 0;
    for (int k = 0; k < 32; ++k) hist[(in[(i + k) % n]) & 15]++;
    int best = 0;
    for (int k = 1; k < 16; ++k) if (hist[k] > hist[best]) best = k;
    out[i] = best * 100 + hist[best];
}

extern "C" __global__ void struct_param(Params p, const float* in, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] * p.scale[i & 7] + p.offset + p.bias + p.tag[i % 5];
}

extern "C" __global__ void many_params(int a0, int a1, int a2, int a3, long long a4, float a5, double a6, short a7,
                                       char a8, unsigned a9, int* out) {
    out[threadIdx.x] = a0 + a1 + a2 + a3 + (int)a4 + (int)a5 + (int)a6 + a7 + a8 + (int)a9;
}

extern "C" __global__ void local_sort(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i * 8 + 7 >= n) return;
    float v[8];
    for (int k = 0; k < 8; ++k) v[k] = in[i * 8 + k];
    for (int a = 1; a < 8; ++a) {
        float x = v[a];
        int b = a - 1;
        while (b >= 0 && v[b] > x) { v[b + 1] = v[b]; --b; }
        v[b + 1] = x;
    }
    for (int k = 0; k < 8; ++k) out[i * 8 + k] = v[k];
}
