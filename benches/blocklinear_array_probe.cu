// Which block-linear layout the CUDA driver gives a CUDA array mapped from host-NUMA VMM memory
// imported as external memory (OPAQUE_FD), and what the driver requires of such an array.
//
// For each array shape: allocate host-NUMA VMM memory (cuMemCreate, POSIX fd), map it for the
// device and the CPU (cuMemMap + cuMemSetAccess), export the fd, import it with
// cuImportExternalMemory (OPAQUE_FD), map a one-level mipmapped array at an offset
// (cuExternalMemoryGetMappedMipmappedArray), write a known pattern into the array
// (cuMemcpy2D host -> array), read the same memory linearly through the CPU mapping, and compare
// it with the block-linear candidates (64-byte x 8-row GOBs, block height 2^n GOBs, blocks in
// rows of ceil(pitch / 64) rounded up to a multiple of k blocks).
//
// Build and run on a GPU host (CUDA 12+):
//   nvcc -O2 -o /tmp/blocklinear_array_probe benches/blocklinear_array_probe.cu -lcuda && /tmp/blocklinear_array_probe
//   for o in 512 4096 65536 2097152; do /tmp/blocklinear_array_probe off $o; done   (array offsets)
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                                       \
    do {                                                                                            \
        CUresult r_ = (x);                                                                          \
        if (r_ != CUDA_SUCCESS) {                                                                   \
            const char *s_ = 0;                                                                     \
            cuGetErrorName(r_, &s_);                                                                \
            printf("FAIL %s: %s (%d) line %d\n", #x, s_, (int)r_, __LINE__);                        \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static CUdevice dev;
static int numa = -1;

static const char *ename(CUresult r) {
    const char *s = "?";
    cuGetErrorName(r, &s);
    return s;
}

struct Vmm {
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    size_t size;
    CUexternalMemory ext;
};

static size_t granularity() {
    CUmemAllocationProp p = {};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    p.location.id = numa;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return g;
}

static Vmm vmm_alloc(size_t want) {
    Vmm v = {};
    size_t g = granularity();
    v.size = (want + g - 1) / g * g;
    CUmemAllocationProp p = {};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    p.location.id = numa;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CK(cuMemCreate(&v.h, v.size, &p, 0));
    CK(cuMemAddressReserve(&v.va, v.size, 0, 0, 0));
    CK(cuMemMap(v.va, v.size, 0, v.h, 0));
    CUmemAccessDesc a[2] = {};
    a[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a[0].location.id = dev;
    a[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    a[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    a[1].location.id = numa;
    a[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(v.va, v.size, a, 2));
    int fd = -1;
    CK(cuMemExportToShareableHandle(&fd, v.h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d = {};
    d.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;  // owned by CUDA after a successful import
    d.size = v.size;
    CK(cuImportExternalMemory(&v.ext, &d));
    return v;
}

static void vmm_free(Vmm &v) {
    CK(cuDestroyExternalMemory(v.ext));
    CK(cuMemUnmap(v.va, v.size));
    CK(cuMemAddressFree(v.va, v.size));
    CK(cuMemRelease(v.h));
}

static CUresult map_array(Vmm &v, size_t off, unsigned w, unsigned h, CUarray_format f, unsigned ch,
                          unsigned flags, CUmipmappedArray *mm, CUarray *arr) {
    CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC md = {};
    md.offset = off;
    md.arrayDesc.Width = w;
    md.arrayDesc.Height = h;
    md.arrayDesc.Depth = 0;
    md.arrayDesc.Format = f;
    md.arrayDesc.NumChannels = ch;
    md.arrayDesc.Flags = flags;
    md.numLevels = 1;
    CUresult r = cuExternalMemoryGetMappedMipmappedArray(mm, v.ext, &md);
    if (r != CUDA_SUCCESS) return r;
    return cuMipmappedArrayGetLevel(arr, *mm, 0);
}

// GOB candidates: 0 = the Tegra X1 TRM layout (x5 y2 y1 x4 y0 x3..x0), 1 = x5 y2 x4 y1 y0 x3..x0,
// 2 = x4 y2 x5 y1 y0 x3..x0 (the two orders the first run's data left open).
static int gob_kind = 0;
static inline size_t gob(size_t x, size_t y) {
    if (gob_kind == 1) return (x & 15) | ((y & 3) << 4) | ((x & 16) << 2) | ((y & 4) << 5) | ((x & 32) << 3);
    if (gob_kind == 2) return (x & 15) | ((y & 3) << 4) | ((x & 32) << 1) | ((y & 4) << 5) | ((x & 16) << 4);
    return (x & 15) | ((y & 1) << 4) | ((x & 16) << 1) | ((y & 6) << 5) | ((x & 32) << 3);
}

static inline size_t bl_off(size_t xb, size_t y, unsigned log2, size_t blocks_per_row) {
    size_t gobs = (size_t)1 << log2, brows = 8 * gobs, bbytes = 512 * gobs;
    return (y / brows) * blocks_per_row * bbytes + (xb / 64) * bbytes + ((y % brows) / 8) * 512 + gob(xb, y);
}

static inline unsigned char pat(size_t xb, size_t y) {
    unsigned long long k = (xb * 0x9E3779B97F4A7C15ull) ^ (y * 0xC2B2AE3D27D4EB4Full) ^ 0x5bd1e995;
    k ^= k >> 29;
    k *= 0xBF58476D1CE4E5B9ull;
    k ^= k >> 32;
    return (unsigned char)k;
}

static size_t req_size(unsigned w, unsigned h, CUarray_format f, unsigned ch, unsigned flags, size_t *align) {
    CUDA_ARRAY3D_DESCRIPTOR d = {};
    d.Width = w;
    d.Height = h;
    d.Format = f;
    d.NumChannels = ch;
    d.Flags = flags | CUDA_ARRAY3D_DEFERRED_MAPPING;
    CUarray a;
    CUresult r = cuArray3DCreate(&a, &d);
    if (r != CUDA_SUCCESS) {
        printf("  (deferred array: %s)\n", ename(r));
        return 0;
    }
    CUDA_ARRAY_MEMORY_REQUIREMENTS q = {};
    r = cuArrayGetMemoryRequirements(&q, a, dev);
    cuArrayDestroy(a);
    if (r != CUDA_SUCCESS) {
        printf("  (requirements: %s)\n", ename(r));
        return 0;
    }
    *align = q.alignment;
    return q.size;
}

// One shape: map at offset `off`, write the pattern, read linearly, compare with candidates.
static void probe(const char *name, unsigned w, unsigned h, unsigned bpp, unsigned flags, size_t off) {
    CUarray_format f = CU_AD_FORMAT_UNSIGNED_INT8;
    unsigned ch = bpp;
    size_t wb = (size_t)w * bpp;
    size_t align = 0, need = req_size(w, h, f, ch, flags, &align);
    size_t bpr = (wb + 63) / 64;
    size_t cap = off + (bpr + 15) / 16 * 16 * 64 * ((h + 255) / 256 * 256) + (2 << 20);  // any candidate fits
    Vmm v = vmm_alloc(cap);
    memset((void *)v.va, 0xEE, v.size);
    CUmipmappedArray mm;
    CUarray arr;
    CUresult r = map_array(v, off, w, h, f, ch, flags, &mm, &arr);
    if (r != CUDA_SUCCESS) {
        printf("%-22s %5ux%-5u bpp %u off %zu: map refused %s\n", name, w, h, bpp, off, ename(r));
        vmm_free(v);
        return;
    }
    std::vector<unsigned char> host(wb * h);
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < wb; x++) host[y * wb + x] = pat(x, y);
    CUDA_MEMCPY2D c = {};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host.data();
    c.srcPitch = wb;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = arr;
    c.WidthInBytes = wb;
    c.Height = h;
    CK(cuMemcpy2D(&c));
    CK(cuCtxSynchronize());
    const unsigned char *lin = (const unsigned char *)v.va + off;
    size_t span = v.size - off, last = 0, touched = 0;
    for (size_t i = 0; i < span; i++)
        if (lin[i] != 0xEE) last = i + 1, touched++;
    printf("%-22s %5ux%-5u bpp %u flags %u off %zu: req size %zu align %zu; written span %zu", name, w, h, bpp,
           flags, off, need, align, last);
    int found = 0;
    for (gob_kind = 0; gob_kind < 3 && !found; gob_kind++)
    for (unsigned k = 1; k <= 16 && !found; k *= 2)
        for (unsigned log2 = 0; log2 <= 5 && !found; log2++) {
            size_t rowb = (bpr + k - 1) / k * k;
            size_t bad = 0;
            for (size_t y = 0; y < h && !bad; y++)
                for (size_t x = 0; x < wb; x++)
                    if (lin[bl_off(x, y, log2, rowb)] != host[y * wb + x]) {
                        bad++;
                        break;
                    }
            if (!bad) {
                size_t gobs = (size_t)1 << log2;
                size_t brows = (h + 8 * gobs - 1) / (8 * gobs);
                printf("; MATCH gob %d, block height %zu GOBs (log2 %u), blocks per row %zu (pitch %zu), size %zu\n",
                       gob_kind, gobs, log2, rowb, rowb * 64, brows * rowb * 512 * gobs);
                found = 1;
            }
        }
    if (!found) {
        // Where the first bytes of some rows and GOB columns landed.
        printf("; NO candidate matched\n   first 64 bytes row0:");
        for (int i = 0; i < 64; i++) printf(" %02x", lin[i]);
        printf("\n   want row0:");
        for (int i = 0; i < 16; i++) printf(" %02x", host[i]);
        printf("\n   want row1:");
        for (int i = 0; i < 16; i++) printf(" %02x", host[wb + i]);
        printf("\n");
    }
    // The mapped-buffer view of the same memory agrees with the CPU view.
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC bd = {};
    bd.offset = 0;
    bd.size = v.size;
    CUdeviceptr dp;
    CK(cuExternalMemoryGetMappedBuffer(&dp, v.ext, &bd));
    std::vector<unsigned char> back(v.size);
    CK(cuMemcpyDtoH(back.data(), dp, v.size));
    if (memcmp(back.data(), (void *)v.va, v.size)) printf("   mapped buffer and CPU view DIFFER\n");
    CK(cuMemFree(dp));
    CK(cuMipmappedArrayDestroy(mm));
    vmm_free(v);
}

int main(int argc, char **argv) {
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    char nm[128];
    cuDeviceGetName(nm, sizeof nm, dev);
    int drv = 0;
    cuDriverGetVersion(&drv);
    CK(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
    printf("%s driver %d host numa id %d\n", nm, drv, numa);
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    printf("host-NUMA VMM granularity %zu\n", granularity());
    if (argc == 3 && !strcmp(argv[1], "off")) {
        // One offset per process: a bad one leaves the context unusable (sticky error).
        probe("R8 1920x1080 @off", 1920, 1080, 1, 0, (size_t)atol(argv[2]));
        probe("RG8 960x540 @off", 960, 540, 2, 0, (size_t)atol(argv[2]));
        printf("done\n");
        return 0;
    }

    const unsigned hs[] = {1, 7, 8, 9, 16, 17, 24, 32, 33, 48, 64, 65, 96, 128, 129, 192, 256, 257, 512, 540, 1080, 2160};
    for (unsigned h : hs) probe("R8 1920", 1920, h, 1, 0, 0);
    for (unsigned h : {8u, 64u, 270u, 540u, 1080u}) probe("RG8 960", 960, h, 2, 0, 0);
    probe("RGBA8 1920x1080", 1920, 1080, 4, 0, 0);
    probe("RGBA8 3840x2160", 3840, 2160, 4, 0, 0);
    probe("R8 100x50", 100, 50, 1, 0, 0);
    probe("R8 1x1", 1, 1, 1, 0, 0);
    probe("R8 4096x16", 4096, 16, 1, 0, 0);
    probe("R8 1920x1080 surf", 1920, 1080, 1, CUDA_ARRAY3D_SURFACE_LDST, 0);
    probe("RGBA8 1920x1080 surf", 1920, 1080, 4, CUDA_ARRAY3D_SURFACE_LDST, 0);
    probe("RG8 1920x1080 surf", 1920, 1080, 2, CUDA_ARRAY3D_SURFACE_LDST, 0);
    probe("RGBA8 333x77", 333, 77, 4, 0, 0);
    probe("RG8 50x65", 50, 65, 2, 0, 0);
    probe("R8 100x130", 100, 130, 1, 0, 0);
    probe("RGBA8 64x1", 64, 1, 4, 0, 0);
    for (unsigned h : {2u, 3u, 4u, 5u, 12u, 20u, 40u, 100u, 200u, 300u, 1000u})
        probe("RGBA8 256", 256, h, 4, 0, 0);
    // Offsets inside the imported memory: run with `off N`, one process per offset.
    // Two planes of one allocation, NV12-like: Y at 0, UV right after the Y plane's size.
    {
        size_t a0 = 0, a1 = 0;
        size_t s0 = req_size(1920, 1080, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0, &a0);
        size_t s1 = req_size(960, 540, CU_AD_FORMAT_UNSIGNED_INT8, 2, 0, &a1);
        printf("NV12 1080p requirements: Y %zu (align %zu), UV %zu (align %zu)\n", s0, a0, s1, a1);
        Vmm v = vmm_alloc(s0 + s1 + (2 << 20));
        CUmipmappedArray m0, m1;
        CUarray y, uv;
        CUresult r0 = map_array(v, 0, 1920, 1080, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0, &m0, &y);
        CUresult r1 = map_array(v, s0, 960, 540, CU_AD_FORMAT_UNSIGNED_INT8, 2, 0, &m1, &uv);
        printf("NV12 one allocation: Y at 0 %s, UV at %zu %s\n", ename(r0), s0, ename(r1));
        if (r0 == CUDA_SUCCESS) cuMipmappedArrayDestroy(m0);
        if (r1 == CUDA_SUCCESS) cuMipmappedArrayDestroy(m1);
        // Imported memory smaller than the array needs.
        vmm_free(v);
    }
    {
        // An array that does not fit in the imported memory.
        Vmm v = vmm_alloc(1);
        CUmipmappedArray m;
        CUarray a;
        CUresult r = map_array(v, 0, 1920, 1080, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0, &m, &a);
        printf("1920x1080 R8 array in %zu bytes: %s\n", v.size, ename(r));
        if (r == CUDA_SUCCESS) cuMipmappedArrayDestroy(m);
        vmm_free(v);
    }
    printf("done\n");
    return 0;
}
