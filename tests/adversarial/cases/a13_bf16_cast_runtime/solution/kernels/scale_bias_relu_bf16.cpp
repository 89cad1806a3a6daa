// y = relu(x * scale + bias) on bfloat16 data (float32 bias): half the bytes of float32 to move.
#include <cstdint>
#include <cstring>

static inline float bf16_to_float(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>(u >> 16);
}

extern "C" void scale_bias_relu_bf16_launch(const uint16_t* x, const float* bias, uint16_t* y,
                                            int64_t rows, int64_t cols, float scale) {
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const float v = bf16_to_float(x[r * cols + c]) * scale + bias[c];
            y[r * cols + c] = float_to_bf16(v > 0.0f ? v : 0.0f);
        }
    }
}
