/* SPDX-License-Identifier: MIT */
/*
 * test_ipc_proto.c - the IPC wire protocol (src/ipc_proto.c) without I/O:
 * every message type round-trips, and malformed input (short, long, wrong
 * magic or version, bad counts, descriptor counts that do not match,
 * overlapping or misaligned layouts, control characters) is refused with
 * CMS_ERR_PROTOCOL, never a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ipc_proto.h"

static uint8_t *enc(const struct cms_ipc_msg *m, size_t *len)
{
	uint8_t *buf = NULL;
	char why[256] = "";

	ck_assert_msg(cms_ipc_encode(m, &buf, len, why, sizeof(why)) == CMS_OK, "%s", why);
	return buf;
}

static cms_status dec(const uint8_t *buf, size_t len, size_t nfds, struct cms_ipc_msg *out)
{
	char why[256] = "";
	cms_status st = cms_ipc_decode(buf, len, nfds, out, why, sizeof(why));

	if (st)
		ck_assert_msg(why[0], "a refusal without a reason");
	return st;
}

static struct cms_ipc_alloc_desc descs[3] = {
	{ 0, 100, 2 << 20, 0x7f0000000000ull },
	{ 2 << 20, 4 << 20, 4 << 20, 0x7f0000400000ull },
	{ 6 << 20, 1, 2 << 20, 0x7f0001000000ull },
};

static struct cms_ipc_msg layout(void)
{
	struct cms_ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_LAYOUT;
	strcpy(m.tag, "weights");
	m.device = 1;
	m.access = CMS_IPC_ACCESS_READWRITE;
	m.state = CMS_STATE_ACTIVE;
	m.epoch = 7;
	m.granularity = 2 << 20;
	m.total = 8 << 20;
	m.nallocs = 3;
	m.allocs = descs;
	return m;
}

START_TEST(round_trip_every_type)
{
	struct cms_ipc_region_status rs = { "kv", 0, 2, 1, 3, 4, 5, 6, 7, 8 };
	struct cms_ipc_region_stats ss;
	struct cms_ipc_msg m, d;
	uint8_t *buf;
	size_t len;
	uint16_t t;

	memset(&ss, 0, sizeof(ss)); /* every counter distinct: a swapped field shows */
	strcpy(ss.tag, "a\"b");
	ss.device = 3;
	ss.policy = 2;
	ss.state = 1;
	for (size_t k = 0; k < CMS_IPC_STATS_SLOTS; k++)
		ss.failures_by_status[k] = 1000 + k;
	ss.region_id = 11, ss.pauses = 12, ss.resumes = 13, ss.swaps = 14, ss.failures = 15;
	ss.bytes_released = 16, ss.bytes_backed = 17, ss.bytes_to_store = 18;
	ss.bytes_from_store = 19, ss.pause_ns = 20, ss.resume_ns = 21;
	for (t = 1; t <= CMS_IPC_TYPE_MAX; t++) {
		memset(&m, 0, sizeof(m));
		m.type = t;
		switch (t) {
		case CMS_IPC_HELLO:
			strcpy(m.tag, "w");
			m.device = -1;
			m.access = CMS_IPC_ACCESS_READ;
			strcpy(m.name, "me");
			break;
		case CMS_IPC_LAYOUT:
			m = layout();
			break;
		case CMS_IPC_FDS:
			m.first = 250;
			m.nfds = 3;
			break;
		case CMS_IPC_MAPPED:
		case CMS_IPC_REVOKED:
			m.seq = 99;
			m.status = CMS_ERR_REFUSED;
			break;
		case CMS_IPC_REVOKE:
			m.seq = 5;
			break;
		case CMS_IPC_ERROR:
			m.status = CMS_ERR_NOT_FOUND;
			strcpy(m.text, "no region");
			break;
		case CMS_IPC_CTL_REQUEST:
			m.op = CMS_IPC_OP_PAUSE;
			strcpy(m.tag, "kv");
			break;
		case CMS_IPC_CTL_PROGRESS:
			strcpy(m.text, "pausing");
			break;
		case CMS_IPC_CTL_REPLY:
			m.status = 0;
			m.bytes = 12;
			m.nregions = 1;
			m.regions = &rs;
			break;
		case CMS_IPC_CTL_STATS:
			strcpy(m.text, "ok");
			m.nstats = 1;
			m.stats = &ss;
			break;
		}
		buf = enc(&m, &len);
		ck_assert_int_eq(dec(buf, len, t == CMS_IPC_FDS ? 3 : 0, &d), CMS_OK);
		ck_assert_int_eq(d.type, t);
		ck_assert_str_eq(d.tag, m.tag);
		ck_assert_str_eq(d.text, m.text);
		ck_assert_int_eq(d.status, m.status);
		ck_assert_uint_eq(d.seq, m.seq);
		ck_assert_uint_eq(d.nallocs, m.nallocs);
		if (m.nallocs)
			ck_assert_int_eq(memcmp(d.allocs, m.allocs, sizeof(descs)), 0);
		ck_assert_uint_eq(d.nregions, m.nregions);
		if (m.nregions)
			ck_assert_int_eq(memcmp(d.regions, &rs, sizeof(rs)), 0);
		ck_assert_uint_eq(d.nstats, m.nstats);
		if (m.nstats)
			ck_assert_int_eq(memcmp(d.stats, &ss, sizeof(ss)), 0);
		/* every strict prefix is refused */
		for (size_t k = 0; k < len; k++) {
			struct cms_ipc_msg x;

			ck_assert_int_eq(dec(buf, k, t == CMS_IPC_FDS ? 3 : 0, &x),
					 CMS_ERR_PROTOCOL);
			cms_ipc_msg_free(&x);
		}
		cms_ipc_msg_free(&d);
		free(buf);
	}
}
END_TEST

