// Warp matrix multiply-accumulate (wmma) for the types each architecture has.
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using namespace nvcuda;

extern "C" __global__ void wmma_f16(const half* a, const half* b, float* c, int ld) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    for (int k = 0; k < ld; k += 16) {
        wmma::load_matrix_sync(fa, a + k, ld);
        wmma::load_matrix_sync(fb, b + k, ld);
        wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

extern "C" __global__ void wmma_f16_acc(const half* a, const half* b, half* c) {
    wmma::fragment<wmma::matrix_a, 32, 8, 16, half, wmma::col_major> fa;
    wmma::fragment<wmma::matrix_b, 32, 8, 16, half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 32, 8, 16, half> fc;
    wmma::load_matrix_sync(fa, a, 32);
    wmma::load_matrix_sync(fb, b, 8);
    wmma::fill_fragment(fc, __float2half(1.0f));
    wmma::mma_sync(fc, fa, fb, fc);
    for (int i = 0; i < fc.num_elements; ++i) fc.x[i] = __hmul(fc.x[i], __float2half(0.5f));
    wmma::store_matrix_sync(c, fc, 8, wmma::mem_col_major);
}

extern "C" __global__ void wmma_int8(const signed char* a, const signed char* b, int* c) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, int> fc;
    wmma::fill_fragment(fc, 0);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

#if __CUDA_ARCH__ >= 800
extern "C" __global__ void wmma_bf16_tf32(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* x,
                                          const float* y, float* c) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ta;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> tb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> tc;
    wmma::load_matrix_sync(ta, x, 8);
    wmma::load_matrix_sync(tb, y, 16);
    for (int i = 0; i < ta.num_elements; ++i) ta.x[i] = wmma::__float_to_tf32(ta.x[i]);
    wmma::fill_fragment(tc, 1.0f);
    wmma::mma_sync(tc, ta, tb, tc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
    wmma::store_matrix_sync(c + 256, tc, 16, wmma::mem_row_major);
}

extern "C" __global__ void mma_f64_asm(const double* a, const double* b, double* c) {
    double d0, d1;
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%4,%5};\n"
                 : "=d"(d0), "=d"(d1)
                 : "d"(a[threadIdx.x]), "d"(b[threadIdx.x]), "d"(c[2 * threadIdx.x]), "d"(c[2 * threadIdx.x + 1]));
    c[2 * threadIdx.x] = d0;
    c[2 * threadIdx.x + 1] = d1;
}

extern "C" __global__ void ldmatrix_mma(const half* a, float* out) {
    __shared__ half s[16 * 16];
    for (int k = threadIdx.x; k < 256; k += 32) s[k] = a[k];
    __syncthreads();
    unsigned r0, r1, r2, r3;
    unsigned addr = (unsigned)__cvta_generic_to_shared(&s[(threadIdx.x % 16) * 16 + (threadIdx.x / 16) * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(r0), "r"(r1), "r"(r2), "r"(r3), "r"(r0), "r"(r2));
    out[4 * threadIdx.x] = d0;
    out[4 * threadIdx.x + 1] = d1;
    out[4 * threadIdx.x + 2] = d2;
    out[4 * threadIdx.x + 3] = d3;
}
#endif
