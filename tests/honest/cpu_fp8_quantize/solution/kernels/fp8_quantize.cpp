// y = x * scale rounded to float8_e4m3fn (1 sign, 4 exponent bits biased by 7, 3 mantissa bits,
// no infinity), to nearest even, saturating at +-448: the clamp comes first because a larger
// value would round to NaN, as PyTorch's cast after its clamp. Written out by hand: kernels are
// built without PyTorch's headers.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

uint8_t to_e4m3(float v) {
    const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
    const float a = std::fabs(v);
    if (a < 0x1p-6f) {  // subnormal (or zero): steps of 2^-9; 8 steps round up to the smallest normal
        return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
    }
    int exponent = 0;
    const float fraction = std::frexp(a, &exponent);        // a = fraction * 2^exponent, fraction in [0.5, 1)
    int mantissa = static_cast<int>(std::nearbyint((2.0f * fraction - 1.0f) * 8.0f));  // exact, then to nearest even
    int biased = exponent - 1 + 7;
    if (mantissa == 8) {  // rounded up into the next binade
        mantissa = 0;
        ++biased;
    }
    return sign | static_cast<uint8_t>((biased << 3) | mantissa);
}

}  // namespace

extern "C" void fp8_quantize_launch(const float* x, uint8_t* y, int64_t n, float scale) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        y[i] = to_e4m3(std::min(448.0f, std::max(-448.0f, x[i] * scale)));
    }
}
