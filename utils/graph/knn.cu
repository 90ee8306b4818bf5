// Exact 2-D k-nearest-neighbour search (the GPU twin of graph.neighbours.knn_cpu):
// candidate slices in parallel, then a merge in slice order. Frames of a batch
// ([frames, n] points) are searched independently, one grid layer each.

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

// Exact 2-D kNN, stage 1: each query (x) scans one slice (y) of the candidates of
// its frame (z), staged in shared memory, and writes its partial top-K (squared distances).
template <int K>
__global__ void knn2d_partial(const float2* __restrict__ points, const unsigned char* __restrict__ valid, int n,
                              int slice, int* __restrict__ part_index, float* __restrict__ part_distance) {
    __shared__ float2 staged[KNN_BLOCK];
    __shared__ unsigned char staged_valid[KNN_BLOCK];
    long long frame = blockIdx.z;
    points += frame * n;
    if (valid != nullptr) valid += frame * n;
    part_index += frame * gridDim.y * (long long)n * K;
    part_distance += frame * gridDim.y * (long long)n * K;
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

// Stage 2: merge the slices' partial lists (in slice order, so ties keep the lower index);
// one grid row (y) per frame.
template <int K>
__global__ void knn2d_merge(const int* __restrict__ part_index, const float* __restrict__ part_distance,
                            const unsigned char* __restrict__ valid, int n, int k, int slices,
                            long long* __restrict__ out_index, float* __restrict__ out_distance) {
    long long frame = blockIdx.y;
    part_index += frame * slices * (long long)n * K;
    part_distance += frame * slices * (long long)n * K;
    if (valid != nullptr) valid += frame * n;
    out_index += frame * n * (long long)k;
    out_distance += frame * n * (long long)k;
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
