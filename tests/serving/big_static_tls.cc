// A shared library with a large static TLS segment, standing in for cuBLASLt
// (94 KB of TLS) in tests/serving/static_tls_test.cc. Loaded at startup (here
// through LD_PRELOAD), its TLS block is part of every thread's static TLS,
// which glibc carves out of the thread's stack: a thread created with a
// small fixed stack (as civetweb did) then fails with EINVAL.
extern "C" {
__attribute__((used, visibility("default"))) thread_local char argen_big_static_tls[256 * 1024];

__attribute__((visibility("default"))) char* argen_big_static_tls_address() { return argen_big_static_tls; }
}
