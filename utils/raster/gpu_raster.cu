// Tiled rasteriser for Track Overlay display lists (the GPU twin of cpu_spans.py).
//
// A scene holds the primitives (polyline segments, boxes and glyphs) of one or more
// frames, each frame's primitives contiguous and in drawing order. bin_tiles
// gives every primitive one key (tile << prim_bits | primitive) per TILE x TILE
// pixel tile it may touch, claiming key slots with one atomic add per warp; the
// keys are sorted, so each tile's primitives come in drawing order, and
// tile_ranges finds each tile's run of keys. composite_tiles then runs one
// block per tile and one thread per pixel: it evaluates the coverage model
// (docs/architecture.md) for the tile's primitives in order and composites "over".
//
// Segments of one polyline are consecutive primitives: their distances are
// min-reduced before the polyline's single contribution is composited.

#define TILE 16
#define EPS 1e-6f

// Device pointers only (passed as a pointer to a packed array of addresses).
struct Scene {
    // Primitives, frame by frame in drawing order: kind 0 = segment, 1 = box, 2 = glyph; ref indexes its table.
    const int* prim_kind;
    const int* prim_ref;
    const int* prim_frame;
    // Segments.
    const float2* seg_p0;
    const float2* seg_p1;
    const int* seg_polyline;
    const float* seg_arc0;
    const float2* seg_factor0;  // (width, alpha) factors at p0 and p1, interpolated along the segment
    const float2* seg_factor1;
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
    // Glyphs: quads sampling a coverage atlas (uint8 [height, width], row-major).
    const float2* glyph_origin;
    const float2* glyph_size;
    const float2* glyph_texel;
    const float4* glyph_color;
    const int* glyph_atlas;
    const unsigned char* const* atlas_data;
    const int* atlas_width;
    const int* atlas_height;
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

// Half the width of a segment at its wider end (a tapered segment reaches no farther).
__device__ __forceinline__ float segment_half_width(const Scene& s, int ref) {
    return 0.5f * s.line_width[s.seg_polyline[ref]] * fmaxf(s.seg_factor0[ref].x, s.seg_factor1[ref].x);
}

// Whether a pixel centre lies in glyph g's quad (x <= px < x + w, likewise y).
__device__ __forceinline__ bool in_glyph(const Scene& s, int g, float px, float py) {
    float2 o = s.glyph_origin[g], size = s.glyph_size[g];
    return px >= o.x && px < o.x + size.x && py >= o.y && py < o.y + size.y;
}

// Conservative test: can any pixel of the tile be covered by the primitive?
__device__ bool touches_tile(const Scene& s, int p, float tx0, float ty0) {
    float cx = tx0 + 0.5f * TILE, cy = ty0 + 0.5f * TILE;
    int ref = s.prim_ref[p];
    if (s.prim_kind[p] == 2) {  // the quad holds a pixel centre of the tile
        float2 o = s.glyph_origin[ref], size = s.glyph_size[ref];
        return tx0 + (TILE - 0.5f) >= o.x && tx0 + 0.5f < o.x + size.x &&
               ty0 + (TILE - 0.5f) >= o.y && ty0 + 0.5f < o.y + size.y;
    }
    if (s.prim_kind[p] == 0) {
        float along;
        float reach = segment_half_width(s, ref) + 0.5f + 0.70711f * TILE;
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
    if (s.prim_kind[p] == 2) {
        float2 o = s.glyph_origin[ref], size = s.glyph_size[ref];
        *x0 = o.x; *x1 = o.x + size.x;
        *y0 = o.y; *y1 = o.y + size.y;
        return;
    }
    if (s.prim_kind[p] == 0) {
        float r = segment_half_width(s, ref) + 0.5f;
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

// Tiles whose pixel centres can fall inside a primitive's bounds: [*ta, *tb] x [*tc, *td].
__device__ void tile_bounds(const Scene& s, int p, int tiles_x, int tiles_y, int* ta, int* tb, int* tc, int* td) {
    float x0, y0, x1, y1;
    prim_bounds(s, p, &x0, &y0, &x1, &y1);
    *ta = max((int)floorf((x0 - 0.5f) / TILE), 0);
    *tb = min((int)floorf((x1 - 0.5f) / TILE), tiles_x - 1);
    *tc = max((int)floorf((y0 - 0.5f) / TILE), 0);
    *td = min((int)floorf((y1 - 0.5f) / TILE), tiles_y - 1);
}

// One pass over primitives [prim_begin, prim_begin + prim_count) of frames from
// frame_begin on: each counts the tiles it touches, the warp claims its slots with
// one atomic add on `cursor`, and each writes (tile << prim_bits | p - prim_begin),
// the tile numbered across frames. Keys past `capacity` are dropped; `cursor` ends
// at the number of keys needed (the caller grows the buffer and bins again).
// Launch with a multiple of 32 threads per block.
template <typename Key>
__global__ void bin_tiles(const Scene* scene, int prim_begin, int prim_count, int frame_begin, int tiles_x,
                          int tiles_y, int prim_bits, Key* keys, long long capacity,
                          unsigned long long* cursor) {
    const Scene s = *scene;
    int local = blockIdx.x * blockDim.x + threadIdx.x;
    int p = prim_begin + local;
    int ta = 0, tb = -1, tc = 0, td = -1, found = 0;
    if (local < prim_count) {
        tile_bounds(s, p, tiles_x, tiles_y, &ta, &tb, &tc, &td);
        for (int ty = tc; ty <= td; ++ty)
            for (int tx = ta; tx <= tb; ++tx)
                found += touches_tile(s, p, (float)(tx * TILE), (float)(ty * TILE));
    }
    int lane = threadIdx.x & 31, before = found;  // inclusive warp scan of `found`
    for (int step = 1; step < 32; step <<= 1) {
        int add = __shfl_up_sync(0xffffffffu, before, step);
        if (lane >= step) before += add;
    }
    unsigned long long base = 0;
    if (lane == 31 && before > 0) base = atomicAdd(cursor, (unsigned long long)before);
    base = __shfl_sync(0xffffffffu, base, 31);
    if (found == 0) return;
    long long slot = (long long)base + before - found;
    Key tile_base = (Key)(s.prim_frame[p] - frame_begin) * (Key)tiles_x * (Key)tiles_y;
    for (int ty = tc; ty <= td; ++ty) {
        for (int tx = ta; tx <= tb; ++tx) {
            if (!touches_tile(s, p, (float)(tx * TILE), (float)(ty * TILE))) continue;
            if (slot < capacity) keys[slot] = ((tile_base + (Key)(ty * tiles_x + tx)) << prim_bits) | (Key)local;
            ++slot;
        }
    }
}

// Each tile's run [tile_start, tile_end) in the sorted keys (tiles without keys keep 0, 0;
// unused keys, all ones, sort last and name no tile).
template <typename Key>
__global__ void tile_ranges(const Key* keys, long long count, int prim_bits, long long tiles, int* tile_start,
                            int* tile_end) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    Key tile = keys[i] >> prim_bits;
    if (tile >= (Key)tiles) return;
    if (i == 0 || (keys[i - 1] >> prim_bits) != tile) tile_start[tile] = (int)i;
    if (i == count - 1 || (keys[i + 1] >> prim_bits) != tile) tile_end[tile] = (int)(i + 1);
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

// The (width, alpha) factors of segment `seg` at `along` pixels from its start.
__device__ __forceinline__ float2 segment_factors(const Scene& s, int seg, float along) {
    float2 f0 = s.seg_factor0[seg], f1 = s.seg_factor1[seg];
    if (f0.x == f1.x && f0.y == f1.y) return f0;  // equal ends: the interpolation gives exactly f0
    float2 p0 = s.seg_p0[seg], p1 = s.seg_p1[seg];
    float dx = p1.x - p0.x, dy = p1.y - p0.y;
    float u = along / fmaxf(sqrtf(dx * dx + dy * dy), EPS);
    return make_float2(f0.x + (f1.x - f0.x) * u, f0.y + (f1.y - f0.y) * u);
}

// Composite the pending polyline (distance `dist` and arc length `arc` at the segment `seg` whose capsule
// the pixel lies deepest in, `along` pixels from its start) into acc.
__device__ void flush_polyline(const Scene& s, int line, float dist, float arc, int seg, float along, float4& acc) {
    if (line < 0) return;
    float2 factors = segment_factors(s, seg, along);
    float alpha_factor = factors.y;
    float half = 0.5f * s.line_width[line] * factors.x;
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
    float b = c0.z + (c1.z - c0.z) * mix, a = (c0.w + (c1.w - c0.w) * mix) * coverage * alpha_factor;
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

// Atlas coverage at texel (i, j); 0 outside the atlas.
__device__ __forceinline__ float atlas_texel(const unsigned char* atlas, int width, int height, int i, int j) {
    return (i >= 0 && i < width && j >= 0 && j < height) ? (float)atlas[(long long)j * width + i] : 0.0f;
}

// Glyph g over acc: its atlas sampled bilinearly at (px - x + u - 0.5, py - y + v - 0.5) inside its quad.
__device__ void composite_glyph(const Scene& s, int g, float px, float py, float4& acc) {
    if (!in_glyph(s, g, px, py)) return;
    float2 o = s.glyph_origin[g], texel = s.glyph_texel[g];
    int atlas = s.glyph_atlas[g];
    const unsigned char* data = s.atlas_data[atlas];
    int width = s.atlas_width[atlas], height = s.atlas_height[atlas];
    float u = px - o.x + texel.x - 0.5f, v = py - o.y + texel.y - 0.5f;
    float u0 = floorf(u), v0 = floorf(v);
    float fu = u - u0, fv = v - v0;
    int i = (int)u0, j = (int)v0;
    float coverage = (1.0f - fu) * (1.0f - fv) * atlas_texel(data, width, height, i, j) +
                     fu * (1.0f - fv) * atlas_texel(data, width, height, i + 1, j) +
                     (1.0f - fu) * fv * atlas_texel(data, width, height, i, j + 1) +
                     fu * fv * atlas_texel(data, width, height, i + 1, j + 1);
    float4 c = s.glyph_color[g];
    float a = c.w * (coverage / 255.0f);
    if (a <= 0.0f) return;
    over(acc, c.x * a, c.y * a, c.z * a, a);
}

// The layer of one pixel: the tile's primitives, composited in order.
template <typename Key>
__device__ float4 shade_pixel(const Scene& s, const Key* keys, Key prim_mask, int prim_begin, int first, int count,
                              float px, float py, int* shared_prims) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int line = -1, seg = 0;
    float dist = 0.0f, arc = 0.0f, seg_along = 0.0f, deepest = 0.0f;
    int lane = threadIdx.y * TILE + threadIdx.x;
    for (int base = 0; base < count; base += TILE * TILE) {
        __syncthreads();
        if (base + lane < count) shared_prims[lane] = prim_begin + (int)(keys[first + base + lane] & prim_mask);
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
                    flush_polyline(s, line, dist, arc, seg, seg_along, acc);
                    line = owner;
                    deepest = 3.0e38f;
                }
                float outside = d - 0.5f * s.line_width[owner] * segment_factors(s, ref, along).x;
                if (outside < deepest) {
                    deepest = outside;
                    dist = d;
                    arc = s.seg_arc0[ref] + along;
                    seg = ref;
                    seg_along = along;
                }
            } else {
                flush_polyline(s, line, dist, arc, seg, seg_along, acc);
                line = -1;
                if (s.prim_kind[p] == 2) composite_glyph(s, ref, px, py, acc);
                else composite_box(s, ref, px, py, acc);
            }
        }
    }
    flush_polyline(s, line, dist, arc, seg, seg_along, acc);
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

// One block per tile of one frame (grid: tiles of a frame x binned frames): composite
// frame f's layer over frames[f] into out[f]. frame_stride is 0 when one frame lies under
// every layer. In place (frames == out), tiles with nothing to draw are left untouched.
template <typename T, typename Key>
__global__ void composite_tiles(const Scene* scene, int prim_begin, const Key* keys, Key prim_mask,
                                const int* tile_start, const int* tile_end, int tiles_x, int frame_tiles,
                                const T* frames, long long frame_stride, T* out, int width, int height) {
    __shared__ int shared_prims[TILE * TILE];
    const Scene s = *scene;
    long long tile = (long long)blockIdx.y * frame_tiles + blockIdx.x;
    int first = tile_start[tile], count = tile_end[tile] - first;
    if (count == 0 && (const void*)frames == (const void*)out) return;
    int x = (blockIdx.x % tiles_x) * TILE + threadIdx.x, y = (blockIdx.x / tiles_x) * TILE + threadIdx.y;
    float4 acc = shade_pixel(s, keys, prim_mask, prim_begin, first, count, x + 0.5f, y + 0.5f, shared_prims);
    if (x >= width || y >= height) return;
    long long i = 3ll * ((long long)y * width + x);
    const T* frame = frames + blockIdx.y * frame_stride;
    T* target = out + blockIdx.y * 3ll * width * height;
    float scale = channel_scale(frame), keep = 1.0f - acc.w;
    store_channel(target, i, acc.x * scale + keep * load_channel(frame, i));
    store_channel(target, i + 1, acc.y * scale + keep * load_channel(frame, i + 1));
    store_channel(target, i + 2, acc.z * scale + keep * load_channel(frame, i + 2));
}

// One block per touched tile of the first binned frame (tile_list): premultiplied RGBA of
// the layer into a compact [touched tiles * TILE * TILE] buffer (pixels past the edge included).
template <typename Key>
__global__ void layer_tiles(const Scene* scene, int prim_begin, const Key* keys, Key prim_mask,
                            const int* tile_start, const int* tile_end, const int* tile_list, int tiles_x,
                            float4* layer) {
    __shared__ int shared_prims[TILE * TILE];
    const Scene s = *scene;
    int tile = tile_list[blockIdx.x];
    int x = (tile % tiles_x) * TILE + threadIdx.x, y = (tile / tiles_x) * TILE + threadIdx.y;
    int first = tile_start[tile], count = tile_end[tile] - first;
    layer[(long long)blockIdx.x * TILE * TILE + threadIdx.y * TILE + threadIdx.x] =
        shade_pixel(s, keys, prim_mask, prim_begin, first, count, x + 0.5f, y + 0.5f, shared_prims);
}

// ---------------------------------------------------------------- 4:2:0 planes
// The layer composited over 8-bit 4:2:0 Y, U, V planes in place (video/yuv.py has the maths):
// luma per pixel, chroma per 2x2 block from the mean of its four pixels' terms. yuv holds the
// colour matrix M row by row and then the offsets o: (Y, U, V) = M rgb + o. One block per tile
// (grid: frame_tiles x frames) of the binned frames from the first; frame f's planes lie
// f * frame_stride bytes after the given ones. A tile (16 x 16, even) holds whole blocks, so the
// four pixels of a block meet in shared memory. Width and height are even.
__device__ __forceinline__ unsigned char to_level(float v) {
    return (unsigned char)fminf(fmaxf(floorf(v + 0.5f), 0.0f), 255.0f);
}

template <typename Key>
__global__ void composite_yuv420_tiles(const Scene* scene, int prim_begin, const Key* keys, Key prim_mask,
                                       const int* tile_start, const int* tile_end, int tiles_x,
                                       const float* yuv, unsigned char* y_plane, unsigned char* u_plane,
                                       unsigned char* v_plane, long long frame_stride, int width, int height) {
    __shared__ int shared_prims[TILE * TILE];
    __shared__ float3 chroma[TILE * TILE];  // (alpha, U term, V term) of each pixel
    const Scene s = *scene;
    long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    int first = tile_start[tile], count = tile_end[tile] - first;
    if (count == 0) return;  // the whole block: nothing drawn here
    long long frame_offset = (long long)blockIdx.y * frame_stride;
    y_plane += frame_offset;
    u_plane += frame_offset;
    v_plane += frame_offset;
    int x = (blockIdx.x % tiles_x) * TILE + threadIdx.x, y = (blockIdx.x / tiles_x) * TILE + threadIdx.y;
    float4 c = shade_pixel(s, keys, prim_mask, prim_begin, first, count, x + 0.5f, y + 0.5f, shared_prims);
    int lane = threadIdx.y * TILE + threadIdx.x;
    bool inside = x < width && y < height;
    float term_y = c.x * yuv[0];
    term_y += c.y * yuv[1];
    term_y += c.z * yuv[2];
    term_y += c.w * yuv[9];
    float term_u = c.x * yuv[3];
    term_u += c.y * yuv[4];
    term_u += c.z * yuv[5];
    term_u += c.w * yuv[10];
    float term_v = c.x * yuv[6];
    term_v += c.y * yuv[7];
    term_v += c.z * yuv[8];
    term_v += c.w * yuv[11];
    chroma[lane] = inside ? make_float3(c.w, term_u, term_v) : make_float3(0.0f, 0.0f, 0.0f);
    if (inside && c.w > 0.0f) {
        long long i = (long long)y * width + x;
        y_plane[i] = to_level((1.0f - c.w) * y_plane[i] + term_y);
    }
    __syncthreads();
    if ((threadIdx.x | threadIdx.y) & 1 || !inside) return;
    float3 a = chroma[lane], b = chroma[lane + 1], d = chroma[lane + TILE], e = chroma[lane + TILE + 1];
    float alpha = (a.x + b.x + d.x + e.x) * 0.25f;
    if (alpha <= 0.0f) return;
    long long j = (long long)(y >> 1) * (width >> 1) + (x >> 1);
    u_plane[j] = to_level((1.0f - alpha) * u_plane[j] + (a.y + b.y + d.y + e.y) * 0.25f);
    v_plane[j] = to_level((1.0f - alpha) * v_plane[j] + (a.z + b.z + d.z + e.z) * 0.25f);
}

// ---------------------------------------------------------------- glow
// The glow (raster/glow.py) of one frame: layer_dense stores the frame's layer densely
// (premultiplied RGBA in half precision), glow_rows blurs it along rows, and glow_composite
// (or glow_layer_rgba) blurs along columns, strengthens the halo (alpha at most 1), puts the
// layer over it and composites both over the frame (or writes them). Outside the frame is
// zero. Half precision (11 significant bits) keeps every value within 1/4096 of float32.

#define GLOW_ROW_SPAN 256  // pixels of a row per glow_rows block (= its threads)
#define GLOW_COLUMN_ROWS 8  // rows per glow_composite thread (each input row loaded once per thread)

__device__ __forceinline__ unsigned short to_half(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
__device__ __forceinline__ float from_half(unsigned short h) {
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h));
    return v;
}
__device__ __forceinline__ ushort4 pack_half4(float4 v) {
    return make_ushort4(to_half(v.x), to_half(v.y), to_half(v.z), to_half(v.w));
}
__device__ __forceinline__ float4 unpack_half4(ushort4 h) {
    return make_float4(from_half(h.x), from_half(h.y), from_half(h.z), from_half(h.w));
}
__device__ __forceinline__ void add_weighted(float4& sum, float w, float4 v) {
    sum.x += w * v.x; sum.y += w * v.y; sum.z += w * v.z; sum.w += w * v.w;
}

// One block per tile of binned frame `frame` (grid: frame_tiles): that frame's layer into the dense
// row-major [height, width] buffer `layer` (zero where nothing is drawn).
template <typename Key>
__global__ void layer_dense(const Scene* scene, int prim_begin, const Key* keys, Key prim_mask,
                            const int* tile_start, const int* tile_end, int tiles_x, int frame_tiles, int frame,
                            ushort4* layer, int width, int height) {
    __shared__ int shared_prims[TILE * TILE];
    const Scene s = *scene;
    long long tile = (long long)frame * frame_tiles + blockIdx.x;
    int first = tile_start[tile], count = tile_end[tile] - first;
    int x = (blockIdx.x % tiles_x) * TILE + threadIdx.x, y = (blockIdx.x / tiles_x) * TILE + threadIdx.y;
    float4 acc = shade_pixel(s, keys, prim_mask, prim_begin, first, count, x + 0.5f, y + 0.5f, shared_prims);
    if (x < width && y < height) layer[(long long)y * width + x] = pack_half4(acc);
}

// Row pass (grid: rows x row spans, GLOW_ROW_SPAN threads): each block reads its span and `reach`
// pixels either side into shared memory once. Dynamic shared memory:
// (GLOW_ROW_SPAN + 2 reach) float4 + (2 reach + 1) float.
__global__ void glow_rows(const ushort4* in, ushort4* out, const float* weights, int reach, int width) {
    extern __shared__ float4 span[];
    float* w = (float*)(span + GLOW_ROW_SPAN + 2 * reach);
    int x0 = blockIdx.y * GLOW_ROW_SPAN;
    const ushort4* row = in + (long long)blockIdx.x * width;
    for (int i = threadIdx.x; i < GLOW_ROW_SPAN + 2 * reach; i += blockDim.x) {
        int x = x0 - reach + i;
        span[i] = x >= 0 && x < width ? unpack_half4(row[x]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int i = threadIdx.x; i <= 2 * reach; i += blockDim.x) w[i] = weights[i];
    __syncthreads();
    int x = x0 + threadIdx.x;
    if (x >= width) return;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int k = 0; k <= 2 * reach; ++k) add_weighted(sum, w[k], span[threadIdx.x + k]);
    out[(long long)blockIdx.x * width + x] = pack_half4(sum);
}

// Column pass of rows y0 .. y0 + GLOW_COLUMN_ROWS - 1 of column x (weights `w` in shared memory).
__device__ void glow_columns(const ushort4* rows, const float* w, int reach, int x, int y0, int width, int height,
                             float4* sums) {
    #pragma unroll
    for (int k = 0; k < GLOW_COLUMN_ROWS; ++k) sums[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int first = max(y0 - reach, 0), last = min(y0 + GLOW_COLUMN_ROWS - 1 + reach, height - 1);
    for (int j = first; j <= last; ++j) {
        float4 v = unpack_half4(rows[(long long)j * width + x]);
        #pragma unroll
        for (int k = 0; k < GLOW_COLUMN_ROWS; ++k) {
            int t = j - (y0 + k) + reach;
            if (t >= 0 && t <= 2 * reach) add_weighted(sums[k], w[t], v);
        }
    }
}

// The layer over its halo (premultiplied): the halo times `strength`, scaled down to alpha 1 where above.
__device__ __forceinline__ float4 glow_under(float4 layer, float4 halo, float strength) {
    float scale = strength / fmaxf(1.0f, strength * halo.w) * (1.0f - layer.w);
    return make_float4(layer.x + scale * halo.x, layer.y + scale * halo.y, layer.z + scale * halo.z,
                       layer.w + scale * halo.w);
}

// Loads the weights into shared memory and gives the block's column and first row (block 32 x 8 threads,
// grid: column blocks x row blocks of 8 * GLOW_COLUMN_ROWS rows). Dynamic shared memory: (2 reach + 1) float.
__device__ __forceinline__ void glow_column_setup(const float* weights, int reach, float* w, int* x, int* y0) {
    int lane = threadIdx.y * blockDim.x + threadIdx.x;
    for (int i = lane; i <= 2 * reach; i += blockDim.x * blockDim.y) w[i] = weights[i];
    __syncthreads();
    *x = blockIdx.x * blockDim.x + threadIdx.x;
    *y0 = (blockIdx.y * blockDim.y + threadIdx.y) * GLOW_COLUMN_ROWS;
}

// Column pass, then the layer over its halo over `frame` into `out` (may be `frame`).
template <typename T>
__global__ void glow_composite(const ushort4* layer, const ushort4* rows, const float* weights, int reach,
                               float strength, const T* frame, T* out, int width, int height) {
    extern __shared__ float w[];
    int x, y0;
    glow_column_setup(weights, reach, w, &x, &y0);
    if (x >= width || y0 >= height) return;
    float4 sums[GLOW_COLUMN_ROWS];
    glow_columns(rows, w, reach, x, y0, width, height, sums);
    float scale = channel_scale(frame);
    #pragma unroll
    for (int k = 0; k < GLOW_COLUMN_ROWS; ++k) {
        int y = y0 + k;
        if (y >= height) break;
        long long p = (long long)y * width + x, i = 3 * p;
        float4 c = glow_under(unpack_half4(layer[p]), sums[k], strength);
        float keep = 1.0f - c.w;
        float r = c.x * scale + keep * load_channel(frame, i), g = c.y * scale + keep * load_channel(frame, i + 1);
        float b = c.z * scale + keep * load_channel(frame, i + 2);
        store_channel(out, i, r);
        store_channel(out, i + 1, g);
        store_channel(out, i + 2, b);
    }
}

// Column pass, then the layer over its halo into `out` (premultiplied RGBA, float32 [height, width]).
__global__ void glow_layer_rgba(const ushort4* layer, const ushort4* rows, const float* weights, int reach,
                                float strength, float4* out, int width, int height) {
    extern __shared__ float w[];
    int x, y0;
    glow_column_setup(weights, reach, w, &x, &y0);
    if (x >= width || y0 >= height) return;
    float4 sums[GLOW_COLUMN_ROWS];
    glow_columns(rows, w, reach, x, y0, width, height, sums);
    #pragma unroll
    for (int k = 0; k < GLOW_COLUMN_ROWS; ++k) {
        int y = y0 + k;
        if (y >= height) break;
        long long p = (long long)y * width + x;
        out[p] = glow_under(unpack_half4(layer[p]), sums[k], strength);
    }
}
