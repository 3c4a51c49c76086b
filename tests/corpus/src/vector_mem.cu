// Vector loads and stores, read-only and cache-hinted accesses, volatile.
extern "C" __global__ void vec4_copy(const float4* __restrict__ in, float4* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 v = __ldg(&in[i]);
    out[i] = make_float4(v.x + v.y, v.y * v.z, v.z - v.w, v.w);
}

extern "C" __global__ void vec2_types(const int2* a, const double2* b, const uchar4* c, const short2* d, int2* oa,
                                      double2* ob, uchar4* oc, short2* od, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int2 x = a[i];
    double2 y = b[i];
    uchar4 z = c[i];
    short2 w = d[i];
    oa[i] = make_int2(x.y, x.x);
    ob[i] = make_double2(y.x + y.y, y.x * y.y);
    oc[i] = make_uchar4(z.w, z.z, z.y, z.x);
    od[i] = make_short2(w.x + w.y, w.x - w.y);
}

extern "C" __global__ void cache_hints(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = __ldcg(&in[i]) + __ldca(&in[i]) + __ldcs(&in[i]) + __ldlu(&in[i]) + __ldcv(&in[i]);
    __stcg(&out[4 * i], a);
    __stcs(&out[4 * i + 1], a);
    __stwb(&out[4 * i + 2], a);
    __stwt(&out[4 * i + 3], a);
}

extern "C" __global__ void volatile_flag(volatile int* flag, int* data) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        data[0] = 42;
        __threadfence();
        *flag = 1;
    } else if (threadIdx.x == 0) {
        int spins = 0;
        while (*flag == 0 && spins < 1000) ++spins;
        data[blockIdx.x] = data[0] + spins;
    }
}

extern "C" __global__ void generic_pointers(float* p, int which, int n) {
    __shared__ float s[128];
    float local[4] = {1, 2, 3, 4};
    float* q = which == 0 ? p : (which == 1 ? s : local);
    s[threadIdx.x & 127] = (float)threadIdx.x;
    __syncthreads();
    if ((int)threadIdx.x < n) p[threadIdx.x] = q[threadIdx.x & 3] + (__isShared(q) ? 10.f : 0.f) + (__isGlobal(q) ? 20.f : 0.f) + (__isLocal(q) ? 30.f : 0.f);
}
