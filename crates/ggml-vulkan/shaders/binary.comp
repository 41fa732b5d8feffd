#version 450
// ADD, SUB, MUL, DIV of f32 tensors; src1 is broadcast (repeated) over src0's shape.
#define WG_SIZE 256
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

void main() {
    uint n = p.ne0 * p.ne1 * p.ne2 * p.ne3;
    for (uint i = flat_gid(); i < n; i += flat_nthreads()) {
        uvec4 c = coords(i, p.ne0, p.ne1, p.ne2);
        float x = a[p.off0 + c.x * p.nb00 + c.y * p.nb01 + c.z * p.nb02 + c.w * p.nb03];
        float y = b[p.off1 + (c.x % p.ne10) * p.nb10 + (c.y % p.ne11) * p.nb11
            + (c.z % p.ne12) * p.nb12 + (c.w % p.ne13) * p.nb13];
        float r;
        if (p.op == 0) {
            r = x + y;
        } else if (p.op == 1) {
            r = x - y;
        } else if (p.op == 2) {
            r = x * y;
        } else {
            r = x / y;
        }
        d[p.offd + c.x * p.nb0 + c.y * p.nb1 + c.z * p.nb2 + c.w * p.nb3] = r;
    }
}
