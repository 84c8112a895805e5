#version 450
layout(constant_id = 0) const float SCALE = 1.0;
layout(set = 0, binding = 0) uniform sampler2D tex;
layout(location = 0) in vec3 vcolor;
layout(location = 0) out vec4 outc;
void main() {
    outc = vec4(vcolor * SCALE, 1.0) * texture(tex, vcolor.xy);
}
