// `saxpy.comp` through buffer device addresses instead of descriptors, with
// 64-bit address arithmetic as ptxvk emits it: the floor of what a PTX
// translation can reach on a device without bounded descriptors.
#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Float { float v; };
layout(push_constant) uniform Push { uint64_t x; uint64_t y; uint n; float a; };
void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
    if (i < n) {
        Float px = Float(x + uint64_t(i) * 4ul);
        Float py = Float(y + uint64_t(i) * 4ul);
        py.v = fma(a, px.v, py.v);
    }
}