START_TEST(header_refusals)
{
	struct cms_ipc_msg m = layout(), d;
	uint8_t *buf;
	size_t len;

	buf = enc(&m, &len);
	buf[0] ^= 1; /* magic */
	ck_assert_int_eq(dec(buf, len, 0, &d), CMS_ERR_PROTOCOL);
	buf[0] ^= 1;
	buf[4] = 2; /* version */
	ck_assert_int_eq(dec(buf, len, 0, &d), CMS_ERR_PROTOCOL);
	buf[4] = 1;
	buf[6] = 0; /* type 0 */
	ck_assert_int_eq(dec(buf, len, 0, &d), CMS_ERR_PROTOCOL);
	buf[6] = 77; /* unknown type */
	ck_assert_int_eq(dec(buf, len, 0, &d), CMS_ERR_PROTOCOL);
	buf[6] = CMS_IPC_LAYOUT;
	ck_assert_int_eq(dec(buf, len, 1, &d), CMS_ERR_PROTOCOL); /* a descriptor too many */
	buf[12] = 1;						  /* announced with LAYOUT */
	ck_assert_int_eq(dec(buf, len, 1, &d), CMS_ERR_PROTOCOL);
	buf[12] = 0;
	ck_assert_int_eq(dec(buf, len, 0, &d), CMS_OK);
	cms_ipc_msg_free(&d);
	free(buf);
	/* trailing bytes */
	buf = enc(&m, &len);
	buf = realloc(buf, len + 1);
	buf[len] = 0;
	buf[8]++;
	ck_assert_int_eq(dec(buf, len + 1, 0, &d), CMS_ERR_PROTOCOL);
	free(buf);
}
END_TEST

