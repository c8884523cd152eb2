/* SPDX-License-Identifier: MIT */
/*
 * discard.c - CMS_POLICY_DISCARD: nothing is kept; after a resume the content
 * is undefined (a KV cache, scratch buffers). Every operation is absent.
 */
#include "store_internal.h"

const struct cms_store_ops cms_store_discard = {
	.name = "discard",
};
