#version 450
// CONCAT of two tensors of a 32-bit type (f32, i32) along dim u0, bits copied.
#define WG_SIZE 256
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) readonly buffer B { uint b[]; };
layout(std430, binding = 3) writeonly buffer D { uint d[]; };

void main() {
    uint n = p.ne0 * p.ne1 * p.ne2 * p.ne3;
    uvec4 na = uvec4(p.ne00, p.ne01, p.ne02, p.ne03);
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uvec4 c = coords(i, p.ne0, p.ne1, p.ne2);
        uint v;
        if (c[p.u0] < na[p.u0]) {
            v = a[p.off0 + c.x * p.nb00 + c.y * p.nb01 + c.z * p.nb02 + c.w * p.nb03];
        } else {
            uvec4 cb = c;
            cb[p.u0] -= na[p.u0];
            v = b[p.off1 + cb.x * p.nb10 + cb.y * p.nb11 + cb.z * p.nb12 + cb.w * p.nb13];
        }
        d[p.offd + c.x * p.nb0 + c.y * p.nb1 + c.z * p.nb2 + c.w * p.nb3] = v;
    }
}
