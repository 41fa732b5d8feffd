#version 450
// SUM_ROWS (op 0) and MEAN (op 1) of f32 rows: one invocation per row, summed in order.
#define WG_SIZE 64
#include "common.glsl"
#include "generic.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

void main() {
    uint nrows = p.ne01 * p.ne02 * p.ne03;
    for (uint r = flat_gid(); r < nrows; r += flat_nthreads()) {
        uint i1 = r % p.ne01;
        uint i2 = (r / p.ne01) % p.ne02;
        uint i3 = r / (p.ne01 * p.ne02);
        uint src = p.off0 + i1 * p.nb01 + i2 * p.nb02 + i3 * p.nb03;
        float s = 0.0;
        for (uint i = 0; i < p.ne00; i++) {
            s += a[src + i * p.nb00];
        }
        if (p.op == 1) {
            s /= float(p.ne00);
        }
        d[p.offd + i1 * p.nb1 + i2 * p.nb2 + i3 * p.nb3] = s;
    }
}
