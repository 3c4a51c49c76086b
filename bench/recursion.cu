// nvcc -ptx -arch=sm_80 -O3 recursion.cu -o recursion.ptx
// The recursion benchmark (bench/src/recursion.rs): Fibonacci by recursion
// (the translator's explicit stack) against the same tree walk written with
// a hand-made stack in a local array (what one writes where recursion is
// unavailable). Both add the same leaves in the same order.

__device__ __noinline__ int fib_rec(int n) { return n < 2 ? n : fib_rec(n - 1) + fib_rec(n - 2); }

__device__ int fib_stack(int n) {
    int stack[64];
    int sp = 0, sum = 0;
    stack[sp++] = n;
    while (sp > 0) {
        int k = stack[--sp];
        if (k < 2) {
            sum += k;
        } else {
            stack[sp++] = k - 2;
            stack[sp++] = k - 1;
        }
    }
    return sum;
}

extern "C" __global__ void fib_recursive(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fib_rec(in[i]);
}

extern "C" __global__ void fib_explicit(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fib_stack(in[i]);
}
