// Hand-written twin of `sgemm` in twins.cu: 16 x 16 tiles in shared
// memory, one element of C per invocation.
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform Push { uint n; };
shared float as_[16][16];
shared float bs[16][16];
void main() {
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint row = gl_WorkGroupID.y * 16u + ty, col = gl_WorkGroupID.x * 16u + tx;
    float acc = 0.0;
    for (uint k0 = 0u; k0 < n; k0 += 16u) {
        as_[ty][tx] = a[row * n + k0 + tx];
        bs[ty][tx] = b[(k0 + ty) * n + col];
        barrier();
        for (uint k = 0u; k < 16u; k++) {
            acc = fma(as_[ty][k], bs[k][tx], acc);
        }
        barrier();
    }
    c[row * n + col] = acc;
}
