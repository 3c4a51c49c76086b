// nvcc -ptx -arch=sm_80 -O3 tex_sample.cu -o tex_sample.ptx
// The cost of the software texture unit (bench/src/tex.rs): a float4
// image resampled with bilinear filtering, once through a texture object
// (tex2D: the sampling engine, shaders/tex.ptx), once by hand with global
// loads and the same clamp-to-edge rule (the code a user writes without
// textures; float weights, so the two differ in the last bits).
#include <cuda_runtime.h>

extern "C" __global__ void tex_resample(cudaTextureObject_t t, float4* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w) out[y * w + x] = tex2D<float4>(t, (x + 0.3f) / w, (y + 0.7f) / h);
}

__device__ __forceinline__ float4 at(const float4* img, int iw, int ih, int x, int y) {
    x = min(max(x, 0), iw - 1);
    y = min(max(y, 0), ih - 1);
    return img[y * iw + x];
}

extern "C" __global__ void manual_resample(const float4* img, int iw, int ih, float4* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= w) return;
    float u = (x + 0.3f) / w * iw - 0.5f, v = (y + 0.7f) / h * ih - 0.5f;
    float fu = floorf(u), fv = floorf(v);
    int i = (int)fu, j = (int)fv;
    float a = u - fu, b = v - fv;
    float4 t00 = at(img, iw, ih, i, j), t10 = at(img, iw, ih, i + 1, j);
    float4 t01 = at(img, iw, ih, i, j + 1), t11 = at(img, iw, ih, i + 1, j + 1);
    float4 r;
    r.x = (1 - a) * (1 - b) * t00.x + a * (1 - b) * t10.x + (1 - a) * b * t01.x + a * b * t11.x;
    r.y = (1 - a) * (1 - b) * t00.y + a * (1 - b) * t10.y + (1 - a) * b * t01.y + a * b * t11.y;
    r.z = (1 - a) * (1 - b) * t00.z + a * (1 - b) * t10.z + (1 - a) * b * t01.z + a * b * t11.z;
    r.w = (1 - a) * (1 - b) * t00.w + a * (1 - b) * t10.w + (1 - a) * b * t01.w + a * b * t11.w;
    out[y * w + x] = r;
}
