// GPU scene builder: points -> kNN graph -> curves and boxes, written straight
// into the scene tables of raster.cu (the GPU twin of graph.py + overlay.py for
// the k-nearest-neighbour look without degree caps or hysteresis).
//
// Layout is fixed per (points, k): edge slot e = i * k + m, segment slot
// s = e * MAX_SEGMENTS + c, so nothing is compacted and no size is read back.

#define MAX_SEGMENTS 64
#define KNN_BLOCK 128  // equals the launch block size

// Insert candidate (d, index) into a sorted top-K list; equal distances keep the
// earlier entry first (candidates arrive in index order).
template <int K>
__device__ __forceinline__ void insert_candidate(float (&best)[K], int (&best_index)[K], float d, int index) {
#pragma unroll
    for (int m = K - 1; m >= 0; --m) {
        float above = m > 0 ? best[m - 1] : -1.0f;
        if (above > d) {
            best[m] = above;
            best_index[m] = best_index[m > 0 ? m - 1 : 0];
        } else if (best[m] > d) {
            best[m] = d;
            best_index[m] = index;
        }
    }
}

// Exact 2-D kNN, stage 1: each query (x) scans one slice (y) of the candidates,
// staged in shared memory, and writes its partial top-K (squared distances).
template <int K>
__global__ void knn2d_partial(const float2* __restrict__ points, const unsigned char* __restrict__ valid, int n,
                              int slice, int* __restrict__ part_index, float* __restrict__ part_distance) {
    __shared__ float2 staged[KNN_BLOCK];
    __shared__ unsigned char staged_valid[KNN_BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float2 q = i < n ? points[i] : make_float2(0.0f, 0.0f);
    float best[K];
    int best_index[K];
#pragma unroll
    for (int m = 0; m < K; ++m) { best[m] = 3.0e38f; best_index[m] = -1; }
    int begin = blockIdx.y * slice, end = min(n, begin + slice);
    for (int base = begin; base < end; base += KNN_BLOCK) {
        __syncthreads();
        int j = base + threadIdx.x;
        if (j < end) {
            staged[threadIdx.x] = points[j];
            staged_valid[threadIdx.x] = valid == nullptr || valid[j];
        }
        __syncthreads();
        int count = min(KNN_BLOCK, end - base);
        for (int c = 0; c < count; ++c) {
            float dx = staged[c].x - q.x, dy = staged[c].y - q.y;
            float d = dx * dx + dy * dy;
            if (d < best[K - 1] && base + c != i && staged_valid[c]) insert_candidate(best, best_index, d, base + c);
        }
    }
    if (i >= n) return;
    long long out = ((long long)blockIdx.y * n + i) * K;
#pragma unroll
    for (int m = 0; m < K; ++m) { part_index[out + m] = best_index[m]; part_distance[out + m] = best[m]; }
}

// Stage 2: merge the slices' partial lists (in slice order, so ties keep the lower index).
template <int K>
__global__ void knn2d_merge(const int* __restrict__ part_index, const float* __restrict__ part_distance,
                            const unsigned char* __restrict__ valid, int n, int k, int slices,
                            long long* __restrict__ out_index, float* __restrict__ out_distance) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float best[K];
    int best_index[K];
#pragma unroll
    for (int m = 0; m < K; ++m) { best[m] = 3.0e38f; best_index[m] = -1; }
    for (int slice = 0; slice < slices; ++slice) {
        long long at = ((long long)slice * n + i) * K;
        for (int m = 0; m < K; ++m) {
            float d = part_distance[at + m];
            if (!(d < best[K - 1])) break;
            insert_candidate(best, best_index, d, part_index[at + m]);
        }
    }
    bool active = valid == nullptr || valid[i];
#pragma unroll
    for (int m = 0; m < K; ++m) {
        if (m < k) {
            bool found = active && best_index[m] >= 0;
            out_index[(long long)i * k + m] = found ? best_index[m] : -1;
            out_distance[(long long)i * k + m] = found ? sqrtf(best[m]) : 3.0e38f;
        }
    }
}

