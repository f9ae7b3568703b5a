// Nested sources are not compiled (upstream compiles top-level files only); if this file
// were compiled, the build would fail here.
#error "src/kernel.cpp must not be compiled: only top-level sources are"
