#version 450
// ARGSORT (op 0) and TOP_K (op 1) of f32 rows into i32 indices: each invocation takes one
// element, counts the elements that sort before it (ties by index, so the order is stable)
// and writes its index at that rank; TOP_K keeps the ranks below u1 in descending order.
// u0 = 1: descending.
#define WG_SIZE 64
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer D { int d[]; };

void main() {
    uint n = p.ne00 * p.ne01 * p.ne02 * p.ne03;
    bool desc = p.u0 == 1 || p.op == 1;
    for (uint g = flat_gid(); g < n; g += flat_nthreads()) {
        uvec4 c = coords(g, p.ne00, p.ne01, p.ne02);
        uint row = p.off0 + c.y * p.nb01 + c.z * p.nb02 + c.w * p.nb03;
        float v = a[row + c.x * p.nb00];
        uint rank = 0;
        for (uint j = 0; j < p.ne00; j++) {
            float w = a[row + j * p.nb00];
            bool before = desc ? (w > v) : (w < v);
            if (before || (w == v && j < c.x)) {
                rank++;
            }
        }
        if (p.op == 1 && rank >= p.u1) {
            continue;
        }
        d[p.offd + rank * p.nb0 + c.y * p.nb1 + c.z * p.nb2 + c.w * p.nb3] = int(c.x);
    }
}
