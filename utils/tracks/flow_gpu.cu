// Pyramidal Lucas-Kanade point tracking on the GPU, computed as OpenCV's calcOpticalFlowPyrLK computes it
// (Bouguet's method, with OpenCV's fixed-point sampling), so GPU and CPU tracks agree to float rounding.
//
// A pyramid is one uint8 buffer of levels (level 0 first, each level width * height bytes) and one short2 buffer
// of Scharr derivatives (x, y) per level at the same offsets. Images read outside a level mirror it (border
// reflect-101), derivatives read outside are 0, as in OpenCV.

constexpr int W_BITS = 14;  // fixed-point bits of the bilinear weights
constexpr float FLT_SCALE = 1.0f / (1 << 20);

__device__ __forceinline__ int mirror(int i, int n) {  // reflect-101 (repeated where a window overhangs a tiny level)
    if (n == 1) return 0;
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * n - 2 - i;
    return i;
}

__device__ __forceinline__ int descale(int value, int bits) { return (value + (1 << (bits - 1))) >> bits; }

// One level down: 5x5 binomial blur [1 4 6 4 1] of every other pixel, rounded (OpenCV's pyrDown on uint8).
extern "C" __global__ void pyramid_down(const unsigned char* __restrict__ source, int width, int height,
                                        unsigned char* __restrict__ target, int target_width, int target_height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= target_width || y >= target_height) return;
    const int taps[5] = {1, 4, 6, 4, 1};
    int sum = 0;
    for (int j = 0; j < 5; ++j) {
        const unsigned char* row = source + mirror(2 * y + j - 2, height) * width;
        int line = 0;
        for (int i = 0; i < 5; ++i) line += taps[i] * row[mirror(2 * x + i - 2, width)];
        sum += taps[j] * line;
    }
    target[y * target_width + x] = (unsigned char)((sum + 128) >> 8);
}

// Scharr derivatives (x, y), unscaled: [3 10 3] across the difference, edges mirrored (OpenCV's calcSharrDeriv).
extern "C" __global__ void scharr(const unsigned char* __restrict__ image, int width, int height,
                                  short2* __restrict__ derivative) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const unsigned char* above = image + mirror(y - 1, height) * width;
    const unsigned char* here = image + y * width;
    const unsigned char* below = image + mirror(y + 1, height) * width;
    const int left = mirror(x - 1, width), right = mirror(x + 1, width);
    const int smooth_left = 3 * (above[left] + below[left]) + 10 * here[left];
    const int smooth_right = 3 * (above[right] + below[right]) + 10 * here[right];
    const int dy_left = below[left] - above[left], dy_right = below[right] - above[right];
    const int dy_here = below[x] - above[x];
    derivative[y * width + x] = make_short2((short)(smooth_right - smooth_left),
                                            (short)(3 * (dy_left + dy_right) + 10 * dy_here));
}

struct Weights {
    int w00, w01, w10, w11;
};

__device__ __forceinline__ Weights bilinear(float a, float b) {
    Weights w;
    w.w00 = __float2int_rn((1.f - a) * (1.f - b) * (1 << W_BITS));
    w.w01 = __float2int_rn(a * (1.f - b) * (1 << W_BITS));
    w.w10 = __float2int_rn((1.f - a) * b * (1 << W_BITS));
    w.w11 = (1 << W_BITS) - w.w00 - w.w01 - w.w10;
    return w;
}

// Image value at (x, y) x 32, bilinear in fixed point, the level mirrored beyond its edges.
__device__ __forceinline__ int sample_image(const unsigned char* level, int width, int height, int x, int y,
                                            Weights w) {
    const unsigned char* row0 = level + mirror(y, height) * width;
    const unsigned char* row1 = level + mirror(y + 1, height) * width;
    const int x0 = mirror(x, width), x1 = mirror(x + 1, width);
    return descale(row0[x0] * w.w00 + row0[x1] * w.w01 + row1[x0] * w.w10 + row1[x1] * w.w11, W_BITS - 5);
}

__device__ __forceinline__ short2 derivative_at(const short2* level, int width, int height, int x, int y) {
    return (x < 0 || y < 0 || x >= width || y >= height) ? make_short2(0, 0) : level[y * width + x];
}

constexpr int LANES = 32;  // one warp follows one point, each lane a share of the patch