START_TEST(descriptor_counts)
{
	struct cms_ipc_msg m, d;
	uint8_t *buf;
	size_t len;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_FDS;
	m.nfds = 2;
	buf = enc(&m, &len);
	ck_assert_int_eq(dec(buf, len, 2, &d), CMS_OK);
	ck_assert_int_eq(dec(buf, len, 1, &d), CMS_ERR_PROTOCOL);
	ck_assert_int_eq(dec(buf, len, 3, &d), CMS_ERR_PROTOCOL);
	buf[len - 4] = 3; /* payload count differs from the header's */
	ck_assert_int_eq(dec(buf, len, 2, &d), CMS_ERR_PROTOCOL);
	free(buf);
	m.nfds = CMS_IPC_MAX_FDS + 1;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_ERR_INVALID_ARGUMENT);
	m.nfds = 0;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(layout_refusals)
{
	struct cms_ipc_alloc_desc bad[3];
	struct cms_ipc_msg m = layout();
	char why[256];
	int k;

	ck_assert_int_eq(cms_ipc_check_layout(&m, why, sizeof(why)), CMS_OK);
	for (k = 0; k < 9; k++) {
		memcpy(bad, descs, sizeof(bad));
		m = layout();
		m.allocs = bad;
		switch (k) {
		case 0:
			bad[1].offset = 1 << 20;
			break; /* overlaps */
		case 1:
			bad[1].offset += 4096;
			break; /* misaligned */
		case 2:
			bad[2].physical = 0;
			break; /* empty */
		case 3:
			bad[0].size = (2 << 20) + 1;
			break; /* size above physical */
		case 4:
			m.total = 6 << 20;
			break; /* outside the total */
		case 5:
			m.granularity = 3 << 20;
			break; /* not a power of two */
		case 6:
			m.nallocs = CMS_IPC_MAX_ALLOCS + 1;
			break;
		case 7:
			bad[1].exporter_ptr = bad[0].exporter_ptr;
			break; /* pointers overlap */
		case 8:
			m.total = 10 << 20;
			break; /* a hole at the end */
		}
		ck_assert_msg(cms_ipc_check_layout(&m, why, sizeof(why)) == CMS_ERR_PROTOCOL,
			      "case %d accepted", k);
	}
}
END_TEST

START_TEST(strings_refused)
{
	struct cms_ipc_msg m, d;
	uint8_t *buf;
	size_t len, i;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_STATUS; /* empty tag allowed for status only */
	buf = enc(&m, &len);
	free(buf);
	m.op = CMS_IPC_OP_PAUSE;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_ERR_INVALID_ARGUMENT);
	strcpy(m.tag, "abc");
	buf = enc(&m, &len);
	for (i = 0; i + 3 <= len; i++) /* put a control character in the tag */
		if (!memcmp(buf + i, "abc", 3))
			buf[i + 1] = '\n';
	ck_assert_int_eq(dec(buf, len, 0, &d), CMS_ERR_PROTOCOL);
	free(buf);
	m.op = 9;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_ERR_INVALID_ARGUMENT);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_ERROR;
	m.status = 0; /* an ERROR must carry an error */
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_ERR_INVALID_ARGUMENT);
	m.status = 5;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A refused control request says what is wrong in words: the operation by name and an empty
 * tag said to be empty, a control character in the tag said so, an unknown operation by
 * number (before: "request: op 2, tag", and "a string is too long" for a control character). */
static void ck_request_why(uint32_t op, const char *tag, const char *w1, const char *w2)
{
	struct cms_ipc_msg m;
	uint8_t *buf = NULL;
	char why[256] = "";
	size_t len;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = op;
	snprintf(m.tag, sizeof(m.tag), "%s", tag);
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, why, sizeof(why)),
			 CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(buf);
	ck_assert_msg(strstr(why, w1) && strstr(why, w2),
		      "op %u, tag '%s': '%s' lacks '%s' or '%s'", op, tag, why, w1, w2);
}

START_TEST(request_refusals_in_words)
{
	struct cms_ipc_msg m, d;
	uint8_t *buf;
	size_t len, i;
	char why[256] = "";

	ck_request_why(CMS_IPC_OP_PAUSE, "", "pause", "empty tag");
	ck_request_why(CMS_IPC_OP_RESUME, "", "resume", "empty tag");
	ck_request_why(CMS_IPC_OP_PAUSE, "a\tb", "tag", "control character");
	ck_request_why(9, "kv", "unknown operation 9", "");
	/* the receiving side: a control character put in an encoded tag */
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_RESUME;
	strcpy(m.tag, "abc");
	buf = enc(&m, &len);
	for (i = 0; i + 3 <= len; i++)
		if (!memcmp(buf + i, "abc", 3))
			buf[i + 1] = '\n';
	ck_assert_int_eq(cms_ipc_decode(buf, len, 0, &d, why, sizeof(why)), CMS_ERR_PROTOCOL);
	ck_assert_msg(strstr(why, "control character") != NULL, "decode: '%s'", why);
	free(buf);
}
END_TEST

