// LayerNorm over the trailing `hidden` elements of a row-major (rows, hidden) tensor:
// y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps), var the biased variance.
//
// KernelBench's problem normalises over (64, 256, 256): 16 rows of 4,194,304 elements each. One
// block per row would use 16 of the GPU's SMs, so each row is split into chunks and the work is
// done in three launches:
//
//   1. chunk_stats: one block per (chunk, row). The block's 4096 elements are loaded once into
//      registers (float4 loads where the row allows them), and the chunk's exact mean and sum of
//      squared deviations (M2) come from a two-pass reduction over those registers.
//   2. row_stats: one block per row merges the chunks' (count, mean, M2) with Chan's parallel
//      formula in double precision, and writes the row's mean and rstd.
//   3. normalize: each thread owns one column (a float4 of columns) and walks a group of rows,
//      so weight and bias are read once per group rather than once per row.
//
// Memory traffic: x is read twice and y written once (stage 2 touches a few KiB).
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kItems = 16;                        // floats per thread per chunk
constexpr int64_t kChunk = int64_t(kThreads) * kItems;  // 4096 elements per chunk
constexpr int kRowsPerBlock = 16;                 // rows walked by one normalize block
constexpr int64_t kMaxGridY = 65535;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// The block-wide sum, returned to every thread; `scratch` holds one float per warp.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += scratch[w];
    __syncthreads();  // scratch is reused by the next reduction
    return total;
}

// Stage 1. kVec: rows are read as float4 (hidden % 4 == 0 and x 16-byte aligned); otherwise as
// floats. Either way a thread's loads are strided by the block size, so every warp load is
// coalesced. stats[row * chunks + chunk] = (chunk mean, chunk M2).
template <bool kVec>
__global__ void __launch_bounds__(kThreads) chunk_stats(const float* __restrict__ x, float2* __restrict__ stats,
                                                        int64_t rows, int64_t hidden, int64_t chunks) {
    __shared__ float scratch[kWarps];
    const int64_t chunk = blockIdx.x;
    const int64_t start = chunk * kChunk;
    const int64_t remaining = hidden - start;
    const int count = static_cast<int>(remaining < kChunk ? remaining : kChunk);
    const float inv_count = 1.0f / static_cast<float>(count);
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float* in = x + row * hidden + start;
        float v[kItems];
        bool valid[kItems];
        if (kVec) {
            const float4* in4 = reinterpret_cast<const float4*>(in);
#pragma unroll
            for (int j = 0; j < kItems / 4; ++j) {
                const int e = (j * kThreads + threadIdx.x) * 4;  // element offset in the chunk
                const bool ok = e < count;                        // count is a multiple of 4 here
                const float4 q = ok ? __ldg(&in4[j * kThreads + threadIdx.x]) : make_float4(0.f, 0.f, 0.f, 0.f);
                v[4 * j] = q.x;
                v[4 * j + 1] = q.y;
                v[4 * j + 2] = q.z;
                v[4 * j + 3] = q.w;
                valid[4 * j] = valid[4 * j + 1] = valid[4 * j + 2] = valid[4 * j + 3] = ok;
            }
        } else {
#pragma unroll
            for (int j = 0; j < kItems; ++j) {
                const int e = j * kThreads + threadIdx.x;
                valid[j] = e < count;
                v[j] = valid[j] ? __ldg(&in[e]) : 0.0f;
            }
        }
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < kItems; ++j) s += v[j];  // invalid slots hold 0
        const float mean = block_sum(s, scratch) * inv_count;
        float sq = 0.0f;
#pragma unroll
        for (int j = 0; j < kItems; ++j) {
            const float d = valid[j] ? v[j] - mean : 0.0f;
            sq += d * d;
        }
        const float m2 = block_sum(sq, scratch);
        if (threadIdx.x == 0) stats[row * chunks + chunk] = make_float2(mean, m2);
    }
}

// Chan et al.'s merge of (n, mean, M2) with another partition's.
__device__ __forceinline__ void merge(double& n, double& mean, double& m2, double nb, double mean_b, double m2_b) {
    if (nb == 0.0) return;
    const double total = n + nb;
    const double delta = mean_b - mean;
    mean += delta * (nb / total);
    m2 += m2_b + delta * delta * (n * nb / total);
    n = total;
}

// Stage 2: row_stats[row] = (mean, rstd) from the row's chunk statistics.
__global__ void __launch_bounds__(kThreads) row_stats(const float2* __restrict__ stats, float2* __restrict__ out,
                                                      int64_t rows, int64_t hidden, int64_t chunks, float eps) {
    __shared__ double sh_n[kWarps], sh_mean[kWarps], sh_m2[kWarps];
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        double n = 0.0, mean = 0.0, m2 = 0.0;
        for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
            const int64_t remaining = hidden - c * kChunk;
            const double nb = static_cast<double>(remaining < kChunk ? remaining : kChunk);
            const float2 s = stats[row * chunks + c];
            merge(n, mean, m2, nb, s.x, s.y);
        }
