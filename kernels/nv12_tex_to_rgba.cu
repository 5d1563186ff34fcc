// Block-linear NV12 -> RGBA through texture objects (BT.601 studio range, integer arithmetic,
// bit-exact with nvsci::convert::yuv_to_rgb), with the frame statistic (sum of R + G + B)
// reduced per warp: one atomic per warp.
//
// The CUDA C twin of the hand-written PTX in src/convert.rs (NV12_TEX_TO_RGBA_PTX). `luma` is a
// texture over the luma plane's array (one 8-bit channel), `chroma` over the chroma plane's (two
// 8-bit channels, U then V), as NVIDIA's cudaNvSciBufMultiplanar sample maps NV12 planes; both
// read exact texels (point filtering, unnormalised coordinates, cudaReadModeElementType), fetched
// at texel centres. Launch: blocks of (32, 8) threads, grid (ceil(width / 32), ceil(height / 8)).

__device__ __forceinline__ unsigned clamp8(int x) { return (unsigned)min(max(x, 0), 255); }

extern "C" __global__ void nv12_tex_to_rgba(cudaTextureObject_t luma, cudaTextureObject_t chroma, unsigned w,
                                            unsigned h, unsigned *dst, unsigned long long *sum) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned s = 0;
    if (x < w && y < h) {
        int yy = tex2D<unsigned char>(luma, x + 0.5f, y + 0.5f);
        uchar2 uv = tex2D<uchar2>(chroma, (x >> 1) + 0.5f, (y >> 1) + 0.5f);
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
