/*
 * nvsci-sys clean-room ABI header: NvSciIpc 1.x endpoint type, event bits and the functions a
 * Linux process uses to open an endpoint, wait for its events and move frames through it.
 *
 * Written for the nvsci Rust crates from documented ABI facts (NVIDIA's published nvsciipc.h,
 * DRIVE OS 5.2.6, 6.0.5 and 6.0.10). QNX-only and NvSciEvent-service functions are not declared.
 */
#ifndef NVSCI_SYS_IPC_H
#define NVSCI_SYS_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvsci_error.h"

/* Header version this binding was written against. */
#define NVSCI_SYS_IPC_MAJOR_VERSION 1
#define NVSCI_SYS_IPC_MINOR_VERSION 0

/* IPC endpoint handle (an integer, not a pointer). */
typedef uint64_t NvSciIpcEndpoint;

/* Geometry of an endpoint's channel: frames in flight and bytes per frame. */
typedef struct NvSciIpcEndpointInfo {
    uint32_t nframes;
    uint32_t frame_size;
} NvSciIpcEndpointInfo;

/* Longest endpoint name, including the terminating NUL. */
#define NVSCIIPC_MAX_ENDPOINT_NAME 64

/* Event bits reported by NvSciIpcGetEvent. */
#define NV_SCI_IPC_EVENT_READ 0x01
#define NV_SCI_IPC_EVENT_WRITE 0x02
#define NV_SCI_IPC_EVENT_CONN_EST 0x04
#define NV_SCI_IPC_EVENT_CONN_RESET 0x08
#define NV_SCI_IPC_EVENT_WRITE_EMPTY 0x10
#define NV_SCI_IPC_EVENT_ASYNC_ERROR 0x20
#define NV_SCI_IPC_EVENT_CONN_EST_ALL 0x17

/* "Wait forever" for the timeouts of the NvSciIpc-based import functions. */
#define NVSCIIPC_INFINITE_WAIT -1

NvSciError NvSciIpcInit(void);
void NvSciIpcDeinit(void);
NvSciError NvSciIpcOpenEndpoint(const char* endpoint, NvSciIpcEndpoint* handle);
void NvSciIpcCloseEndpoint(NvSciIpcEndpoint handle);
NvSciError NvSciIpcCloseEndpointSafe(NvSciIpcEndpoint handle, bool clear);
void NvSciIpcResetEndpoint(NvSciIpcEndpoint handle);
NvSciError NvSciIpcResetEndpointSafe(NvSciIpcEndpoint handle);
NvSciError NvSciIpcRead(NvSciIpcEndpoint handle, void* buf, size_t size, int32_t* bytes);
NvSciError NvSciIpcReadSafe(NvSciIpcEndpoint handle, void* buf, uint32_t size, uint32_t* bytes);
NvSciError NvSciIpcWrite(NvSciIpcEndpoint handle, const void* buf, size_t size, int32_t* bytes);
NvSciError NvSciIpcWriteSafe(NvSciIpcEndpoint handle, const void* buf, uint32_t size, uint32_t* bytes);
NvSciError NvSciIpcGetEndpointInfo(NvSciIpcEndpoint handle, NvSciIpcEndpointInfo* info);
NvSciError NvSciIpcGetLinuxEventFd(NvSciIpcEndpoint handle, int32_t* fd);
NvSciError NvSciIpcGetEvent(NvSciIpcEndpoint handle, uint32_t* events);
NvSciError NvSciIpcGetEventSafe(NvSciIpcEndpoint handle, uint32_t* events);
NvSciError NvSciIpcCheckVersionCompatibility(uint32_t majorVer, uint32_t minorVer, bool* isCompatible);

#endif
