#version 450
// One compute shader, many pipelines: each (MUL, VARIANT) pair specialises it into other code.
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MUL = 3;
layout(constant_id = 1) const uint VARIANT = 0;
layout(set = 0, binding = 0) buffer Out { uint data[]; } outb;
layout(push_constant) uniform Push { uint add; } pc;
void main() {
    uint i = gl_GlobalInvocationID.x;
    uint v = i * MUL + pc.add;
    for (uint k = 0; k < VARIANT % 7; k++) { v = v * 1664525u + 1013904223u; }
    outb.data[i] = v + VARIANT;
}