#pragma unroll
        for (int offset = kWarp / 2; offset > 0; offset /= 2) {
            const double nb = __shfl_xor_sync(0xffffffffu, n, offset);
            const double mb = __shfl_xor_sync(0xffffffffu, mean, offset);
            const double qb = __shfl_xor_sync(0xffffffffu, m2, offset);
            merge(n, mean, m2, nb, mb, qb);
        }
        if (lane == 0) {
            sh_n[warp] = n;
            sh_mean[warp] = mean;
            sh_m2[warp] = m2;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double tn = 0.0, tmean = 0.0, tm2 = 0.0;
            for (int w = 0; w < kWarps; ++w) merge(tn, tmean, tm2, sh_n[w], sh_mean[w], sh_m2[w]);
            const double var = tn > 0.0 ? tm2 / tn : 0.0;
            out[row] = make_float2(static_cast<float>(tmean),
                                   static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps))));
        }
        __syncthreads();  // the shared slots are reused for the next row
    }
}

__device__ __forceinline__ float norm1(float v, float mean, float rstd, float w, float b) {
    return (v - mean) * rstd * w + b;
}

// Stage 3. Thread t of block (bx, by) owns column unit bx * kThreads + t (a float4 when kVec) and
// rows [by * kRowsPerBlock, by * kRowsPerBlock + kRowsPerBlock), then the next group of rows
// gridDim.y groups on.
template <bool kVec>
__global__ void __launch_bounds__(kThreads) normalize(const float* __restrict__ x, const float* __restrict__ weight,
                                                      const float* __restrict__ bias,
                                                      const float2* __restrict__ row_stat, float* __restrict__ y,
                                                      int64_t rows, int64_t units) {
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (c >= units) return;
    if (kVec) {
        const float4 w = __ldg(reinterpret_cast<const float4*>(weight) + c);
        const float4 b = __ldg(reinterpret_cast<const float4*>(bias) + c);
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t base = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock; base < rows;
             base += static_cast<int64_t>(gridDim.y) * kRowsPerBlock) {
            const int64_t end = base + kRowsPerBlock < rows ? base + kRowsPerBlock : rows;
#pragma unroll 4
            for (int64_t r = base; r < end; ++r) {
                const float2 s = row_stat[r];
                const float4 v = __ldg(&x4[r * units + c]);
                float4 o;
                o.x = norm1(v.x, s.x, s.y, w.x, b.x);
                o.y = norm1(v.y, s.x, s.y, w.y, b.y);
                o.z = norm1(v.z, s.x, s.y, w.z, b.z);
                o.w = norm1(v.w, s.x, s.y, w.w, b.w);
                y4[r * units + c] = o;
            }
        }
    } else {
        const float w = __ldg(&weight[c]);
        const float b = __ldg(&bias[c]);
        for (int64_t base = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock; base < rows;
             base += static_cast<int64_t>(gridDim.y) * kRowsPerBlock) {
            const int64_t end = base + kRowsPerBlock < rows ? base + kRowsPerBlock : rows;
#pragma unroll 4
            for (int64_t r = base; r < end; ++r) {
                const float2 s = row_stat[r];
                y[r * units + c] = norm1(__ldg(&x[r * units + c]), s.x, s.y, w, b);
            }
        }
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

unsigned grid_y(int64_t n) { return static_cast<unsigned>(n < kMaxGridY ? n : kMaxGridY); }

}  // namespace

// Scratch sizes the binding allocates: chunk statistics (rows * chunks float2) and row
// statistics (rows float2).
extern "C" int64_t layernorm_chunks(int64_t hidden) { return (hidden + kChunk - 1) / kChunk; }

extern "C" int layernorm_launch(const float* x, const float* weight, const float* bias, float* y,
                                float* chunk_scratch, float* row_scratch, int64_t rows, int64_t hidden, float eps,
                                cudaStream_t stream) {
    if (rows == 0 || hidden == 0) return cudaSuccess;
    const int64_t chunks = layernorm_chunks(hidden);
    float2* stats = reinterpret_cast<float2*>(chunk_scratch);
    float2* row_stat = reinterpret_cast<float2*>(row_scratch);
    const bool vec = hidden % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(weight) && aligned16(bias);

    const dim3 stats_grid(static_cast<unsigned>(chunks), grid_y(rows));
    if (vec) {
        chunk_stats<true><<<stats_grid, kThreads, 0, stream>>>(x, stats, rows, hidden, chunks);
    } else {
        chunk_stats<false><<<stats_grid, kThreads, 0, stream>>>(x, stats, rows, hidden, chunks);
    }
    const int64_t row_blocks = rows < 65536 ? rows : 65536;
    row_stats<<<static_cast<unsigned>(row_blocks), kThreads, 0, stream>>>(stats, row_stat, rows, hidden, chunks, eps);

    const int64_t units = vec ? hidden / 4 : hidden;
    const dim3 norm_grid(static_cast<unsigned>((units + kThreads - 1) / kThreads),
                         grid_y((rows + kRowsPerBlock - 1) / kRowsPerBlock));
    if (vec) {
        normalize<true><<<norm_grid, kThreads, 0, stream>>>(x, weight, bias, row_stat, y, rows, units);
    } else {
        normalize<false><<<norm_grid, kThreads, 0, stream>>>(x, weight, bias, row_stat, y, rows, units);
    }
    return cudaGetLastError();
}
