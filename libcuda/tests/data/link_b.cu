// Device-function half of the linking test: defines combine() for link_a.cu.
__device__ float combine(float a, float b) { return a + b; }
