/*
 * Entry header for bindgen. NVSCI_SYS_REAL_HEADERS selects the vendor SDK headers instead of the
 * clean-room ones. Either way, every PFN_* type of nvsci_fns.h is checked at parse time against
 * the prototype it mirrors, so regenerating against the vendor headers fails loudly if a
 * signature differs.
 */
#ifdef NVSCI_SYS_REAL_HEADERS
#include <nvscierror.h>
#include <nvsciipc.h>
#include <nvscibuf.h>
#include <nvscisync.h>
#else
#include "nvsci_error.h"
#include "nvsci_ipc.h"
#include "nvsci_buf.h"
#include "nvsci_sync.h"
#endif

#include "nvsci_fns.h"

#define NVSCI_SYS_CHECK_FN(name)                                                          \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), PFN_##name),            \
                   "PFN_" #name " does not match the prototype of " #name);
NVSCI_SYS_FOR_EACH_FN(NVSCI_SYS_CHECK_FN)
