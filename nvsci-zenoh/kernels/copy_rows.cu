// Rows of a frame plane copied into packed rows, by the GPU's threads rather than a copy engine:
// the Zenoh bridge's read-back of a frame whose memory is host memory mapped into CUDA (the mock
// NvSci's GPU mode). A copy-engine copy between two host buffers is synchronous with respect to
// the host whatever its stream ("For transfers from any host memory to any host memory, the
// function is fully synchronous with respect to the host", CUDA Driver API, API synchronization
// behavior), which would hold the bridge's thread for the whole copy; a kernel is queued.
//
// The PTX embedded in nvsci-zenoh/src/readback.rs (COPY_ROWS_PTX) is this file compiled with
//   nvcc -ptx -arch=compute_75 -O3 -o copy_rows.ptx nvsci-zenoh/kernels/copy_rows.cu
// (CUDA 12.x or 13.x), with the header lines set to `.version 7.0` / `.target sm_52`: the kernel
// uses no instruction newer than those (16-byte and byte global loads and stores), so drivers
// back to CUDA 11.0 (JetPack 5, DRIVE OS 6) load it.
//
// copy_rows(src, src_pitch, dst, dst_pitch, width, rows): `rows` rows of `width` bytes, row r
// from src + r * src_pitch to dst + r * dst_pitch. Where every row start on both sides and
// `width` are multiples of 16, 16-byte loads and stores; otherwise byte by byte. Launch: blocks
// of 128 threads; grid x covers a row (a block-stride loop: any count), grid y a row each (a
// grid-stride loop over the rows: any count up to 65535).

extern "C" __global__ void copy_rows(const unsigned char *src, unsigned long long src_pitch, unsigned char *dst,
                                     unsigned long long dst_pitch, unsigned long long width,
                                     unsigned long long rows) {
    bool vec = ((((unsigned long long)src) | ((unsigned long long)dst) | src_pitch | dst_pitch | width) & 15) == 0;
    unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long r = blockIdx.y; r < rows; r += gridDim.y) {
        const unsigned char *s = src + r * src_pitch;
        unsigned char *d = dst + r * dst_pitch;
        if (vec) {
            const uint4 *s4 = (const uint4 *)s;
            uint4 *d4 = (uint4 *)d;
            for (unsigned long long i = first; i < width / 16; i += stride) {
                d4[i] = s4[i];
            }
        } else {
            for (unsigned long long i = first; i < width; i += stride) {
                d[i] = s[i];
            }
        }
    }
}
