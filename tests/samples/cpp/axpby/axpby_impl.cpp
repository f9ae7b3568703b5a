// Plain C++ (no torch headers): compiled because it sits at the top level.
#include "include/axpby_impl.h"

void axpby_impl(const float* x, const float* y, float* out, std::int64_t n, float alpha) {
    for (std::int64_t i = 0; i < n; ++i) {
        out[i] = alpha * x[i] + y[i];
    }
}
