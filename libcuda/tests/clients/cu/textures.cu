// Textures and surfaces as a CUDA runtime program uses them, run through
// ptxvk's libcuda.so.1 by test_cudart.py:
//
//   nvcc -arch=sm_80 -O2 textures.cu -o textures
//
// CUDA arrays (cudaMallocArray, cudaMalloc3DArray layered, a mipmapped
// array), 2-D copies to and from arrays, texture objects on arrays and on
// linear memory (cudaCreateTextureObject with linear filtering, normalized
// coordinates, border and clamp modes, normalized-float reads of uchar4),
// surface objects (surf2Dread/surf2Dwrite: a 3x3 box filter), and the
// object queries. Inputs are random with a fixed seed, outputs poisoned,
// and every result compared on the host with CUDA's texture rules
// (9-bit fixed-point filter weights). Prints "N checks passed" at the end.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "check.cuh"

static float random_float() { return (float)(next_random() % 20001) / 100.0f - 100.0f; }

__global__ void resample(cudaTextureObject_t t, float4* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w) out[y * w + x] = tex2D<float4>(t, (x + 0.5f) / w * 1.5f - 0.25f, (y + 0.5f) / h * 1.5f - 0.25f);
}

__global__ void to_float(cudaTextureObject_t t, float4* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w) out[y * w + x] = tex2D<float4>(t, x - 1.0f, y + 0.5f);
}

__global__ void box3(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= w) return;
    float s = 0;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) s += surf2Dread<float>(in, (x + dx) * 4, y + dy, cudaBoundaryModeClamp);
    surf2Dwrite(s / 9.0f, out, x * 4, y);
}

__global__ void layered(cudaTextureObject_t t, float* out, int w, int layers) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, l = blockIdx.y;
    if (x < w && l < layers) out[l * w + x] = tex2DLayered<float>(t, x + 0.5f, 1.5f, l);
}

__global__ void fetch(cudaTextureObject_t t, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<int>(t, i * 3 - 5);
}

__global__ void lod(cudaTextureObject_t t, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2DLod<float>(t, 0.3f, 0.6f, i * 0.5f);
}

// CUDA's linear filtering on the host: weights in 9-bit fixed point.
static float weight(float u) { return rintf((u - floorf(u)) * 256.0f) / 256.0f; }

