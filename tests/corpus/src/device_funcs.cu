// Non-inlined device functions: scalar, vector and struct arguments and results.
struct Pair {
    int a;
    float b;
};

struct Big {
    double d[3];
    char c;
};

__device__ __noinline__ int add3(int a, int b, int c) { return a + b + c; }
__device__ __noinline__ float mix(float a, float b, float t) { return a + (b - a) * t; }
__device__ __noinline__ Pair make_pair(int a, float b) { return Pair{a * 2, b * 0.5f}; }
__device__ __noinline__ double sum_big(Big b) { return b.d[0] + b.d[1] + b.d[2] + b.c; }
__device__ __noinline__ void write_out(int* p, int v) { *p = v; }
__device__ __noinline__ float4 swizzle(float4 v) { return make_float4(v.w, v.z, v.y, v.x); }
__device__ __noinline__ bool is_odd(long long v) { return v & 1; }
__device__ __noinline__ short narrow(short a, unsigned char b) { return a * b; }

extern "C" __global__ void call_funcs(const int* in, const float4* v4, int* out, float* fout, float4* o4,
                                      double* dout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = in[i];
    Pair p = make_pair(x, (float)x);
    Big b = {{1.0 * x, 2.0, 3.0}, (char)x};
    write_out(&out[i], add3(x, p.a, is_odd(x) ? 1 : narrow((short)x, (unsigned char)i)));
    fout[i] = mix(p.b, 2.0f, 0.25f);
    o4[i] = swizzle(v4[i]);
    dout[i] = sum_big(b);
}

__device__ int (*const ops[2])(int, int, int) = {add3, add3};

extern "C" __global__ void call_indirect(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = ops[i & 1](in[i], i, 1);
}