// The sum over the warp, in every lane (integers: the same whatever the order).
__device__ __forceinline__ long long warp_total(long long value) {
    for (int offset = LANES / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    return value;
}

// Follow each of the `*count` points from pyramid `from` (with its derivatives) into pyramid `into`, starting
// at `start`: one warp a point, coarse to fine, each level until a step is shorter than `epsilon` or after
// `max_iterations`. `found` is 1 where the point was followed (OpenCV's status): not where the patch is flatter
// than `min_eigen` or the point leaves the frame. Sums are exact integers, so every lane takes the same steps.
// The count is read on the GPU, so one captured graph serves every count up to its grid's.
template <int WINDOW>
__global__ void follow_points(const unsigned char* __restrict__ from, const short2* __restrict__ from_derivative,
                              const unsigned char* __restrict__ into, const int* __restrict__ level_offset,
                              const int* __restrict__ level_width, const int* __restrict__ level_height,
                              int top_level, const float2* __restrict__ points, const float2* __restrict__ start,
                              const int* __restrict__ count, int max_iterations, double epsilon, float min_eigen_value,
                              float2* __restrict__ followed, unsigned char* __restrict__ found) {
    constexpr int AREA = WINDOW * WINDOW, PER_LANE = (AREA + LANES - 1) / LANES;
    const int index = (blockIdx.x * blockDim.x + threadIdx.x) / LANES, lane = threadIdx.x % LANES;
    if (index >= *count) return;  // whole warps: a warp is one point
    const float half_window = (WINDOW - 1) * 0.5f;
    short window_image[PER_LANE];  // this lane's pixels of the patch: k = lane + i * LANES
    short2 window_derivative[PER_LANE];
    unsigned char ok = 1;
    float2 next = start[index];
    for (int level = top_level; level >= 0; --level) {
        const int width = level_width[level], height = level_height[level], offset = level_offset[level];
        const float scale = 1.0f / (1 << level);
        float2 previous = make_float2(points[index].x * scale - half_window, points[index].y * scale - half_window);
        next = level == top_level ? make_float2(next.x * scale, next.y * scale) : make_float2(next.x * 2.f, next.y * 2.f);
        const int px = (int)floorf(previous.x), py = (int)floorf(previous.y);
        if (px < -WINDOW || px >= width || py < -WINDOW || py >= height) {
            if (level == 0) ok = 0;
            continue;
        }
        Weights w = bilinear(previous.x - px, previous.y - py);
        const short2* level_derivative = from_derivative + offset;
        long long a11 = 0, a12 = 0, a22 = 0;
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i) {
            const int k = lane + i * LANES;
            if (k >= AREA) continue;
            const int x = px + k % WINDOW, y = py + k / WINDOW;
            window_image[i] = (short)sample_image(from + offset, width, height, x, y, w);
            const short2 d00 = derivative_at(level_derivative, width, height, x, y);
            const short2 d01 = derivative_at(level_derivative, width, height, x + 1, y);
            const short2 d10 = derivative_at(level_derivative, width, height, x, y + 1);
            const short2 d11 = derivative_at(level_derivative, width, height, x + 1, y + 1);
            const int dx = descale(d00.x * w.w00 + d01.x * w.w01 + d10.x * w.w10 + d11.x * w.w11, W_BITS);
            const int dy = descale(d00.y * w.w00 + d01.y * w.w01 + d10.y * w.w10 + d11.y * w.w11, W_BITS);
            window_derivative[i] = make_short2((short)dx, (short)dy);
            a11 += dx * dx;
            a12 += dx * dy;
            a22 += dy * dy;
        }
        const float A11 = warp_total(a11) * FLT_SCALE, A12 = warp_total(a12) * FLT_SCALE;
        const float A22 = warp_total(a22) * FLT_SCALE;
        float D = A11 * A22 - A12 * A12;
        const float min_eigen = (A22 + A11 - sqrtf((A11 - A22) * (A11 - A22) + 4.f * A12 * A12)) / (2 * AREA);
        if (min_eigen < min_eigen_value || D < 1.192092896e-07f) {  // FLT_EPSILON: too flat to follow
            if (level == 0) ok = 0;
            continue;
        }
        D = 1.f / D;
        float2 at = make_float2(next.x - half_window, next.y - half_window), last_step = make_float2(0.f, 0.f);
        for (int iteration = 0; iteration < max_iterations; ++iteration) {
            const int nx = (int)floorf(at.x), ny = (int)floorf(at.y);
            if (nx < -WINDOW || nx >= width || ny < -WINDOW || ny >= height) {
                if (level == 0) ok = 0;
                break;
            }
            w = bilinear(at.x - nx, at.y - ny);
            long long b1 = 0, b2 = 0;
#pragma unroll
            for (int i = 0; i < PER_LANE; ++i) {
                const int k = lane + i * LANES;
                if (k >= AREA) continue;
                const int difference =
                    sample_image(into + offset, width, height, nx + k % WINDOW, ny + k / WINDOW, w) - window_image[i];
                b1 += difference * window_derivative[i].x;
                b2 += difference * window_derivative[i].y;
            }
            const float B1 = warp_total(b1) * FLT_SCALE, B2 = warp_total(b2) * FLT_SCALE;
            const float2 step = make_float2((A12 * B2 - A22 * B1) * D, (A12 * B1 - A11 * B2) * D);
            at.x += step.x;
            at.y += step.y;
            next = make_float2(at.x + half_window, at.y + half_window);
            if ((double)step.x * step.x + (double)step.y * step.y <= epsilon * epsilon) break;
            if (iteration > 0 && fabsf(step.x + last_step.x) < 0.01f && fabsf(step.y + last_step.y) < 0.01f) {
                next.x -= step.x * 0.5f;  // swinging back and forth: settle halfway
                next.y -= step.y * 0.5f;
                break;
            }
            last_step = step;
        }
    }
    if (lane == 0) {
        followed[index] = next;
        found[index] = ok;
    }
}
