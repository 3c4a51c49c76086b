// nvcc -ptx -arch=sm_90 -O3 pdl.cu -o pdl.ptx
// Programmatic dependent launch (issue 21, item 4): the producer writes
// half of its output, lets its dependents launch
// (griddepcontrol.launch_dependents), then writes the other half; the
// consumer waits for its prerequisite grids (griddepcontrol.wait) and reads
// both halves, so it must see every write of the producer, including those
// made after the trigger.
extern "C" __global__ void producer(int* buf, int n, int salt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = i * 3 + salt;
    cudaTriggerProgrammaticLaunchCompletion();
    if (i < n) buf[n + i] = (i ^ salt) - 7;
}

extern "C" __global__ void consumer(const int* buf, int* out, int n) {
    cudaGridDependencySynchronize();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = buf[i] * 5 + buf[n + (n - 1 - i)];
}
