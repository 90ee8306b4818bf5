// Tiled rasteriser for Track Overlay display lists (the GPU twin of cpu_spans.py).
//
// Primitives (polyline segments and boxes) are binned into TILE x TILE pixel
// tiles on the GPU: bin_tiles counts (pass 0) and fills (pass 1) one key
// (tile << prim_bits | primitive) per overlapped tile; the keys are sorted so each
// tile's primitives come in drawing order. raster_tiles then runs one block
// per tile and one thread per pixel: it evaluates the coverage model
// (docs/architecture.md) for the tile's primitives in order and composites "over".
//
// Segments of one polyline are consecutive primitives: their distances are
// min-reduced before the polyline's single contribution is composited.

#define TILE 16
#define EPS 1e-6f

// Device pointers only (passed as a pointer to a packed array of addresses).
struct Scene {
    // Primitives in drawing order: kind 0 = segment, 1 = box; ref indexes its table.
    const int* prim_kind;
    const int* prim_ref;
    // Segments.
    const float2* seg_p0;
    const float2* seg_p1;
    const int* seg_polyline;   // -1 marks an unused slot
    const float* seg_arc0;
    // Polylines.
    const float* line_width;
    const float4* line_color0;
    const float4* line_color1;
    const float2* line_dash;
    const int* line_dash_round;
    const float* line_arc_total;
    // Boxes.
    const float2* box_center;
    const float2* box_half;
    const float* box_radius;
    const float* box_stroke;
    const float4* box_stroke_color;
    const float4* box_fill_color;
    const float* box_bracket;
};

__device__ __forceinline__ float clamp01(float v) { return fminf(fmaxf(v, 0.0f), 1.0f); }

// Distance from a pixel centre to segment ab, measured along and across the unit
// tangent ((1, 0) for a dot), so it is exactly 0 on axis-aligned lines; *arc_out is
// the clamped position along the segment.
__device__ __forceinline__ float segment_distance(float px, float py, float2 a, float2 b, float* arc_out) {
    float dx = b.x - a.x, dy = b.y - a.y;
    float length = sqrtf(dx * dx + dy * dy);
    float tx = length > EPS ? dx / length : 1.0f, ty = length > EPS ? dy / length : 0.0f;
    float qx = px - a.x, qy = py - a.y;
    float along = qx * tx + qy * ty, across = qx * ty - qy * tx;
    float overhang = fmaxf(fmaxf(-along, along - length), 0.0f);
    *arc_out = fminf(fmaxf(along, 0.0f), length);
    return sqrtf(across * across + overhang * overhang);
}

// Conservative test: can any pixel of the tile be covered by the primitive?
__device__ bool touches_tile(const Scene& s, int p, float tx0, float ty0) {
    float cx = tx0 + 0.5f * TILE, cy = ty0 + 0.5f * TILE;
    int ref = s.prim_ref[p];
    if (s.prim_kind[p] == 0) {
        float along;
        float reach = 0.5f * s.line_width[s.seg_polyline[ref]] + 0.5f + 0.70711f * TILE;
        return segment_distance(cx, cy, s.seg_p0[ref], s.seg_p1[ref], &along) <= reach;
    }
    float2 c = s.box_center[ref], h = s.box_half[ref];
    float margin = 0.5f * s.box_stroke[ref] + 0.5f;
    float ox = fmaxf(fabsf(cx - c.x) - h.x - 0.5f * TILE, 0.0f);
    float oy = fmaxf(fabsf(cy - c.y) - h.y - 0.5f * TILE, 0.0f);
    return ox <= margin && oy <= margin;
}

// Pixel-space bounding box of a primitive (before clipping to the frame).
__device__ void prim_bounds(const Scene& s, int p, float* x0, float* y0, float* x1, float* y1) {
    int ref = s.prim_ref[p];
    if (s.prim_kind[p] == 0) {
        float r = 0.5f * s.line_width[s.seg_polyline[ref]] + 0.5f;
        float2 a = s.seg_p0[ref], b = s.seg_p1[ref];
        *x0 = fminf(a.x, b.x) - r; *x1 = fmaxf(a.x, b.x) + r;
        *y0 = fminf(a.y, b.y) - r; *y1 = fmaxf(a.y, b.y) + r;
    } else {
        float2 c = s.box_center[ref], h = s.box_half[ref];
        float m = 0.5f * s.box_stroke[ref] + 0.5f;
        *x0 = c.x - h.x - m; *x1 = c.x + h.x + m;
        *y0 = c.y - h.y - m; *y1 = c.y + h.y + m;
    }
}

