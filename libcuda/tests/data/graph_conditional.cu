// nvcc -ptx -arch=sm_80 -O3 graph_conditional.cu -o graph_conditional.ptx
// Conditional graph nodes (CUDA 12.4): kernels that set a node's condition
// with cudaGraphSetConditional (the device runtime's builtin, an undefined
// .extern .func in the PTX) and body kernels.
#include <cuda_runtime.h>

// Sets `handle` to whether *flag is non-zero, and `other` (if non-zero) to
// the opposite: NVIDIA Warp's set_conditional_if_else_handles_kernel.
extern "C" __global__ void set_if_else(cudaGraphConditionalHandle handle, cudaGraphConditionalHandle other,
                                       const int* flag) {
    if (threadIdx.x + blockIdx.x * blockDim.x == 0) {
        cudaGraphSetConditional(handle, *flag != 0);
        if (other != 0) cudaGraphSetConditional(other, *flag == 0);
    }
}

// Sets `handle` to *value (a switch index).
extern "C" __global__ void set_value(cudaGraphConditionalHandle handle, const unsigned* value) {
    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, *value);
}

// One step of a loop: counts *left down and keeps the loop going while it
// is positive (the last block to finish decides, so every block's data
// update of this iteration is done first: a single-block launch here).
extern "C" __global__ void count_down(cudaGraphConditionalHandle handle, int* left) {
    if (threadIdx.x == 0) {
        int now = *left - 1;
        *left = now;
        cudaGraphSetConditional(handle, now > 0 ? 1u : 0u);
    }
}

// data[i] = data[i] * 3 + salt, the body's work.
extern "C" __global__ void step(unsigned* data, unsigned salt, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * 3u + salt;
}
