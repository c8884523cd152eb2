/* SPDX-License-Identifier: MIT */
/*
 * adapters.h - clients of the API inside the library: PyTorch's allocator
 * hooks (hooks.c) and the control socket (control.c). The LD_PRELOAD
 * interposer (preload.c) is a library of its own over the public header.
 */
#ifndef CMS_ADAPTERS_H
#define CMS_ADAPTERS_H

#include "api.h"

#endif /* CMS_ADAPTERS_H */
