// Templated kernels instantiated for several types (C++-mangled names).
#include <cstdint>

template <typename T, int N>
struct Vec {
    T v[N];
};

template <typename T>
__device__ __forceinline__ T clampv(T x, T lo, T hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}

template <typename T, int BLOCK>
__global__ void reduce_tpl(const T* in, T* out, int n) {
    __shared__ T s[BLOCK];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : T(0);
    __syncthreads();
#pragma unroll
    for (int k = BLOCK / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

template <typename T, int N>
__global__ void vec_scale(const Vec<T, N>* in, Vec<T, N>* out, T k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Vec<T, N> v = in[i];
#pragma unroll
    for (int j = 0; j < N; ++j) v.v[j] = clampv<T>(v.v[j] * k, T(-100), T(100));
    out[i] = v;
}

template __global__ void reduce_tpl<int, 128>(const int*, int*, int);
template __global__ void reduce_tpl<float, 256>(const float*, float*, int);
template __global__ void reduce_tpl<double, 64>(const double*, double*, int);
template __global__ void reduce_tpl<uint64_t, 32>(const uint64_t*, uint64_t*, int);
template __global__ void vec_scale<float, 4>(const Vec<float, 4>*, Vec<float, 4>*, float, int);
template __global__ void vec_scale<int16_t, 3>(const Vec<int16_t, 3>*, Vec<int16_t, 3>*, int16_t, int);
template __global__ void vec_scale<double, 2>(const Vec<double, 2>*, Vec<double, 2>*, double, int);

namespace ns {
struct Functor {
    float a;
    __device__ float operator()(float x) const { return a * x + 1.0f; }
};
template <typename F>
__global__ void apply(F f, const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = f(in[i]);
}
template __global__ void apply<Functor>(Functor, const float*, float*, int);
}  // namespace ns