// Undirected, deduplicated kNN edges with the |dy| and length caps: slot (i, m)
// keeps edge {i, j} unless j proposes it too and j < i. Sort key = a * n + b.
extern "C" __global__ void link_edges(const float2* points, const long long* knn_index, int n, int k,
                                      float delta_y_cap, float max_length, long long* edge_a, long long* edge_b,
                                      unsigned long long* sort_key) {
    int slot = blockIdx.x * blockDim.x + threadIdx.x;
    if (slot >= n * k) return;
    int i = slot / k;
    long long j = knn_index[slot];
    bool keep = j >= 0;
    if (keep && j < i) {
        for (int m = 0; m < k; ++m) keep &= knn_index[j * k + m] != i;
    }
    if (keep) {
        float dx = points[j].x - points[i].x, dy = points[j].y - points[i].y;
        if (delta_y_cap > 0.0f && fabsf(dy) > delta_y_cap) keep = false;
        if (max_length > 0.0f && sqrtf(dx * dx + dy * dy) > max_length) keep = false;
    }
    long long a = keep ? min((long long)i, j) : 0, b = keep ? max((long long)i, j) : 0;
    edge_a[slot] = a;
    edge_b[slot] = b;
    sort_key[slot] = keep ? (unsigned long long)(a * n + b) : ~0ull;
}

// Read from device memory: the field order and offsets match LINE_LOOK in scene_gpu.py.
struct LineLook {
    float4 color0, color1;       // single-colour mode: start and end (end = start unless gradient)
    float width, dash_on, dash_off, bend, tolerance;
    int dash_round, color_mode, gradient, curve;  // curve: 0 straight, 1 quadratic, 2 cubic, 3 s-curve
    int palette_size;
    float opacity;
};

__device__ float bend_sign(long long low, long long high) {
    long long mixed = (low * 73856093ll) ^ (high * 19349663ll);
    return ((mixed >> 3) & 1) ? 1.0f : -1.0f;
}

__device__ float4 palette_color(const float* palette, int size, long long id, float opacity) {
    const float* c = palette + 3 * (id % size);
    return make_float4(c[0], c[1], c[2], opacity);
}

