// The push constants of the element-wise shaders: shapes and element strides of two sources
// and the destination, their element offsets inside their bindings, and op parameters.
layout(push_constant) uniform Params {
    uint ne00, ne01, ne02, ne03, nb00, nb01, nb02, nb03;
    uint ne10, ne11, ne12, ne13, nb10, nb11, nb12, nb13;
    uint ne0, ne1, ne2, ne3, nb0, nb1, nb2, nb3;
    uint off0, off1, offd;
    uint op;
    float f0;
    float f1;
    uint u0;
    uint u1;
} p;

// The 4-D coordinates of flat element index i of a tensor of shape (n0, n1, n2, n3).
uvec4 coords(uint i, uint n0, uint n1, uint n2) {
    uint i0 = i % n0;
    i /= n0;
    uint i1 = i % n1;
    i /= n1;
    uint i2 = i % n2;
    return uvec4(i0, i1, i2, i / n2);
}