// pass 0: count tiles per primitive (prim_tiles) and primitives per tile (tile_count).
// pass 1: write key (tile << prim_bits | p) at prim_end[p] - prim_tiles[p] + j, in the
// same tile order as pass 0; keys past `capacity` are dropped (the caller checks).
template <typename Key>
__global__ void bin_tiles(const Scene* scene, int prim_count, int tiles_x, int tiles_y, int pass, int prim_bits,
                          int* prim_tiles, int* tile_count, const long long* prim_end, Key* keys,
                          long long capacity) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= prim_count) return;
    const Scene s = *scene;
    bool unused = s.prim_kind[p] == 0 ? s.seg_polyline[s.prim_ref[p]] < 0 : s.box_half[s.prim_ref[p]].x < 0.0f;
    if (unused) {
        if (pass == 0) prim_tiles[p] = 0;
        return;
    }
    float x0, y0, x1, y1;
    prim_bounds(s, p, &x0, &y0, &x1, &y1);
    // Tiles whose pixel centres can fall inside [x0, x1] x [y0, y1].
    int ta = max((int)floorf((x0 - 0.5f) / TILE), 0), tb = min((int)floorf((x1 - 0.5f) / TILE), tiles_x - 1);
    int tc = max((int)floorf((y0 - 0.5f) / TILE), 0), td = min((int)floorf((y1 - 0.5f) / TILE), tiles_y - 1);
    long long slot = pass ? prim_end[p] - prim_tiles[p] : 0;
    int found = 0;
    for (int ty = tc; ty <= td; ++ty) {
        for (int tx = ta; tx <= tb; ++tx) {
            if (!touches_tile(s, p, (float)(tx * TILE), (float)(ty * TILE))) continue;
            int tile = ty * tiles_x + tx;
            if (pass == 0) {
                atomicAdd(&tile_count[tile], 1);
            } else if (slot + found < capacity) {
                keys[slot + found] = ((Key)tile << prim_bits) | (Key)p;
            }
            ++found;
        }
    }
    if (pass == 0) prim_tiles[p] = found;
}

// Inclusive prefix sums of two int arrays in one launch (block 0: a, block 1: b),
// each by one block: per-thread chunk sums, a block scan of those, then the chunks.
extern "C" __global__ void scan_pair(const int* a, long long* a_out, int na, const int* b, long long* b_out, int nb) {
    __shared__ long long partial[1024];
    const int* in = blockIdx.x == 0 ? a : b;
    long long* out = blockIdx.x == 0 ? a_out : b_out;
    int n = blockIdx.x == 0 ? na : nb;
    int chunk = (n + blockDim.x - 1) / blockDim.x;
    int begin = min(n, threadIdx.x * chunk), end = min(n, begin + chunk);
    long long sum = 0;
    for (int i = begin; i < end; ++i) sum += in[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {  // Hillis-Steele scan of the chunk sums
        long long add = threadIdx.x >= offset ? partial[threadIdx.x - offset] : 0;
        __syncthreads();
        partial[threadIdx.x] += add;
        __syncthreads();
    }
    long long running = partial[threadIdx.x] - sum;
    for (int i = begin; i < end; ++i) {
        running += in[i];
        out[i] = running;
    }
}

__device__ __forceinline__ float dash_distance(float arc, float on, float off) {
    float period = fmaxf(on + off, EPS);
    float phase = fmodf(arc, period);
    if (phase < 0.0f) phase += period;
    return phase <= on ? -fminf(phase, on - phase) : fminf(phase - on, period - phase);
}

__device__ __forceinline__ void over(float4& acc, float r, float g, float b, float a) {
    float keep = 1.0f - a;
    acc.x = r + keep * acc.x; acc.y = g + keep * acc.y; acc.z = b + keep * acc.z; acc.w = a + keep * acc.w;
}

// Composite the pending polyline (nearest distance `dist`, arc length `arc`) into acc.
__device__ void flush_polyline(const Scene& s, int line, float dist, float arc, float4& acc) {
    if (line < 0) return;
    float half = 0.5f * s.line_width[line];
    float outside = dist - half;
    float2 dash = s.line_dash[line];
    if (dash.y > 0.0f) {
        float along = dash_distance(arc, dash.x, dash.y);
        outside = s.line_dash_round[line] ? hypotf(dist, fmaxf(along, 0.0f)) - half : fmaxf(outside, along);
    }
    float coverage = clamp01(0.5f - outside);
    if (coverage <= 0.0f) return;
    float4 c0 = s.line_color0[line], c1 = s.line_color1[line];
    float mix = arc / fmaxf(s.line_arc_total[line], EPS);
    float r = c0.x + (c1.x - c0.x) * mix, g = c0.y + (c1.y - c0.y) * mix;
    float b = c0.z + (c1.z - c0.z) * mix, a = (c0.w + (c1.w - c0.w) * mix) * coverage;
    over(acc, r * a, g * a, b * a, a);
}

__device__ void composite_box(const Scene& s, int box, float px, float py, float4& acc) {
    float2 c = s.box_center[box], h = s.box_half[box];
    float radius = s.box_radius[box];
    float ox = fabsf(px - c.x), oy = fabsf(py - c.y);
    float qx = ox - (h.x - radius), qy = oy - (h.y - radius);
    float outer = sqrtf(fmaxf(qx, 0.0f) * fmaxf(qx, 0.0f) + fmaxf(qy, 0.0f) * fmaxf(qy, 0.0f));
    float sd = outer + fminf(fmaxf(qx, qy), 0.0f) - radius;
    float half_stroke = 0.5f * s.box_stroke[box];
    float stroke = half_stroke > 0.0f ? clamp01(0.5f - (fabsf(sd) - half_stroke)) : 0.0f;
    float bracket = s.box_bracket[box];
    if (bracket > 0.0f) stroke *= clamp01(0.5f + ox - (h.x - bracket)) * clamp01(0.5f + oy - (h.y - bracket));
    float4 sc = s.box_stroke_color[box], fc = s.box_fill_color[box];
    float stroke_alpha = stroke * sc.w;
    float under = (1.0f - stroke_alpha) * clamp01(0.5f - sd) * fc.w;
    float a = stroke_alpha + under;
    if (a <= 0.0f) return;
    over(acc, sc.x * stroke_alpha + fc.x * under, sc.y * stroke_alpha + fc.y * under,
         sc.z * stroke_alpha + fc.z * under, a);
}

// The layer of one pixel: the tile's primitives, composited in order.
template <typename Key>
__device__ float4 shade_pixel(const Scene& s, const Key* keys, Key prim_mask, long long first, int count,
                              float px, float py, int* shared_prims) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int line = -1;
    float dist = 0.0f, arc = 0.0f;
    int lane = threadIdx.y * TILE + threadIdx.x;
    for (int base = 0; base < count; base += TILE * TILE) {
        __syncthreads();
        if (base + lane < count) shared_prims[lane] = (int)(keys[first + base + lane] & prim_mask);
        __syncthreads();
        int chunk = min(count - base, TILE * TILE);
        for (int i = 0; i < chunk; ++i) {
            int p = shared_prims[i];
            int ref = s.prim_ref[p];
            if (s.prim_kind[p] == 0) {
                int owner = s.seg_polyline[ref];
                float along;
                float d = segment_distance(px, py, s.seg_p0[ref], s.seg_p1[ref], &along);
                if (owner != line) {
                    flush_polyline(s, line, dist, arc, acc);
                    line = owner;
                    dist = 3.0e38f;
                }
                if (d < dist) {
                    dist = d;
                    arc = s.seg_arc0[ref] + along;
                }
            } else {
                flush_polyline(s, line, dist, arc, acc);
                line = -1;
                composite_box(s, ref, px, py, acc);
            }
        }
    }
    flush_polyline(s, line, dist, arc, acc);
    return acc;
}

