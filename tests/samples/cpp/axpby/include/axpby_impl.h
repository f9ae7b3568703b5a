#pragma once
#include <cstdint>

void axpby_impl(const float* x, const float* y, float* out, std::int64_t n, float alpha);
