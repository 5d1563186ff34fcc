// NV12 -> RGBA (BT.601 studio range, integer arithmetic, bit-exact with nvsci::convert::yuv_to_rgb)
// with the frame statistic (sum of R + G + B) reduced per block: one atomic per block.
//
// The PTX embedded in src/convert.rs (NV12_TO_RGBA_PTX) is this file compiled with
//   nvcc -ptx -arch=compute_75 -O3 -o nv12_to_rgba.ptx kernels/nv12_to_rgba.cu
// (CUDA 12.x or 13.x), with the header lines set to `.version 7.0` / `.target sm_52`: the
// kernel uses no instruction newer than those (shfl.sync, ld.global.nc, atom.global.add.u64,
// bar.sync), so drivers back to CUDA 11.0 (JetPack 5, DRIVE OS 6) load it.
//
// Each thread converts 4 horizontally adjacent pixels (two chroma pairs): with the planes'
// rows 4-byte aligned and the output rows 16-byte aligned (width a multiple of 4), one 32-bit
// luma load, one 32-bit chroma load and one 16-byte store; otherwise byte by byte.
// Launch: blocks of (64, 4) threads (any multiple of 32 up to 1024 works), grid
// (ceil(ceil(width / 4) / 64), ceil(height / 4)).

__device__ __forceinline__ unsigned clamp8(int x) { return (unsigned)min(max(x, 0), 255); }

__device__ __forceinline__ unsigned px(int y, int u, int v, unsigned &sum) {
    int c = y - 16, d = u - 128, e = v - 128;
    unsigned r = clamp8((298 * c + 409 * e + 128) >> 8);
    unsigned g = clamp8((298 * c - 100 * d - 208 * e + 128) >> 8);
    unsigned b = clamp8((298 * c + 516 * d + 128) >> 8);
    sum += r + g + b;
    return r | (g << 8) | (b << 16) | 0xff000000u;
}

extern "C" __global__ void nv12_to_rgba(const unsigned char *frame, unsigned long long y_off, unsigned y_pitch,
                                        unsigned long long uv_off, unsigned uv_pitch, unsigned w, unsigned h,
                                        unsigned *dst, unsigned long long *sum) {
    __shared__ unsigned warp_sums[32];
    unsigned x0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned s = 0;
    if (y < h && x0 < w) {
        const unsigned char *yrow = frame + y_off + (unsigned long long)y * y_pitch;
        const unsigned char *uvrow = frame + uv_off + (unsigned long long)(y >> 1) * uv_pitch;
        unsigned *out = dst + (unsigned long long)y * w + x0;
        bool vec = x0 + 4 <= w && ((((unsigned long long)yrow | (unsigned long long)uvrow) & 3) == 0) &&
                   (((unsigned long long)out & 15) == 0);
        if (vec) {
            unsigned yy = __ldg((const unsigned *)(yrow + x0));
            unsigned uv = __ldg((const unsigned *)(uvrow + x0));
            uint4 o;
            o.x = px(yy & 0xff, uv & 0xff, (uv >> 8) & 0xff, s);
            o.y = px((yy >> 8) & 0xff, uv & 0xff, (uv >> 8) & 0xff, s);
            o.z = px((yy >> 16) & 0xff, (uv >> 16) & 0xff, uv >> 24, s);
            o.w = px(yy >> 24, (uv >> 16) & 0xff, uv >> 24, s);
            *(uint4 *)out = o;
        } else {
            for (unsigned i = 0; i < 4 && x0 + i < w; i++) {
                unsigned x = x0 + i;
                out[i] = px(yrow[x], uvrow[x & ~1u], uvrow[(x & ~1u) + 1], s);
            }
        }
    }
    // Every thread gets here, in range or not: the full-mask shuffles are converged and the
    // barrier is reached by all.
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    unsigned tid = threadIdx.y * blockDim.x + threadIdx.x;
    if ((tid & 31) == 0) warp_sums[tid >> 5] = s;
    __syncthreads();
    if (tid == 0) {
        unsigned n = (blockDim.x * blockDim.y + 31) >> 5, t = 0;
        for (unsigned i = 0; i < n; i++) t += warp_sums[i];
        atomicAdd(sum, (unsigned long long)t);
    }
}