__device__ __forceinline__ float load_channel(const unsigned char* f, long long i) { return (float)f[i]; }
__device__ __forceinline__ float load_channel(const float* f, long long i) { return f[i]; }
__device__ __forceinline__ void store_channel(unsigned char* f, long long i, float v) {
    f[i] = (unsigned char)fminf(fmaxf(v + 0.5f, 0.0f), 255.0f);
}
__device__ __forceinline__ void store_channel(float* f, long long i, float v) { f[i] = v; }
__device__ __forceinline__ float channel_scale(const unsigned char*) { return 255.0f; }
__device__ __forceinline__ float channel_scale(const float*) { return 1.0f; }

// One block per tile: composite the layer over `frame` into `out`.
template <typename T, typename Key>
__global__ void composite_tiles(const Scene* scene, const Key* keys, long long capacity, Key prim_mask,
                                const long long* tile_end, const int* tile_count, int tiles_x, const T* frame,
                                T* out, int width, int height) {
    __shared__ int shared_prims[TILE * TILE];
    const Scene s = *scene;
    int tile = blockIdx.x;
    int x = (tile % tiles_x) * TILE + threadIdx.x, y = (tile / tiles_x) * TILE + threadIdx.y;
    int count = tile_end[tile] <= capacity ? tile_count[tile] : 0;  // overflow: the frame is redone
    float4 acc = shade_pixel(s, keys, prim_mask, tile_end[tile] - count, count, x + 0.5f, y + 0.5f, shared_prims);
    if (x >= width || y >= height) return;
    long long i = 3ll * ((long long)y * width + x);
    float scale = channel_scale(frame), keep = 1.0f - acc.w;
    store_channel(out, i, acc.x * scale + keep * load_channel(frame, i));
    store_channel(out, i + 1, acc.y * scale + keep * load_channel(frame, i + 1));
    store_channel(out, i + 2, acc.z * scale + keep * load_channel(frame, i + 2));
}

// One block per touched tile (tile_list): premultiplied RGBA of the layer into a
// compact [touched tiles * TILE * TILE] buffer (pixels past the frame edge included).
template <typename Key>
__global__ void layer_tiles(const Scene* scene, const Key* keys, long long capacity, Key prim_mask,
                            const long long* tile_end, const int* tile_count, const int* tile_list, int tiles_x,
                            float4* layer) {
    __shared__ int shared_prims[TILE * TILE];
    const Scene s = *scene;
    int tile = tile_list[blockIdx.x];
    int x = (tile % tiles_x) * TILE + threadIdx.x, y = (tile / tiles_x) * TILE + threadIdx.y;
    int count = tile_end[tile] <= capacity ? tile_count[tile] : 0;  // overflow: the layer is redone
    layer[(long long)blockIdx.x * TILE * TILE + threadIdx.y * TILE + threadIdx.x] =
        shade_pixel(s, keys, prim_mask, tile_end[tile] - count, count, x + 0.5f, y + 0.5f, shared_prims);
}
