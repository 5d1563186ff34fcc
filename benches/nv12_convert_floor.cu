// The NV12 -> RGBA kernel (kernels/nv12_to_rgba.cu) at 3840x2160 beside the bandwidth floor
// (bytes moved at the bandwidth of a device-to-device cudaMemcpy, same run), and the checksum
// against a CPU reference. Build and run on a GPU host:
//   nvcc -O3 -arch=native -o /tmp/nv12_convert_floor benches/nv12_convert_floor.cu && /tmp/nv12_convert_floor
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "../kernels/nv12_to_rgba.cu"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

static unsigned cpu_px(int y, int u, int v, unsigned long long &sum) {
    auto cl = [](int x) { return x < 0 ? 0 : x > 255 ? 255 : x; };
    int c = y - 16, d = u - 128, e = v - 128;
    int r = cl((298 * c + 409 * e + 128) >> 8), g = cl((298 * c - 100 * d - 208 * e + 128) >> 8),
        b = cl((298 * c + 516 * d + 128) >> 8);
    sum += r + g + b;
    return r | (g << 8) | (b << 16) | 0xff000000u;
}

int main() {
    const unsigned w = 3840, h = 2160, pitch = 3840;
    const size_t y_off = 0, uv_off = (size_t)pitch * h, size = uv_off + (size_t)pitch * h / 2;
    std::vector<unsigned char> src(size);
    unsigned long long x = 1;
    for (auto &b : src) { x = x * 6364136223846793005ull + 1442695040888963407ull; b = x >> 56; }
    unsigned long long want = 0;
    for (unsigned yy = 0; yy < h; yy++)
        for (unsigned xx = 0; xx < w; xx++)
            cpu_px(src[y_off + yy * pitch + xx], src[uv_off + (yy / 2) * pitch + (xx & ~1u)],
                   src[uv_off + (yy / 2) * pitch + (xx & ~1u) + 1], want);
    unsigned char *d_src; unsigned *d_dst; unsigned long long *d_sum;
    CK(cudaMalloc(&d_src, size)); CK(cudaMalloc(&d_dst, (size_t)w * h * 4)); CK(cudaMalloc(&d_sum, 8));
    CK(cudaMemcpy(d_src, src.data(), size, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_sum, 0, 8));
    dim3 block(64, 4), grid(((w + 3) / 4 + 63) / 64, (h + 3) / 4);
    nv12_to_rgba<<<grid, block>>>(d_src, y_off, pitch, uv_off, pitch, w, h, d_dst, d_sum);
    unsigned long long got = 0;
    CK(cudaMemcpy(&got, d_sum, 8, cudaMemcpyDeviceToHost));
    printf("checksum: kernel %llu, CPU %llu: %s\n", got, want, got == want ? "equal" : "DIFFER");
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    const int reps = 200;
    for (int i = 0; i < 20; i++) nv12_to_rgba<<<grid, block>>>(d_src, y_off, pitch, uv_off, pitch, w, h, d_dst, d_sum);
    cudaEventRecord(a);
    for (int i = 0; i < reps; i++) nv12_to_rgba<<<grid, block>>>(d_src, y_off, pitch, uv_off, pitch, w, h, d_dst, d_sum);
    cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b);
    double conv = ms * 1000.0 / reps;
    size_t n = 256ull << 20; void *p, *q; CK(cudaMalloc(&p, n)); CK(cudaMalloc(&q, n));
    for (int i = 0; i < 3; i++) cudaMemcpy(q, p, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(a);
    for (int i = 0; i < 20; i++) cudaMemcpyAsync(q, p, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(b); CK(cudaEventSynchronize(b));
    cudaEventElapsedTime(&ms, a, b);
    double gbps = 2.0 * n * 20 / (ms * 1e-3) / 1e9;
    double moved = (double)w * h * 5.5, floor_us = moved / (gbps * 1e9) * 1e6;
    printf("3840x2160: kernel %.1f us, floor %.1f us (%.1f MB at %.0f GB/s), ratio %.2fx\n", conv, floor_us,
           moved / 1e6, gbps, conv / floor_us);
    return got == want ? 0 : 1;
}
