// Clamp n values in place.
#include <cstdint>

extern "C" void clamp_inplace_cpu(float* x, int64_t n, float low, float high) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        x[i] = v < low ? low : (v > high ? high : v);
    }
}
