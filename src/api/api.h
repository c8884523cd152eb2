/* SPDX-License-Identifier: MIT */
/*
 * api.h - the public entry points for contexts, regions, allocations and
 * pause/resume/swap: argument checks, option copy-in, tag selection and
 * locking; below them the engine (engine/) and sharing (ipc/).
 */
#ifndef CMS_API_H
#define CMS_API_H

#include "ipc.h"

#endif /* CMS_API_H */
