/* SPDX-License-Identifier: MIT */
/*
 * test_ipc_hostile.c - the importer (src/ipc/ipc_import.c) against a hostile
 * exporter (issue 34): this thread listens on the socket and speaks the
 * protocol wrongly, while cms_import_open runs on another thread or an
 * import's own thread serves the connection: descriptors not announced, late
 * or too many, of the wrong kind or size; counts and indexes out of range;
 * truncated messages, huge lengths, closing mid-message, stalling; a grant
 * while the memory is mapped; statuses and access the importer never asked
 * for. Each attack must end in a documented status without a crash, and leave
 * no descriptor, handle, mapping or reservation behind once the import is
 * closed. The memory granted is the simulation's (memfds exported by this
 * process: the simulation maps them like the driver's handles).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/sockios.h>

#include "common.h"
#include "ipc_sock.h"

#define KiB 1024ull
#define GRAN (64 * KiB)	       /* CMS_SIM_GRANULARITY of this test (tests/CMakeLists.txt) */
#define XPTR 0x7f0000000000ull /* the fake exporter's first allocation */

/* ---- the log of the context: what the import's thread reported ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];

static void log_line(void *user, int32_t level, const char *message)
{
	size_t n;

	(void)user;
	(void)level;
	pthread_mutex_lock(&log_mu);
	n = strlen(log_text);
	snprintf(log_text + n, sizeof(log_text) - n, "%s\n", message);
	pthread_mutex_unlock(&log_mu);
}

/* Whether a line logged so far contains s. */
static int logged(const char *s)
{
	int found;

	pthread_mutex_lock(&log_mu);
	found = strstr(log_text, s) != NULL;
	pthread_mutex_unlock(&log_mu);
	return found;
}

static cms_context *log_ctx(void)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *ctx;

	log_text[0] = '\0';
	o.log_fn = log_line;
	ck_ok(cms_context_create(&o, &ctx));
	return ctx;
}

/* ---- memory to grant: the simulation's physical allocations, exported ---- */

struct mem {
	CUmemGenericAllocationHandle h;
	int fd;
};

static void mem_create(struct mem *m, size_t size)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = 0;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	ck_assert_int_eq(t_drv()->cuMemCreate(&m->h, size, &p, 0), CUDA_SUCCESS);
	ck_assert_int_eq(t_drv()->cuMemExportToShareableHandle(
				 &m->fd, m->h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
			 CUDA_SUCCESS);
}

static void mem_free(struct mem *m)
{
	close(m->fd);
	ck_assert_int_eq(t_drv()->cuMemRelease(m->h), CUDA_SUCCESS);
}

/* ---- the fake exporter ---- */

struct fake {
	cms_context *ctx;
	char path[108];
	int lfd, c;
	struct cms_ipc_sockfile file;
	cms_import_options io;
	pthread_t th;
	bool opening;
	cms_import *imp;
	cms_status st;
	char msg[512];
};

static void *open_main(void *arg)
{
	struct fake *f = arg;

	f->st = cms_import_open(f->ctx, f->path, "x", &f->io, &f->imp);
	cms_last_error_message(f->msg, sizeof(f->msg));
	return NULL;
}

/* Listens, starts cms_import_open (timeout_ms; flags) on a thread, accepts it and reads its
 * HELLO. */