int main() {
    // 1. A float4 image resampled with linear filtering, normalized
    //    coordinates, border (x) and clamp (y).
    const int W = 37, H = 19, OW = 50, OH = 23;
    std::vector<float4> img(W * H);
    for (auto& p : img) p = make_float4(random_float(), random_float(), random_float(), random_float());
    cudaChannelFormatDesc f4 = cudaCreateChannelDesc<float4>();
    cudaArray_t arr;
    OK(cudaMallocArray(&arr, &f4, W, H));
    OK(cudaMemcpy2DToArray(arr, 0, 0, img.data(), W * sizeof(float4), W * sizeof(float4), H, cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = arr;
    cudaTextureDesc td = {};
    td.addressMode[0] = cudaAddressModeBorder;
    td.addressMode[1] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 1;
    cudaTextureObject_t tex;
    OK(cudaCreateTextureObject(&tex, &res, &td, nullptr));
    float4* dout;
    OK(cudaMalloc(&dout, OW * OH * sizeof(float4)));
    OK(cudaMemset(dout, 0xAB, OW * OH * sizeof(float4)));
    resample<<<dim3(1, OH), 64>>>(tex, dout, OW, OH);
    OK(cudaGetLastError());
    std::vector<float4> got(OW * OH);
    OK(cudaMemcpy(got.data(), dout, got.size() * sizeof(float4), cudaMemcpyDeviceToHost));
    auto texel = [&](int x, int y) {
        y = y < 0 ? 0 : (y >= H ? H - 1 : y);
        if (x < 0 || x >= W) return make_float4(0, 0, 0, 0);
        return img[y * W + x];
    };
    for (int y = 0; y < OH; y++)
        for (int x = 0; x < OW; x++) {
            float u = ((x + 0.5f) / OW * 1.5f - 0.25f) * W - 0.5f, v = ((y + 0.5f) / OH * 1.5f - 0.25f) * H - 0.5f;
            int i = (int)floorf(u), j = (int)floorf(v);
            float a = weight(u), b = weight(v);
            float4 t00 = texel(i, j), t10 = texel(i + 1, j), t01 = texel(i, j + 1), t11 = texel(i + 1, j + 1);
            float want = (1 - a) * (1 - b) * t00.x + a * (1 - b) * t10.x + (1 - a) * b * t01.x + a * b * t11.x;
            float g = got[y * OW + x].x;
            CHECK(fabsf(g - want) <= 1e-4f * fmaxf(1.0f, fabsf(want)), "resample (%d,%d): %g, want %g", x, y, g, want);
        }
    printf("resample: %d x %d linear samples right\n", OW, OH);

    // 2. uchar4 read as normalized floats, point sampled, clamp.
    std::vector<uchar4> bytes(W * H);
    for (auto& p : bytes) {
        uint32_t r = next_random();
        p = make_uchar4(r, r >> 8, r >> 16, r >> 24);
    }
    cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
    cudaArray_t arr8;
    OK(cudaMallocArray(&arr8, &u4, W, H));
    OK(cudaMemcpy2DToArray(arr8, 0, 0, bytes.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
    res.res.array.array = arr8;
    cudaTextureDesc tp = {};
    tp.addressMode[0] = tp.addressMode[1] = cudaAddressModeClamp;
    tp.filterMode = cudaFilterModePoint;
    tp.readMode = cudaReadModeNormalizedFloat;
    cudaTextureObject_t tex8;
    OK(cudaCreateTextureObject(&tex8, &res, &tp, nullptr));
    to_float<<<dim3(1, H), 64>>>(tex8, dout, W, H);
    OK(cudaMemcpy(got.data(), dout, W * H * sizeof(float4), cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int sx = x - 1 < 0 ? 0 : x - 1;
            uchar4 p = bytes[y * W + sx];
            float4 g = got[y * W + x];
            CHECK(g.x == p.x / 255.0f && g.y == p.y / 255.0f && g.z == p.z / 255.0f && g.w == p.w / 255.0f,
                  "normalized read (%d,%d)", x, y);
        }
    printf("uchar4 normalized reads right\n");

    // 3. Surfaces: a 3x3 box filter from one array to another.
    cudaChannelFormatDesc f1 = cudaCreateChannelDesc<float>();
    cudaArray_t sin, sout;
    OK(cudaMallocArray(&sin, &f1, W, H, cudaArraySurfaceLoadStore));
    OK(cudaMallocArray(&sout, &f1, W, H, cudaArraySurfaceLoadStore));
    std::vector<float> plane(W * H), blurred(W * H, -1);
    for (auto& v : plane) v = random_float();
    OK(cudaMemcpy2DToArray(sin, 0, 0, plane.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
    cudaResourceDesc rs = {};
    rs.resType = cudaResourceTypeArray;
    rs.res.array.array = sin;
    cudaSurfaceObject_t surf_in, surf_out;
    OK(cudaCreateSurfaceObject(&surf_in, &rs));
    rs.res.array.array = sout;
    OK(cudaCreateSurfaceObject(&surf_out, &rs));
    box3<<<dim3(1, H), 64>>>(surf_in, surf_out, W, H);
    OK(cudaGetLastError());
    OK(cudaMemcpy2DFromArray(blurred.data(), W * 4, sout, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float s = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int cx = x + dx < 0 ? 0 : (x + dx >= W ? W - 1 : x + dx);
                    int cy = y + dy < 0 ? 0 : (y + dy >= H ? H - 1 : y + dy);
                    s += plane[cy * W + cx];
                }
            CHECK(blurred[y * W + x] == s / 9.0f, "box3 (%d,%d): %g, want %g", x, y, blurred[y * W + x], s / 9.0f);
        }
    printf("surface box filter right\n");

    // 4. A layered array (cudaMalloc3DArray), one texel row per layer.
    const int LW = 8, LH = 3, LAYERS = 5;
    cudaArray_t larr;
    OK(cudaMalloc3DArray(&larr, &f1, make_cudaExtent(LW, LH, LAYERS), cudaArrayLayered));
    std::vector<float> lvals(LW * LH * LAYERS);
    for (auto& v : lvals) v = random_float();
    cudaMemcpy3DParms p3 = {};
    p3.srcPtr = make_cudaPitchedPtr(lvals.data(), LW * 4, LW, LH);
    p3.dstArray = larr;
    p3.extent = make_cudaExtent(LW, LH, LAYERS);
    p3.kind = cudaMemcpyHostToDevice;
    OK(cudaMemcpy3D(&p3));
    res.res.array.array = larr;
    cudaTextureDesc tl = {};
    tl.filterMode = cudaFilterModePoint;
    cudaTextureObject_t ltex;
    OK(cudaCreateTextureObject(&ltex, &res, &tl, nullptr));
    float* lout;
    OK(cudaMalloc(&lout, LW * LAYERS * 4));
    layered<<<dim3(1, LAYERS), 32>>>(ltex, lout, LW, LAYERS);
    std::vector<float> lgot(LW * LAYERS);
    OK(cudaMemcpy(lgot.data(), lout, lgot.size() * 4, cudaMemcpyDeviceToHost));
    for (int l = 0; l < LAYERS; l++)
        for (int x = 0; x < LW; x++)
            CHECK(lgot[l * LW + x] == lvals[(l * LH + 1) * LW + x], "layered (%d, layer %d)", x, l);
    printf("layered reads right\n");

    // 5. tex1Dfetch on linear memory: out of range reads 0.
    const int N = 100;
    std::vector<int> ints(N);
    for (auto& v : ints) v = (int)next_random();
    int *dints, *dfetch;
    OK(cudaMalloc(&dints, N * 4));
    OK(cudaMalloc(&dfetch, N * 4));
    OK(cudaMemcpy(dints, ints.data(), N * 4, cudaMemcpyHostToDevice));
    cudaResourceDesc rl = {};
    rl.resType = cudaResourceTypeLinear;
    rl.res.linear.devPtr = dints;
    rl.res.linear.desc = cudaCreateChannelDesc<int>();
    rl.res.linear.sizeInBytes = N * 4;
    cudaTextureDesc tf = {};
    cudaTextureObject_t ftex;
    OK(cudaCreateTextureObject(&ftex, &rl, &tf, nullptr));
    fetch<<<1, 128>>>(ftex, dfetch, N);
    std::vector<int> fgot(N);
    OK(cudaMemcpy(fgot.data(), dfetch, N * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) {
        int k = i * 3 - 5;
        CHECK(fgot[i] == (k >= 0 && k < N ? ints[k] : 0), "tex1Dfetch %d", i);
    }
    cudaResourceDesc back;
    OK(cudaGetTextureObjectResourceDesc(&back, ftex));
    CHECK(back.resType == cudaResourceTypeLinear && back.res.linear.devPtr == dints && back.res.linear.sizeInBytes == N * 4,
          "cudaGetTextureObjectResourceDesc");
    printf("tex1Dfetch right\n");

    // 6. A mipmapped array: level k holds the value k; tex2DLod picks the
    //    nearest level (clamped to the last), halves rounding up
    //    (floor(lod + 0.5), docs/textures.md).
    cudaMipmappedArray_t mip;
    OK(cudaMallocMipmappedArray(&mip, &f1, make_cudaExtent(16, 16, 0), 4));
    for (unsigned k = 0; k < 4; k++) {
        cudaArray_t level;
        OK(cudaGetMipmappedArrayLevel(&level, mip, k));
        int n = 16 >> k;
        std::vector<float> fill(n * n, (float)k);
        OK(cudaMemcpy2DToArray(level, 0, 0, fill.data(), n * 4, n * 4, n, cudaMemcpyHostToDevice));
    }
    cudaResourceDesc rm = {};
    rm.resType = cudaResourceTypeMipmappedArray;
    rm.res.mipmap.mipmap = mip;
    cudaTextureDesc tm = {};
    tm.normalizedCoords = 1;
    tm.mipmapFilterMode = cudaFilterModePoint;
    tm.maxMipmapLevelClamp = 10;
    cudaTextureObject_t mtex;
    OK(cudaCreateTextureObject(&mtex, &rm, &tm, nullptr));
    float* mout;
    OK(cudaMalloc(&mout, 10 * 4));
    lod<<<1, 32>>>(mtex, mout, 10);
    float mgot[10];
    OK(cudaMemcpy(mgot, mout, sizeof mgot, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 10; i++) {
        float want = fminf(floorf(i * 0.5f + 0.5f), 3.0f);
        CHECK(mgot[i] == want, "tex2DLod %d: %g, want %g", i, mgot[i], want);
    }
    printf("mipmap levels right\n");

    OK(cudaDestroyTextureObject(tex));
    OK(cudaDestroyTextureObject(tex8));
    OK(cudaDestroyTextureObject(ltex));
    OK(cudaDestroyTextureObject(ftex));
    OK(cudaDestroyTextureObject(mtex));
    OK(cudaDestroySurfaceObject(surf_in));
    OK(cudaDestroySurfaceObject(surf_out));
    OK(cudaFreeArray(arr));
    OK(cudaFreeArray(arr8));
    OK(cudaFreeArray(sin));
    OK(cudaFreeArray(sout));
    OK(cudaFreeArray(larr));
    OK(cudaFreeMipmappedArray(mip));
    printf("%d checks passed\n", checks);
    return 0;
}
