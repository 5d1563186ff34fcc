// Block-linear NV12 -> RGBA through surface objects (BT.601 studio range, integer arithmetic,
// bit-exact with nvsci::convert::yuv_to_rgb), with the frame statistic (sum of R + G + B)
// reduced per warp: one atomic per warp.
//
// The CUDA C twin of the hand-written PTX in src/convert.rs (NV12_SURF_TO_RGBA_PTX). `luma` is a
// surface over the luma plane's array (one 8-bit channel), `chroma` over the chroma plane's (two
// 8-bit channels, U then V), as NVIDIA's cudaNvSciBufMultiplanar sample maps NV12 planes; surface
// x coordinates are in bytes. Launch: blocks of (32, 8) threads, grid (ceil(width / 32),
// ceil(height / 8)).

__device__ __forceinline__ unsigned clamp8(int x) { return (unsigned)min(max(x, 0), 255); }

extern "C" __global__ void nv12_surf_to_rgba(cudaSurfaceObject_t luma, cudaSurfaceObject_t chroma, unsigned w,
                                             unsigned h, unsigned *dst, unsigned long long *sum) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned s = 0;
    if (x < w && y < h) {
        int yy = surf2Dread<unsigned char>(luma, x, y);
        uchar2 uv = surf2Dread<uchar2>(chroma, x & ~1u, y >> 1);
        int c = yy - 16, d = uv.x - 128, e = uv.y - 128;
        unsigned r = clamp8((298 * c + 409 * e + 128) >> 8);
        unsigned g = clamp8((298 * c - 100 * d - 208 * e + 128) >> 8);
        unsigned b = clamp8((298 * c + 516 * d + 128) >> 8);
        s = r + g + b;
        dst[(unsigned long long)y * w + x] = r | (g << 8) | (b << 16) | 0xff000000u;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, (unsigned long long)s);
}
