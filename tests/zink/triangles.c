/* A GL ES 3 program as an OpenGL application is one, for tests/zink.rs: on an EGL surfaceless
 * display (Mesa's zink on lavapipe there), it draws N triangles into a 64x64 renderbuffer, each
 * with a program of its own (a fragment colour of its own), every other one blended, and prints
 * the renderer and a checksum of the pixels read back. With "separable" after N (GL ES 3.1), each
 * stage is a program of its own bound in a program pipeline (glCreateShaderProgramv), as games
 * and emulators on desktop GL make theirs: zink makes those as shader objects where the driver
 * offers them. Build: cc -O1 triangles.c -lEGL -lGLESv2 */
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl31.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
static const char *vs = "#version 300 es\nin vec2 p; uniform float s; void main(){ gl_Position = vec4(p*s, 0.0, 1.0); }";
static const char *fs_t = "#version 300 es\nprecision mediump float; out vec4 c; void main(){ c = vec4(%f, 0.5, 0.25, 1.0); }";
static const char *vs_sep = "#version 310 es\nlayout(location=0) in vec2 p; uniform float s; void main(){ gl_Position = vec4(p*s, 0.0, 1.0); }";
static const char *fs_sep_t = "#version 310 es\nprecision mediump float; layout(location=0) out vec4 c; void main(){ c = vec4(%f, 0.5, 0.25, 1.0); }";
static GLuint stage_program(GLenum t, const char *src){ GLuint p=glCreateShaderProgramv(t,1,&src); GLint ok; glGetProgramiv(p,GL_LINK_STATUS,&ok); if(!ok){char b[512];glGetProgramInfoLog(p,512,0,b);fprintf(stderr,"%s\n",b);exit(2);} return p; }
static GLuint sh(GLenum t, const char *src){ GLuint s=glCreateShader(t); glShaderSource(s,1,&src,0); glCompileShader(s); GLint ok; glGetShaderiv(s,GL_COMPILE_STATUS,&ok); if(!ok){char b[512];glGetShaderInfoLog(s,512,0,b);fprintf(stderr,"%s\n",b);exit(2);} return s; }
int main(int argc, char **argv){
  int programs = argc > 1 ? atoi(argv[1]) : 8;
  int separable = argc > 2 && !strcmp(argv[2], "separable");
  PFNEGLGETPLATFORMDISPLAYEXTPROC gpd = (void*)eglGetProcAddress("eglGetPlatformDisplayEXT");
  EGLDisplay d = gpd(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, NULL);
  if(!eglInitialize(d,0,0)){fprintf(stderr,"no egl\n");return 1;}
  eglBindAPI(EGL_OPENGL_ES_API);
  EGLint ca[]={EGL_CONTEXT_MAJOR_VERSION,3,EGL_CONTEXT_MINOR_VERSION,separable?1:0,EGL_NONE};
  EGLContext c = eglCreateContext(d, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ca);
  if(!eglMakeCurrent(d,EGL_NO_SURFACE,EGL_NO_SURFACE,c)){fprintf(stderr,"no ctx\n");return 1;}
  printf("renderer: %s\n", glGetString(GL_RENDERER));
  GLuint fb, rb; glGenFramebuffers(1,&fb); glBindFramebuffer(GL_FRAMEBUFFER,fb);
  glGenRenderbuffers(1,&rb); glBindRenderbuffer(GL_RENDERBUFFER,rb); glRenderbufferStorage(GL_RENDERBUFFER,GL_RGBA8,64,64);
  glFramebufferRenderbuffer(GL_FRAMEBUFFER,GL_COLOR_ATTACHMENT0,GL_RENDERBUFFER,rb);
  float v[]={-1,-1, 1,-1, 0,1}; GLuint b; glGenBuffers(1,&b); glBindBuffer(GL_ARRAY_BUFFER,b); glBufferData(GL_ARRAY_BUFFER,sizeof v,v,GL_STATIC_DRAW);
  glViewport(0,0,64,64); glClearColor(0,0,0,1); glClear(GL_COLOR_BUFFER_BIT);
  uint64_t sum=0; unsigned char px[64*64*4];
  for(int i=0;i<programs;i++){
    char fs[256]; snprintf(fs,sizeof fs,separable?fs_sep_t:fs_t,(float)i/programs);
    if(separable){
      GLuint v=stage_program(GL_VERTEX_SHADER,vs_sep), f=stage_program(GL_FRAGMENT_SHADER,fs), pp;
      glGenProgramPipelines(1,&pp); glUseProgramStages(pp,GL_VERTEX_SHADER_BIT,v); glUseProgramStages(pp,GL_FRAGMENT_SHADER_BIT,f);
      glBindProgramPipeline(pp); glProgramUniform1f(v,glGetUniformLocation(v,"s"), 1.0f - (float)i/(2*programs));
    } else {
    GLuint p=glCreateProgram(); glAttachShader(p,sh(GL_VERTEX_SHADER,vs)); glAttachShader(p,sh(GL_FRAGMENT_SHADER,fs)); glBindAttribLocation(p,0,"p"); glLinkProgram(p);
    glUseProgram(p); glUniform1f(glGetUniformLocation(p,"s"), 1.0f - (float)i/(2*programs));
    }
    glEnableVertexAttribArray(0); glVertexAttribPointer(0,2,GL_FLOAT,0,0,0);
    if(i%2) glEnable(GL_BLEND), glBlendFunc(GL_ONE,GL_ONE); else glDisable(GL_BLEND);
    glDrawArrays(GL_TRIANGLES,0,3);
  }
  glReadPixels(0,0,64,64,GL_RGBA,GL_UNSIGNED_BYTE,px);
  for(int i=0;i<64*64*4;i++) sum = sum*31 + px[i];
  printf("pixels: %016llx\n",(unsigned long long)sum);
  return 0;
}