START_TEST(huge_counts_do_not_allocate)
{
	/* A layout announcing 65536 allocations in a short payload is refused before any
	 * allocation of that size. */
	struct cms_ipc_msg m = layout(), d;
	uint8_t *buf;
	size_t len;

	m.nallocs = 0;
	m.allocs = NULL;
	m.total = 0;
	buf = enc(&m, &len);
	buf[len - 4] = 0x00, buf[len - 3] = 0x00, buf[len - 2] = 0x01; /* 65536 */
	ck_assert_int_eq(dec(buf, len, 0, &d), CMS_ERR_PROTOCOL);
	free(buf);
}
END_TEST

/* The IPC option structs follow the library's struct rules (no driver needed to refuse). */
START_TEST(options_structs)
{
	cms_exporter_options eo, einit = CMS_EXPORTER_OPTIONS_INIT;
	cms_import_options io, iinit = CMS_IMPORT_OPTIONS_INIT;
	cms_control_options co, cinit = CMS_CONTROL_OPTIONS_INIT;
	struct {
		cms_exporter_options o;
		uint64_t tail;
	} big;
	cms_exporter *exp = NULL;
	cms_import *imp = NULL;
	cms_control *ctl = NULL;
	cms_context *ctx;

	ck_ok(cms_exporter_options_init(&eo));
	ck_ok(cms_import_options_init(&io));
	ck_ok(cms_control_options_init(&co));
	ck_assert_int_eq(memcmp(&eo, &einit, sizeof(eo)), 0);
	ck_assert_int_eq(memcmp(&io, &iinit, sizeof(io)), 0);
	ck_assert_int_eq(memcmp(&co, &cinit, sizeof(co)), 0);
	ck_assert_int_eq(io.exporter_device, -1);
	ck_status(cms_exporter_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_import_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_control_options_init(NULL), CMS_ERR_INVALID_ARGUMENT);

	ck_ok(cms_context_create(NULL, &ctx));
	eo.struct_size = 4;
	ck_status(cms_exporter_create(ctx, "/tmp/x.sock", &eo, &exp), CMS_ERR_STRUCT_SIZE);
	memset(&big, 0, sizeof(big));
	big.o = einit;
	big.o.struct_size = sizeof(big);
	big.tail = 1;
	ck_status(cms_exporter_create(ctx, "/tmp/x.sock", &big.o, &exp), CMS_ERR_STRUCT_SIZE);
	eo = einit;
	eo.flags = 1;
	ck_status(cms_exporter_create(ctx, "/tmp/x.sock", &eo, &exp), CMS_ERR_INVALID_ARGUMENT);
	eo = einit;
	eo.nallowed_uids = 2; /* no list */
	ck_status(cms_exporter_create(ctx, "/tmp/x.sock", &eo, &exp), CMS_ERR_INVALID_ARGUMENT);
	io.struct_size = 8;
	ck_status(cms_import_open(ctx, "/tmp/x.sock", "w", &io, &imp), CMS_ERR_STRUCT_SIZE);
	io = iinit;
	io.flags = 0x10;
	ck_status(cms_import_open(ctx, "/tmp/x.sock", "w", &io, &imp), CMS_ERR_INVALID_ARGUMENT);
	io = iinit;
	io.exporter_device = -2;
	ck_status(cms_import_open(ctx, "/tmp/x.sock", "w", &io, &imp), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_import_open(ctx, "/tmp/x.sock", NULL, NULL, &imp), CMS_ERR_INVALID_ARGUMENT);
	co.struct_size = 8;
	ck_status(cms_control_create(ctx, "/tmp/x.sock", &co, &ctl), CMS_ERR_STRUCT_SIZE);
	co = cinit;
	co.flags = 4;
	ck_status(cms_control_create(ctx, "/tmp/x.sock", &co, &ctl), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(exp);
	ck_assert_ptr_null(imp);
	ck_assert_ptr_null(ctl);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("ipc_proto");
	TCase *t = tcase_create("proto");

	tcase_add_test(t, round_trip_every_type);
	tcase_add_test(t, header_refusals);
	tcase_add_test(t, descriptor_counts);
	tcase_add_test(t, layout_refusals);
	tcase_add_test(t, strings_refused);
	tcase_add_test(t, request_refusals_in_words);
	tcase_add_test(t, huge_counts_do_not_allocate);
	tcase_add_test(t, options_structs);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_NOTHING);
}
