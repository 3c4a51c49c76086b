// Hand-written twin of `stencil3x3` in twins.cu: clamp-to-edge 3 x 3
// stencil, workgroups of 32 x 8, eight rows of one column per invocation
// with its ten input rows in registers.
#version 450
layout(local_size_x = 32, local_size_y = 8) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform Push { int n; float w[9]; };
void main() {
    int x = int(gl_GlobalInvocationID.x);
    int y0 = int(gl_GlobalInvocationID.y) * 8;
    int xl = max(x - 1, 0), xr = min(x + 1, n - 1);
    float r[10][3];
    for (int j = 0; j < 10; j++) {
        int y = clamp(y0 + j - 1, 0, n - 1);
        r[j][0] = src[y * n + xl];
        r[j][1] = src[y * n + x];
        r[j][2] = src[y * n + xr];
    }
    for (int j = 0; j < 8; j++) {
        float acc = 0.0;
        for (int dy = 0; dy < 3; dy++) {
            for (int dx = 0; dx < 3; dx++) {
                acc = fma(w[dy * 3 + dx], r[j + dy][dx], acc);
            }
        }
        dst[(y0 + j) * n + x] = acc;
    }
}
