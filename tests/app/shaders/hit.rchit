#version 460
#extension GL_EXT_ray_tracing : require
layout(constant_id = 0) const float SHADE = 1.0;
layout(location = 0) rayPayloadInEXT vec3 colour;
hitAttributeEXT vec2 barycentrics;
void main() { colour = vec3(1.0 - barycentrics.x - barycentrics.y, barycentrics) * SHADE; }
