/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ipc.c - libFuzzer target for the IPC wire protocol decoder
 * (src/ipc_proto.c): any byte string, with any announced descriptor count,
 * decodes to CMS_OK or CMS_ERR_PROTOCOL (or an allocation failure), never
 * crashes, and everything it accepts encodes back to the same bytes and
 * passes the layout check.
 */
#include <string.h>

#include "fuzz_common.h"
#include "ipc_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cms_ipc_msg m;
	size_t nfds = 0, len;
	uint8_t *out;
	char why[256];
	cms_status st;

	uint8_t *framed = NULL;

	if (size) { /* the first byte picks the number of descriptors "received" */
		nfds = data[0] % 4 == 3 ? data[0] >> 2 : 0;
		data++;
		size--;
	}
	if (size && data[0] >= 0x80) {
		/* Half the inputs get a valid header (type from the next byte, the rest as
		 * payload) so that the payload decoders are reached quickly. */
		uint32_t payload = (uint32_t)(size - 2 < size ? size - 2 : 0), k;
		uint8_t hdr[CMS_IPC_HEADER_SIZE] = { 'C', 'M', 'S', 'I', CMS_IPC_VERSION, 0 };

		if (size < 2)
			return 0;
		hdr[6] = (uint8_t)(data[1] % CMS_IPC_TYPE_MAX + 1);
		for (k = 0; k < 4; k++) {
			hdr[8 + k] = (uint8_t)(payload >> (8 * k));
			hdr[12 + k] = (uint8_t)(hdr[6] == CMS_IPC_FDS ? nfds >> (8 * k) : 0);
		}
		framed = malloc(sizeof(hdr) + payload);
		FUZZ_REQUIRE(framed);
		memcpy(framed, hdr, sizeof(hdr));
		memcpy(framed + sizeof(hdr), data + 2, payload);
		data = framed;
		size = sizeof(hdr) + payload;
	}
	st = cms_ipc_decode(data, size, nfds, &m, why, sizeof(why));
	FUZZ_REQUIRE(st == CMS_OK || st == CMS_ERR_PROTOCOL || st == CMS_ERR_OUT_OF_HOST_MEMORY);
	if (st == CMS_OK) {
		FUZZ_REQUIRE(m.type >= 1 && m.type <= CMS_IPC_TYPE_MAX);
		FUZZ_REQUIRE(m.nfds == nfds);
		if (m.type == CMS_IPC_LAYOUT)
			FUZZ_REQUIRE(cms_ipc_check_layout(&m, why, sizeof(why)) == CMS_OK);
		FUZZ_REQUIRE(cms_ipc_encode(&m, &out, &len, why, sizeof(why)) == CMS_OK);
		FUZZ_REQUIRE(len == size && !memcmp(out, data, size));
		free(out);
	}
	cms_ipc_msg_free(&m);
	free(framed);
	return 0;
}
