// FP8 and packed conversions (hardware cvt on sm_89+, emulated before).
#include <cuda_fp8.h>
#include <cuda_fp16.h>

extern "C" __global__ void fp8_convert(const float* in, __nv_fp8_storage_t* e4, __nv_fp8_storage_t* e5, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    e4[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    e5[i] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
    __half_raw h = __nv_cvt_fp8_to_halfraw(e4[i], __NV_E4M3);
    __nv_fp8x2_storage_t p = __nv_cvt_float2_to_fp8x2(make_float2(x, -x), __NV_SATFINITE, __NV_E5M2);
    __half2_raw h2 = __nv_cvt_fp8x2_to_halfraw2(p, __NV_E5M2);
    out[i] = __half2float(__half(h)) + __half2float(__half(__half_raw{h2.x})) + float(__nv_fp8_e4m3(x)) + float(__nv_fp8_e5m2(x * 2));
}
