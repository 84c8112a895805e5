#version 450
layout(location = 0) in vec2 pos;
layout(location = 1) in vec3 color;
layout(location = 0) out vec3 vcolor;
layout(push_constant) uniform Push { vec2 offset; } pc;
void main() {
    gl_Position = vec4(pos + pc.offset, 0.0, 1.0);
    vcolor = color;
}