// One thread per edge: Bezier control points, adaptive chord count, vertices,
// segments with arc lengths, and the polyline's style, at its place in key order.
extern "C" __global__ void curve_segments(const float2* points, const long long* edge_a, const long long* edge_b,
                                          const unsigned long long* sort_key, const long long* order, int edges,
                                          const LineLook* look_ptr, const float* palette, float2* seg_p0, float2* seg_p1,
                                          int* seg_polyline, float* seg_arc0, float* line_width, float4* line_color0,
                                          float4* line_color1, float2* line_dash, int* line_dash_round,
                                          float* line_arc_total) {
    int thread = blockIdx.x * blockDim.x + threadIdx.x;
    if (thread >= edges) return;
    const LineLook look = *look_ptr;
    // Polyline e is the e-th edge in key order: from `order`, or (order == null, few
    // edges) by counting the keys that sort before this slot's.
    long long slot = thread;
    int e = thread;
    if (order != nullptr) {
        slot = order[thread];
    } else {
        unsigned long long own = sort_key[slot];
        e = 0;
        for (int j = 0; j < edges; ++j) e += sort_key[j] < own || (sort_key[j] == own && j < slot);
    }
    bool valid = sort_key[slot] != ~0ull;
    long long base = (long long)e * MAX_SEGMENTS;
    if (!valid) {
        for (int c = 0; c < MAX_SEGMENTS; ++c) seg_polyline[base + c] = -1;
        return;
    }
    long long a = edge_a[slot], b = edge_b[slot];
    float2 p0 = points[a], p3 = points[b];
    float2 chord = make_float2(p3.x - p0.x, p3.y - p0.y);
    float s = look.bend * bend_sign(a, b);
    float2 normal = make_float2(-chord.y * s, chord.x * s);
    float2 ctrl[4];
    int degree;
    if (look.curve == 0) {
        degree = 1; ctrl[0] = p0; ctrl[1] = p3;
    } else if (look.curve == 1) {
        degree = 2; ctrl[0] = p0; ctrl[2] = p3;
        ctrl[1] = make_float2((p0.x + p3.x) * 0.5f + normal.x, (p0.y + p3.y) * 0.5f + normal.y);
    } else {
        degree = 3; ctrl[0] = p0; ctrl[3] = p3;
        float flip = look.curve == 3 ? -1.0f : 1.0f;
        ctrl[1] = make_float2(p0.x + chord.x / 3.0f + normal.x, p0.y + chord.y / 3.0f + normal.y);
        ctrl[2] = make_float2(p0.x + chord.x * (2.0f / 3.0f) + flip * normal.x,
                              p0.y + chord.y * (2.0f / 3.0f) + flip * normal.y);
    }
    int chords = 1;
    if (degree > 1) {
        float largest = 0.0f;
        for (int m = 0; m + 2 <= degree; ++m) {
            float sx = ctrl[m].x - 2.0f * ctrl[m + 1].x + ctrl[m + 2].x;
            float sy = ctrl[m].y - 2.0f * ctrl[m + 1].y + ctrl[m + 2].y;
            largest = fmaxf(largest, sqrtf(sx * sx + sy * sy));
        }
        float bound = (float)(degree * (degree - 1)) * largest;
        chords = (int)fminf(fmaxf(ceilf(sqrtf(bound / (8.0f * look.tolerance))), 1.0f), (float)MAX_SEGMENTS);
    }
    float2 previous = p0;
    float arc = 0.0f;
    int kept = 0;
    for (int c = 1; c <= MAX_SEGMENTS; ++c) {
        if (c > chords) { seg_polyline[base + c - 1] = -1; continue; }
        float t = (float)c / (float)chords, u = 1.0f - t;
        float2 v;
        if (degree == 1) {
            v = c == chords ? p3 : previous;
        } else if (degree == 2) {
            float w0 = u * u, w1 = 2.0f * u * t, w2 = t * t;
            v = make_float2(w0 * ctrl[0].x + w1 * ctrl[1].x + w2 * ctrl[2].x,
                            w0 * ctrl[0].y + w1 * ctrl[1].y + w2 * ctrl[2].y);
        } else {
            float w0 = u * u * u, w1 = 3.0f * u * u * t, w2 = 3.0f * u * t * t, w3 = t * t * t;
            v = make_float2(w0 * ctrl[0].x + w1 * ctrl[1].x + w2 * ctrl[2].x + w3 * ctrl[3].x,
                            w0 * ctrl[0].y + w1 * ctrl[1].y + w2 * ctrl[2].y + w3 * ctrl[3].y);
        }
        float length = sqrtf((v.x - previous.x) * (v.x - previous.x) + (v.y - previous.y) * (v.y - previous.y));
        bool keep = length > 1e-6f || (c == chords && kept == 0);
        seg_p0[base + c - 1] = previous;
        seg_p1[base + c - 1] = v;
        seg_arc0[base + c - 1] = arc;
        seg_polyline[base + c - 1] = keep ? e : -1;
        if (keep) { arc += length; ++kept; }
        previous = v;
    }
    line_width[e] = look.width;
    float4 c0 = look.color0, c1 = look.color1;
    if (look.color_mode == 1) {
        c0 = palette_color(palette, look.palette_size, a, look.opacity);
        c1 = look.gradient ? palette_color(palette, look.palette_size, b, look.opacity) : c0;
    }
    line_color0[e] = c0;
    line_color1[e] = c1;
    line_dash[e] = make_float2(look.dash_on, look.dash_off);
    line_dash_round[e] = look.dash_round;
    line_arc_total[e] = arc;
}

// Field order and offsets match BOX_LOOK in scene_gpu.py.
struct BoxLook {
    float4 stroke_color, fill_color;  // single-colour mode (alpha includes opacity / fill opacity)
    float size, stroke_width, roundness, bracket_length;
    int color_mode, palette_size, own_fill;  // own_fill: fill_color given (else the stroke colour)
    float opacity, fill_opacity;
};

// One box per visible point; invisible points get a negative size (skipped by binning).
extern "C" __global__ void point_boxes(const float2* points, const unsigned char* valid, int n, const BoxLook* look_ptr,
                                       const float* palette, float2* center, float2* half, float* radius,
                                       float* stroke, float4* stroke_color, float4* fill_color, float* bracket) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const BoxLook look = *look_ptr;
    bool visible = valid == nullptr || valid[i];
    float h = 0.5f * look.size;
    center[i] = points[i];
    half[i] = visible ? make_float2(h, h) : make_float2(-1.0f, -1.0f);
    radius[i] = h * look.roundness;
    stroke[i] = look.stroke_width;
    bracket[i] = 2.0f * h * look.bracket_length;
    float4 sc = look.stroke_color;
    if (look.color_mode == 1) sc = palette_color(palette, look.palette_size, i, look.opacity);
    float4 fc = look.own_fill ? look.fill_color : make_float4(sc.x, sc.y, sc.z, look.fill_opacity * look.opacity);
    stroke_color[i] = sc;
    fill_color[i] = fc;
}