static void fake_start(struct fake *f, cms_context *ctx, uint32_t timeout_ms, uint64_t flags)
{
	static int n;
	struct cms_ipc_msg m;
	char why[256];
	pid_t pid;
	uid_t uid;

	memset(f, 0, sizeof(*f));
	f->ctx = ctx;
	snprintf(f->path, sizeof(f->path), "/tmp/cms-hostile-%d-%d.sock", (int)getpid(), n++);
	ck_assert_msg(!cms_ipc_listen(f->path, &f->lfd, &f->file, why, sizeof(why)), "%s", why);
	f->io = (cms_import_options)CMS_IMPORT_OPTIONS_INIT;
	f->io.timeout_ms = timeout_ms;
	f->io.flags = flags;
	ck_assert_int_eq(pthread_create(&f->th, NULL, open_main, f), 0);
	f->opening = true;
	ck_assert_int_eq(poll(&(struct pollfd){ f->lfd, POLLIN, 0 }, 1, 20000), 1);
	ck_assert_msg(
		!cms_ipc_accept(f->lfd, NULL, 0, "", f->path, &f->c, &pid, &uid, why, sizeof(why)),
		"%s", why);
	ck_assert_msg(!cms_ipc_recv(f->c, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
		      "%s", why);
	ck_assert_int_eq(m.type, CMS_IPC_HELLO);
	cms_ipc_msg_free(&m);
}

/* Waits for cms_import_open's outcome. */
static cms_status fake_opened(struct fake *f)
{
	ck_assert(f->opening);
	ck_assert_int_eq(pthread_join(f->th, NULL), 0);
	f->opening = false;
	return f->st;
}

static void fake_end(struct fake *f)
{
	if (f->opening)
		fake_opened(f);
	if (f->c >= 0)
		close(f->c);
	close(f->lfd);
	cms_ipc_unlink(&f->file);
}

/* Sends bytes [off, off + n) of the encoded m, with nfds descriptors fds attached (as far as
 * the importer reads: one that closed has refused an earlier message). */
static void send_part(struct fake *f, const struct cms_ipc_msg *m, size_t off, size_t n,
		      const int *fds, uint32_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh;
	struct iovec iov;
	uint8_t *buf;
	size_t len;

	ck_assert_int_eq(cms_ipc_encode(m, &buf, &len, NULL, 0), CMS_OK);
	if (n == SIZE_MAX)
		n = len - off;
	ck_assert_uint_le(off + n, len);
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = buf + off;
	iov.iov_len = n;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds) {
		struct cmsghdr *c;

		ck_assert_uint_le(nfds, 253);
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	while (n) { /* the socket is non-blocking: the rest when the importer has read */
		ssize_t k = sendmsg(f->c, &mh, MSG_NOSIGNAL);

		if (k < 0 && errno == EAGAIN) {
			ck_assert_int_eq(poll(&(struct pollfd){ f->c, POLLOUT, 0 }, 1, 20000), 1);
			continue;
		}
		if (k < 0 && (errno == EPIPE || errno == ECONNRESET))
			break; /* the importer gave up before this message (huge_total) */
		ck_assert_int_gt(k, 0);
		iov.iov_base = (uint8_t *)iov.iov_base + k;
		iov.iov_len -= (size_t)k;
		n -= (size_t)k;
		mh.msg_control = NULL; /* the descriptors went with the first byte */
		mh.msg_controllen = 0;
	}
	free(buf);
}

static void send_whole(struct fake *f, const struct cms_ipc_msg *m, const int *fds, uint32_t nfds)
{
	send_part(f, m, 0, SIZE_MAX, fds, nfds);
}

/* A LAYOUT of n allocations of size bytes each (physical: size rounded up to GRAN). */
static void layout(struct cms_ipc_msg *m, struct cms_ipc_alloc_desc *d, uint32_t n, uint64_t size,
		   uint32_t state)
{
	uint64_t phys = (size + GRAN - 1) / GRAN * GRAN;
	uint32_t i;

	memset(m, 0, sizeof(*m));
	m->type = CMS_IPC_LAYOUT;
	strcpy(m->tag, "x");
	m->access = CMS_IPC_ACCESS_READWRITE;
	m->state = state;
	m->epoch = 1;
	m->granularity = GRAN;
	m->nallocs = n;
	m->allocs = d;
	for (i = 0; i < n; i++) {
		d[i].offset = i * phys;
		d[i].size = size;
		d[i].physical = phys;
		d[i].exporter_ptr = XPTR + i * phys;
	}
	m->total = n * phys;
}

static void fds_msg(struct cms_ipc_msg *m, uint32_t first, uint32_t n)
{
	memset(m, 0, sizeof(*m));
	m->type = CMS_IPC_FDS;
	m->first = first;
	m->nfds = n;
}

/* What nothing may outlive: the simulation's objects and this process's descriptors. */
struct held {
	cmssim_counters c;
	int fds;
};

static struct held held_now(void)
{
	struct held h;

	h.c = t_counters();
	h.fds = t_open_fds();
	return h;
}

/* What the simulation and this process hold more than before: "" when nothing. */
static void left_over(const struct held *before, char *out, size_t len)
{
	struct held now = held_now();

	out[0] = '\0';
	if (now.c.handles != before->c.handles || now.c.mappings != before->c.mappings ||
	    now.c.reservations != before->c.reservations || now.fds != before->fds)
		snprintf(out, len,
			 "handles %llu -> %llu, mappings %llu -> %llu, reservations %llu -> %llu, "
			 "descriptors %d -> %d",
			 (unsigned long long)before->c.handles, (unsigned long long)now.c.handles,
			 (unsigned long long)before->c.mappings, (unsigned long long)now.c.mappings,
			 (unsigned long long)before->c.reservations,
			 (unsigned long long)now.c.reservations, before->fds, now.fds);
}

static void check_nothing_left(const struct held *before, const char *what)
{
	char left[256];

	left_over(before, left, sizeof(left));
	ck_assert_msg(!left[0], "%s: %s", what, left);
}

/* Waits until the importer has read everything sent to it (20 s at most). */
static void wait_consumed(struct fake *f)
{
	int queued = -1, k;

	for (k = 0; k < 2000; k++) {
		ck_assert_int_eq(ioctl(f->c, SIOCOUTQ, &queued), 0);
		if (!queued)
			return;
		usleep(10000);
	}
	ck_abort_msg("the importer did not read %d bytes", queued);
}

/* ---- attacks on cms_import_open ---- */

struct attack {
	const char *name;
	void (*run)(struct fake *f, struct mem *mem);
	cms_status want;
};

/* Descriptors the header does not announce, and the message stalls: refused at its header
 * (before: held until the open's deadline, then CMS_ERR_TIMEOUT). */
static void unannounced_fds(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;
	int fds[3] = { mem->fd, mem->fd, mem->fd };

	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_part(f, &m, 0, CMS_IPC_HEADER_SIZE, fds, 3); /* announces 1; the rest never comes */
}

/* Descriptors with a later byte of the message than the first: refused at once. */
static void late_fds(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;

	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_part(f, &m, 0, 4, NULL, 0);
	wait_consumed(f);		     /* else one read may take both parts */
	send_part(f, &m, 4, 4, &mem->fd, 1); /* the rest never comes */
}

/* 250 descriptors with the first byte of a LAYOUT (which carries none): refused at its
 * header. */
static void fds_with_layout(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;
	int fds[CMS_IPC_MAX_FDS], i;

	for (i = 0; i < (int)CMS_IPC_MAX_FDS; i++)
		fds[i] = mem->fd;
	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	send_part(f, &m, 0, 1, fds, CMS_IPC_MAX_FDS);
	send_part(f, &m, 1, CMS_IPC_HEADER_SIZE - 1, NULL, 0); /* the payload never comes */
}

/* 253 descriptors (the kernel's most) with an FDS message announcing 250. */
static void too_many_fds(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[CMS_IPC_MAX_FDS];
	struct cms_ipc_msg m;
	int fds[253], i;

	for (i = 0; i < 253; i++)
		fds[i] = mem->fd;
	layout(&m, d, CMS_IPC_MAX_FDS, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, CMS_IPC_MAX_FDS);
	send_whole(f, &m, fds, 253);
}

static void wrong_kind_of_fd(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[3];
	struct cms_ipc_msg m;
	int fds[3], p[2];

	(void)mem;
	ck_assert_int_eq(pipe(p), 0);
	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	fds[1] = p[0];
	fds[2] = f->c; /* the connection itself */
	layout(&m, d, 3, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 3);
	send_whole(f, &m, fds, 3);
	close(fds[0]);
	close(p[0]);
	close(p[1]);
}

/* The layout says two granules, the memory has one. */
static void memory_smaller_than_said(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;

	layout(&m, d, 1, 2 * GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_whole(f, &m, &mem->fd, 1);
}

/* The first allocation's memory twice, the second never. */
static void fds_out_of_order(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[2];
	struct cms_ipc_msg m;

	layout(&m, d, 2, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_whole(f, &m, &mem->fd, 1);
	fds_msg(&m, 0, 1);
	send_whole(f, &m, &mem->fd, 1);
}

static void more_fds_than_allocations(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;
	int fds[2] = { mem->fd, mem->fd };

	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 2);
	send_whole(f, &m, fds, 2);
}

static void close_inside_layout(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[4];
	struct cms_ipc_msg m;

	(void)mem;
	layout(&m, d, 4, GRAN, CMS_STATE_ACTIVE);
	send_part(f, &m, 0, 40, NULL, 0);
	close(f->c);
	f->c = -1;
}

static void close_inside_fds(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;

	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_part(f, &m, 0, 20, &mem->fd, 1);
	close(f->c);
	f->c = -1;
}

/* A header announcing the largest payload (8 MiB), 100 bytes of it, then nothing. */
static void huge_length_then_stall(struct fake *f, struct mem *mem)
{
	uint8_t hdr[16 + 100] = { 'C', 'M', 'S', 'I', 1, 0, CMS_IPC_LAYOUT, 0 };
	uint32_t payload = CMS_IPC_MAX_PAYLOAD;

	(void)mem;
	memcpy(hdr + 8, &payload, sizeof(payload)); /* little-endian hosts */
	ck_assert_int_eq(send(f->c, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
}

/* 1 PiB of address space in one allocation. */
static void huge_total(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;

	layout(&m, d, 1, 1ull << 50, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_whole(f, &m, &mem->fd, 1);
}

/* The most allocations a layout may have, then no descriptor. */
static void many_allocations_then_stall(struct fake *f, struct mem *mem)
{
	struct cms_ipc_alloc_desc *d = calloc(CMS_IPC_MAX_ALLOCS, sizeof(*d));
	struct cms_ipc_msg m;

	(void)mem;
	ck_assert_ptr_nonnull(d);
	layout(&m, d, CMS_IPC_MAX_ALLOCS, GRAN, CMS_STATE_ACTIVE);
	send_whole(f, &m, NULL, 0);
	free(d);
}

static void stall_after_hello(struct fake *f, struct mem *mem)
{
	(void)f;
	(void)mem;
}

static void close_after_hello(struct fake *f, struct mem *mem)
{
	(void)mem;
	close(f->c);
	f->c = -1;
}

static void revoke_first(struct fake *f, struct mem *mem)
{
	struct cms_ipc_msg m;

	(void)mem;
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	m.seq = 1;
	send_whole(f, &m, NULL, 0);
}

static void garbage(struct fake *f, struct mem *mem)
{
	(void)mem;
	ck_assert_int_eq(send(f->c, "0123456789abcdefXYZ", 19, MSG_NOSIGNAL), 19);
}

/* An ERROR with a status no exporter sends (CMS_ERR_FORKED): reported as the exporter's
 * failure, CMS_ERR_INTERNAL, not passed on. */
static void foreign_status(struct fake *f, struct mem *mem)
{
	struct cms_ipc_msg m;

	(void)mem;
	cms_ipc_msg_error(&m, CMS_ERR_FORKED, "pretend");
	send_whole(f, &m, NULL, 0);
}

/* A status that is no status at all (-999, within what the protocol carries). */
static void unknown_status(struct fake *f, struct mem *mem)
{
	struct cms_ipc_msg m;

	(void)mem;
	cms_ipc_msg_error(&m, -999, "pretend");
	send_whole(f, &m, NULL, 0);
}

static const struct attack attacks[] = {
	{ "unannounced descriptors", unannounced_fds, CMS_ERR_PROTOCOL },
	{ "descriptors after the first byte", late_fds, CMS_ERR_PROTOCOL },
	{ "descriptors with a layout", fds_with_layout, CMS_ERR_PROTOCOL },
	{ "253 descriptors", too_many_fds, CMS_ERR_PROTOCOL },
	{ "descriptors of the wrong kind", wrong_kind_of_fd, CMS_ERR_DRIVER },
	{ "memory smaller than the layout", memory_smaller_than_said, CMS_ERR_DRIVER },
	{ "descriptors out of order", fds_out_of_order, CMS_ERR_PROTOCOL },
	{ "more descriptors than allocations", more_fds_than_allocations, CMS_ERR_PROTOCOL },
	{ "closed inside the layout", close_inside_layout, CMS_ERR_PROTOCOL },
	{ "closed inside descriptors", close_inside_fds, CMS_ERR_PROTOCOL },
	{ "8 MiB announced, 100 bytes sent", huge_length_then_stall, CMS_ERR_TIMEOUT },
	{ "1 PiB of address space", huge_total, CMS_ERR_OUT_OF_DEVICE_MEMORY },
	{ "65,536 allocations, no descriptor", many_allocations_then_stall, CMS_ERR_TIMEOUT },
	{ "silence after the request", stall_after_hello, CMS_ERR_TIMEOUT },
	{ "closed after the request", close_after_hello, CMS_ERR_DISCONNECTED },
	{ "a revocation first", revoke_first, CMS_ERR_PROTOCOL },
	{ "garbage", garbage, CMS_ERR_PROTOCOL },
	{ "an error with a foreign status", foreign_status, CMS_ERR_INTERNAL },
	{ "an error with no status", unknown_status, CMS_ERR_INTERNAL },
};

/*
 * Each attack on cms_import_open ends in its documented status (the open's timeout: 1 s for
 * the attacks that end in CMS_ERR_TIMEOUT, 20 s for the others, whose outcome comes without
 * waiting for it: 1 s made them end in CMS_ERR_TIMEOUT on a loaded machine under
 * ThreadSanitizer) and leaves nothing behind. Before: descriptors not announced, or not with a
 * message's first byte, were held until the deadline (CMS_ERR_TIMEOUT), and an exporter's ERROR
 * status was returned as it came (CMS_ERR_FORKED, -999).
 */
START_TEST(attacks_on_open)
{
	cms_context *ctx = log_ctx();
	static char failed[8192];
	struct held before;
	struct mem mem;
	struct fake f;
	cms_import *imp;
	size_t i, n = 0;

	/* the device is prepared: every lazily created object exists */
	ck_status(cms_import_open(ctx, "/tmp/cms-hostile-none.sock", "x", NULL, &imp),
		  CMS_ERR_NOT_FOUND);
	mem_create(&mem, GRAN);
	failed[0] = '\0';
	for (i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
		const struct attack *a = &attacks[i];
		char left[256];
		cms_status st;

		before = held_now();
		/* 1 s where the deadline is the outcome; else room for a loaded machine */
		fake_start(&f, ctx, a->want == CMS_ERR_TIMEOUT ? 1000 : 20000, 0);
		a->run(&f, &mem);
		st = fake_opened(&f);
		ck_assert_ptr_null(f.imp);
		fake_end(&f);
		left_over(&before, left, sizeof(left));
		if (st != a->want)
			n += (size_t)snprintf(failed + n, sizeof(failed) - n,
					      "\n%s: %s (%s), want %s", a->name,
					      cms_status_name(st), f.msg, cms_status_name(a->want));
		if (left[0])
			n += (size_t)snprintf(failed + n, sizeof(failed) - n, "\n%s: %s", a->name,
					      left);
		ck_assert_uint_lt(n, sizeof(failed));
	}
	ck_assert_msg(!failed[0], "%s", failed);
	mem_free(&mem);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- attacks on an open import (its thread serves them) ---- */

/* Opens an import of one allocation of GRAN bytes (mem) through f. */
static cms_import *open_one(struct fake *f, cms_context *ctx, struct mem *mem, uint64_t flags,
			    uint32_t access)
{
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;

	fake_start(f, ctx, 20000, flags);
	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	m.access = access;
	send_whole(f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_whole(f, &m, &mem->fd, 1);
	ck_assert_msg(fake_opened(f) == CMS_OK, "%s", f->msg);
	ck_assert_msg(!cms_ipc_recv(f->c, &m, NULL, cms_ipc_now_ms() + 20000, NULL, 0),
		      "no MAPPED");
	ck_assert_int_eq(m.type, CMS_IPC_MAPPED);
	ck_assert_int_eq(m.status, CMS_OK);
	return f->imp;
}

static uint32_t import_state(cms_import *imp)
{
	cms_import_info info = { .struct_size = sizeof(info) };

	ck_ok(cms_import_info_get(imp, &info));
	return info.state;
}

/* Waits (20 s at most) until the import leaves state from. */
static uint32_t state_after(cms_import *imp, uint32_t from)
{
	uint32_t s = from;
	int k;

	for (k = 0; k < 2000 && (s = import_state(imp)) == from; k++)
		usleep(10000);
	return s;
}

/*
 * A grant while the memory of the last one is mapped is out of step: the connection is over
 * (CMS_IMPORT_DISCONNECTED, CMS_ERR_PROTOCOL) and the mapping stays until the close, which
 * releases everything. Before, the new handles overwrote the mapped ones (leaked: the
 * simulation counted one handle more after the close) and the failed re-map unmapped the
 * application's memory.
 */
START_TEST(grant_while_mapped)
{
	cms_context *ctx = log_ctx();
	cms_import_info info = { .struct_size = sizeof(info) };
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;
	struct held before;
	struct mem mem;
	struct fake f;
	cms_import *imp;
	uint64_t ptr;

	ck_status(cms_import_open(ctx, "/tmp/cms-hostile-none.sock", "x", NULL, &imp),
		  CMS_ERR_NOT_FOUND);
	mem_create(&mem, GRAN);
	before = held_now();
	imp = open_one(&f, ctx, &mem, 0, CMS_IPC_ACCESS_READWRITE);
	ck_ok(cms_import_alloc_get(imp, 0, &ptr, NULL));
	ck_assert_int_eq(t_fill(0, ptr, GRAN, 7), 0);
	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	m.epoch = 2;
	send_whole(&f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_whole(&f, &m, &mem.fd, 1);
	ck_assert_uint_eq(state_after(imp, CMS_IMPORT_MAPPED), CMS_IMPORT_DISCONNECTED);
	ck_ok(cms_import_info_get(imp, &info));
	ck_assert_int_eq(info.error, CMS_ERR_PROTOCOL);
	ck_assert_int_eq(t_check(0, ptr, GRAN, 7), -1); /* still mapped */
	ck_ok(cms_import_close(imp));
	fake_end(&f);
	check_nothing_left(&before, "a grant while mapped");
	mem_free(&mem);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * The exporter asks for the memory back, grants it again and sends no descriptor: closing
 * the import does not wait for them (the grant's deadline is 60 s). Before, the close
 * waited until that deadline, and the import's thread logged "no answer before the
 * deadline".
 */
START_TEST(close_during_a_stalled_grant)
{
	cms_context *ctx = log_ctx();
	struct cms_ipc_alloc_desc d[1];
	struct cms_ipc_msg m;
	struct held before;
	struct mem mem;
	struct fake f;
	cms_import *imp;

	ck_status(cms_import_open(ctx, "/tmp/cms-hostile-none.sock", "x", NULL, &imp),
		  CMS_ERR_NOT_FOUND);
	mem_create(&mem, GRAN);
	before = held_now();
	imp = open_one(&f, ctx, &mem, 0, CMS_IPC_ACCESS_READWRITE);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	m.seq = 5;
	send_whole(&f, &m, NULL, 0);
	ck_assert(!cms_ipc_recv(f.c, &m, NULL, cms_ipc_now_ms() + 20000, NULL, 0));
	ck_assert_int_eq(m.type, CMS_IPC_REVOKED);
	ck_assert_int_eq(m.status, CMS_OK);
	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	m.epoch = 2;
	send_whole(&f, &m, NULL, 0);
	wait_consumed(&f); /* the import's thread waits for the descriptors now */
	ck_ok(cms_import_close(imp));
	ck_assert_msg(!logged("deadline"), "the close waited for the grant:\n%s", log_text);
	fake_end(&f);
	check_nothing_left(&before, "a stalled grant");
	mem_free(&mem);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* What the application's lookups say while the import's thread waits inside a grant: they
 * return (they wait for no grant) with the import as the revocation left it (the epoch of the
 * grant revoked). */
static void lookups_return(cms_import *imp, uint64_t epoch)
{
	cms_import_info info = { .struct_size = sizeof(info) };
	uint64_t ptr;

	ck_ok(cms_import_info_get(imp, &info));
	ck_assert_uint_eq(info.state, CMS_IMPORT_REVOKED);
	ck_assert_uint_eq(info.epoch, epoch);
	ck_ok(cms_import_alloc_get(imp, 0, &ptr, NULL));
	ck_assert_uint_eq(ptr, info.base);
	ck_ok(cms_import_translate(imp, XPTR + 8, &ptr));
	ck_assert_uint_eq(ptr, info.base + 8);
}

/* Revokes the grant of f's import: REVOKE, then its REVOKED answer. */
static void revoke_grant(struct fake *f, uint64_t seq)
{
	struct cms_ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	m.seq = seq;
	send_whole(f, &m, NULL, 0);
	ck_assert(!cms_ipc_recv(f->c, &m, NULL, cms_ipc_now_ms() + 20000, NULL, 0));
	ck_assert_int_eq(m.type, CMS_IPC_REVOKED);
	ck_assert_int_eq(m.status, CMS_OK);
}

/* The MAPPED answer to a grant of epoch: its status. */
static cms_status mapped_answer(struct fake *f, uint64_t epoch)
{
	struct cms_ipc_msg m;

	ck_assert(!cms_ipc_recv(f->c, &m, NULL, cms_ipc_now_ms() + 20000, NULL, 0));
	ck_assert_int_eq(m.type, CMS_IPC_MAPPED);
	ck_assert_uint_eq(m.seq, epoch);
	return m.status;
}

/*
 * The exporter revokes, grants again and holds the grant open inside its descriptors (the
 * first bytes of the FDS message sent, with the descriptor, the rest not): the application's
 * cms_import_info_get, cms_import_alloc_get and cms_import_translate return while it does,
 * then the rest of the message completes that same grant (MAPPED, CMS_OK): the lookups did
 * not wait for its end. The same while a grant of another layout is held open (then
 * CMS_IMPORT_LAYOUT_CHANGED). Before, the import's thread held the import's lock while it
 * waited for the descriptors: every lookup waited for the grant's deadline (60 s), then the
 * grant had failed (CMS_IMPORT_FAILED).
 */
START_TEST(lookups_during_a_stalled_grant)
{
	cms_context *ctx = log_ctx();
	struct cms_ipc_alloc_desc d[2];
	int fds[2];
	struct cms_ipc_msg m;
	struct held before;
	struct mem mem;
	struct fake f;
	cms_import *imp;

	ck_status(cms_import_open(ctx, "/tmp/cms-hostile-none.sock", "x", NULL, &imp),
		  CMS_ERR_NOT_FOUND);
	mem_create(&mem, GRAN);
	fds[0] = fds[1] = mem.fd;
	before = held_now();
	imp = open_one(&f, ctx, &mem, 0, CMS_IPC_ACCESS_READWRITE);
	revoke_grant(&f, 5);
	layout(&m, d, 1, GRAN, CMS_STATE_ACTIVE);
	m.epoch = 2;
	send_whole(&f, &m, NULL, 0);
	fds_msg(&m, 0, 1);
	send_part(&f, &m, 0, 4, &mem.fd, 1);
	wait_consumed(&f); /* the import's thread is inside the FDS message */
	lookups_return(imp, 1);
	send_part(&f, &m, 4, SIZE_MAX, NULL, 0);
	ck_assert_int_eq(mapped_answer(&f, 2), CMS_OK);
	ck_assert_uint_eq(state_after(imp, CMS_IMPORT_REVOKED), CMS_IMPORT_MAPPED);
	/* another layout (two allocations), its descriptors held open alike */
	revoke_grant(&f, 6);
	layout(&m, d, 2, GRAN, CMS_STATE_ACTIVE);
	m.epoch = 3;
	send_whole(&f, &m, NULL, 0);
	fds_msg(&m, 0, 2);
	send_part(&f, &m, 0, 4, fds, 2);
	wait_consumed(&f);
	lookups_return(imp, 2);
	send_part(&f, &m, 4, SIZE_MAX, NULL, 0);
	ck_assert_int_eq(mapped_answer(&f, 3), CMS_ERR_LAYOUT_CHANGED);
	ck_assert_uint_eq(state_after(imp, CMS_IMPORT_REVOKED), CMS_IMPORT_LAYOUT_CHANGED);
	ck_ok(cms_import_close(imp));
	fake_end(&f);
	check_nothing_left(&before, "a stalled grant");
	mem_free(&mem);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Half a message, then nothing: closing the import does not wait for the rest (5 s). */
START_TEST(close_during_a_stalled_message)
{
	cms_context *ctx = log_ctx();
	struct cms_ipc_msg m;
	struct held before;
	struct mem mem;
	struct fake f;
	cms_import *imp;

	ck_status(cms_import_open(ctx, "/tmp/cms-hostile-none.sock", "x", NULL, &imp),
		  CMS_ERR_NOT_FOUND);
	mem_create(&mem, GRAN);
	before = held_now();
	imp = open_one(&f, ctx, &mem, 0, CMS_IPC_ACCESS_READWRITE);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	m.seq = 5;
	send_part(&f, &m, 0, 10, NULL, 0);
	wait_consumed(&f); /* the import's thread waits for the rest now */
	ck_ok(cms_import_close(imp));
	ck_assert_msg(!logged("deadline"), "the close waited for the message:\n%s", log_text);
	fake_end(&f);
	check_nothing_left(&before, "a stalled message");
	mem_free(&mem);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * An import asked read-only is mapped read-only whatever the exporter grants. Before, a
 * grant of CMS_ACCESS_READWRITE was mapped read-write.
 */
START_TEST(access_never_more_than_asked)
{
	cms_context *ctx = log_ctx();
	cms_import_info info = { .struct_size = sizeof(info) };
	struct held before;
	struct mem mem;
	struct fake f;
	cms_import *imp;
	uint32_t word = 1;

	ck_status(cms_import_open(ctx, "/tmp/cms-hostile-none.sock", "x", NULL, &imp),
		  CMS_ERR_NOT_FOUND);
	mem_create(&mem, GRAN);
	before = held_now();
	imp = open_one(&f, ctx, &mem, CMS_IMPORT_READ_ONLY, CMS_IPC_ACCESS_READWRITE);
	ck_ok(cms_import_info_get(imp, &info));
	ck_assert_uint_eq(info.access, CMS_ACCESS_READ);
	ck_assert_int_ne(t_write(0, info.base, &word, sizeof(word)), CUDA_SUCCESS);
	ck_ok(cms_import_close(imp));
	fake_end(&f);
	check_nothing_left(&before, "read-only");
	mem_free(&mem);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("ipc_hostile");
	TCase *t = tcase_create("importer");

	tcase_set_timeout(t, 240);
	tcase_add_test(t, attacks_on_open);
	tcase_add_test(t, grant_while_mapped);
	tcase_add_test(t, close_during_a_stalled_grant);
	tcase_add_test(t, lookups_during_a_stalled_grant);
	tcase_add_test(t, close_during_a_stalled_message);
	tcase_add_test(t, access_never_more_than_asked);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return t_main(make, T_NEEDS_SIM);
}
