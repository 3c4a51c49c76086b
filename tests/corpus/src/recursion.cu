// Recursive device functions (self and mutual recursion; translated by translator/src/recursion.rs).
__device__ __noinline__ unsigned long long fact(unsigned n) { return n <= 1 ? 1 : n * fact(n - 1); }

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__device__ int is_even(int n);
__device__ __noinline__ int is_odd(int n) { return n == 0 ? 0 : is_even(n - 1); }
__device__ __noinline__ int is_even(int n) { return n == 0 ? 1 : is_odd(n - 1); }

extern "C" __global__ void recursive(const unsigned* in, unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = fact(in[i] & 15) + fib(in[i] & 7) + is_odd(in[i] & 31);
}
