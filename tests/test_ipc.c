/* SPDX-License-Identifier: MIT */
/*
 * test_ipc.c - sharing between processes on the host simulation, with real
 * descriptor passing (the simulation's physical memory is a memfd): the other
 * process is tests/ipc_peer, started with posix_spawn (a fresh process: the
 * library refuses calls in a forked child of an initialised process).
 * Covers: share and read/write from the importer, read-only grants, pause
 * with revocation (memory dropped in both processes), resume with re-map at
 * the same addresses, importing while paused, importer crash, exporter
 * crash, timeout and refusal naming the importer, wrong uid refused both
 * ways, malformed messages refused, layout change detected, several
 * exporters, and the control socket through cmsctl; and hostile clients:
 * descriptors out of turn, a bound socket not replaced, relative paths after
 * chdir(), stalled clients, connection limits and accept back-off.
 */
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/sockios.h>

#include "common.h"
#include "ipc_sock.h"

#define KiB 1024ull

extern char **environ;

struct peer {
	pid_t pid;
	int in;	 /* its stdin */
	int out; /* its stdout */
	char buf[4096];
	size_t have;
};

static char sock_path[108];

static const char *new_path(const char *what)
{
	static int n;

	snprintf(sock_path, sizeof(sock_path), "/tmp/cms-ipc-%d-%s-%d.sock", (int)getpid(), what,
		 n++);
	return sock_path;
}

static void peer_start(struct peer *p, char *const argv[])
{
	posix_spawn_file_actions_t fa;
	int in[2], out[2];

	memset(p, 0, sizeof(*p));
	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_addclose(&fa, in[1]);
	posix_spawn_file_actions_addclose(&fa, out[0]);
	ck_assert_int_eq(posix_spawn(&p->pid, argv[0], &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	p->in = in[1];
	p->out = out[0];
}

/* The next line from the peer (60 s at most: a hang fails the test, never blocks it). */
static const char *peer_line(struct peer *p)
{
	static char line[4096];

	for (;;) {
		char *nl = memchr(p->buf, '\n', p->have);
		struct pollfd pf = { p->out, POLLIN, 0 };
		ssize_t n;

		if (nl) {
			size_t len = (size_t)(nl - p->buf);

			memcpy(line, p->buf, len);
			line[len] = '\0';
			memmove(p->buf, nl + 1, p->have - len - 1);
			p->have -= len + 1;
			return line;
		}
		ck_assert_msg(poll(&pf, 1, 60000) == 1, "peer %d did not answer", (int)p->pid);
		n = read(p->out, p->buf + p->have, sizeof(p->buf) - 1 - p->have);
		ck_assert_msg(n > 0, "peer %d exited", (int)p->pid);
		p->have += (size_t)n;
	}
}

static const char *peer_cmd(struct peer *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static const char *peer_cmd(struct peer *p, const char *fmt, ...)
{
	char cmd[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
	va_end(ap);
	cmd[n++] = '\n';
	ck_assert_int_eq(write(p->in, cmd, (size_t)n), n);
	return peer_line(p);
}

#define ck_peer_ok(p, ...)                                                                \
	do {                                                                              \
		const char *r_ = peer_cmd(p, __VA_ARGS__);                                \
		ck_assert_msg(!strncmp(r_, "ok", 2), "peer: %s -> %s", #__VA_ARGS__, r_); \
	} while (0)

static struct peer *importer(const char *path, const char *tag, int ro)
{
	struct peer *p = calloc(1, sizeof(*p));
	char *argv[] = {
		CMS_IPC_PEER, "import", (char *)path, (char *)tag, ro ? "ro" : NULL, NULL
	};
	const char *l;

	ck_assert_ptr_nonnull(p);
	peer_start(p, argv);
	l = peer_line(p);
	ck_assert_msg(!strncmp(l, "ok opened", 9), "importer: %s", l);
	return p;
}

static int peer_end(struct peer *p, int kill_it)
{
	int status = 0;

	if (kill_it)
		kill(p->pid, SIGKILL);
	else
		ck_assert_int_eq(write(p->in, "quit\n", 5), 5);
	close(p->in);
	ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
	close(p->out);
	free(p);
	return status;
}

/* A shareable HOST region with n allocations of bytes each, filled with seed + i. */
static cms_region *shared_region(cms_context *ctx, const char *tag, int n, uint64_t bytes,
				 uint32_t seed, uint64_t *ptrs)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r;
	int i;

	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_SHAREABLE;
	ck_ok(cms_region_create(ctx, tag, &o, &r));
	for (i = 0; i < n; i++) {
		ck_ok(cms_alloc(r, bytes, &ptrs[i]));
		ck_assert_int_eq(t_fill(0, ptrs[i], bytes, seed + (uint32_t)i), 0);
	}
	return r;
}

static cms_exporter *exporter(cms_context *ctx, const char *path, uint32_t timeout_ms)
{
	cms_exporter_options o = CMS_EXPORTER_OPTIONS_INIT;
	cms_exporter *exp;

	o.revoke_timeout_ms = timeout_ms;
	ck_ok(cms_exporter_create(ctx, path, &o, &exp));
	return exp;
}

/* One test's exporter: a context and a shareable region (shared_region) published on a socket. */
struct fix {
	cms_context *ctx;
	cms_region *r;
	cms_exporter *exp;
	const char *path;
	uint64_t p[3]; /* the region's allocations */
};

static void fix_start(struct fix *f, const char *tag, int n, uint64_t bytes, uint32_t seed,
		      uint32_t timeout_ms, uint32_t access)
{
	ck_assert_int_le(n, 3);
	f->ctx = t_ctx();
	f->r = shared_region(f->ctx, tag, n, bytes, seed, f->p);
	f->path = new_path(tag);
	f->exp = exporter(f->ctx, f->path, timeout_ms);
	ck_ok(cms_exporter_publish(f->exp, f->r, access));
}

static void fix_end(struct fix *f)
{
	ck_ok(cms_exporter_destroy(f->exp));
	ck_ok(cms_context_destroy(f->ctx));
}

static unsigned long long field(const char *line, const char *key)
{
	const char *at = strstr(line, key);

	ck_assert_msg(at, "no %s in %s", key, line);
	return strtoull(at + strlen(key), NULL, 0);
}

/* Polls a peer's "events" until key reaches want (events follow state changes). */
static unsigned long long wait_event(struct peer *p, const char *key, unsigned long long want)
{
	unsigned long long v = 0;
	int k;

	for (k = 0; k < 2000 && (v = field(peer_cmd(p, "events"), key)) < want; k++)
		usleep(10000);
	return v;
}

START_TEST(share_read_write)
{
	struct fix f;
	uint64_t ptr0;
	cms_region_info ri = { .struct_size = sizeof(ri) };
	struct peer *imp;
	uint64_t n;
	char line[256];

	fix_start(&f, "weights", 3, 3 * MiB, 100, 0, CMS_ACCESS_READWRITE);
	ck_ok(cms_region_info_get(f.r, &ri));
	ck_assert_uint_eq(ri.handle_types, CMS_HANDLE_TYPE_POSIX_FD);
	ck_status(cms_exporter_publish(f.exp, f.r, CMS_ACCESS_READ), CMS_ERR_EXISTS);
	imp = importer(f.path, "weights", 0);
	snprintf(line, sizeof(line), "%s", peer_cmd(imp, "info"));
	ck_assert_uint_eq(field(line, "state="), CMS_IMPORT_MAPPED);
	ck_assert_uint_eq(field(line, "n="), 3);
	ck_assert_uint_eq(field(line, "access="), CMS_ACCESS_READWRITE);
	ck_assert_uint_eq(field(line, "epoch="), 0);
	/* Allocations in the exporter's address order: match them by translation. */
	for (int i = 0; i < 3; i++) {
		unsigned long long local;

		snprintf(line, sizeof(line), "%s",
			 peer_cmd(imp, "translate %llx", (unsigned long long)f.p[i] + 4096));
		ck_assert_msg(!strncmp(line, "ok", 2), "%s", line);
		local = strtoull(line + 3, NULL, 0) - 4096;
		ck_assert_uint_ne(local, 0);
	}
	ck_assert_msg(
		!strncmp(peer_cmd(imp, "translate %llx", 0x10ull), "err CMS_ERR_NOT_FOUND", 21),
		"translate of a foreign pointer");
	/* Read what the exporter wrote; write; the exporter sees it. */
	{
		/* index order = address order */
		int order[3] = { 0, 1, 2 }, a, b;

		for (a = 0; a < 3; a++)
			for (b = a + 1; b < 3; b++)
				if (f.p[order[b]] < f.p[order[a]]) {
					int t = order[a];

					order[a] = order[b];
					order[b] = t;
				}
		for (a = 0; a < 3; a++)
			ck_peer_ok(imp, "check %x %u", a, 100 + order[a]);
		ck_peer_ok(imp, "fill %x %u", 1, 777);
		ck_assert_int_eq(t_check(0, f.p[order[1]], 3 * MiB, 777), -1);
		ptr0 = field(peer_cmd(imp, "ptr 0"), "ok ");
		ck_assert_uint_ne(ptr0, 0);
	}
	ck_ok(cms_exporter_importers(f.exp, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(peer_end(imp, 0), 0);
	ck_ok(cms_exporter_destroy(f.exp));
	ck_assert_int_eq(access(f.path, F_OK), -1); /* socket file removed */
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

START_TEST(read_only)
{
	struct fix f;
	struct peer *imp;
	const char *l;

	fix_start(&f, "w", 1, 2 * MiB, 5, 0, CMS_ACCESS_READ);
	imp = importer(f.path, "w", 0); /* asks read-write, is granted read */
	ck_assert_uint_eq(field(peer_cmd(imp, "info"), "access="), CMS_ACCESS_READ);
	ck_peer_ok(imp, "check 0 5");
	l = peer_cmd(imp, "fill 0 9");
	ck_assert_msg(!strncmp(l, "err write", 9), "a read-only mapping was written: %s", l);
	ck_assert_int_eq(t_check(0, f.p[0], 2 * MiB, 5), -1);
	ck_assert_int_eq(peer_end(imp, 0), 0);
	fix_end(&f);
}
END_TEST

START_TEST(pause_revokes_resume_remaps)
{
	struct fix f;
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	struct peer *a, *b;
	unsigned long long a0, b0;
	cmssim_counters c;
	char line[256];

	fix_start(&f, "kv", 2, 4 * MiB, 40, 0, CMS_ACCESS_READWRITE);
	a = importer(f.path, "kv", 0);
	b = importer(f.path, "kv", 1);
	a0 = field(peer_cmd(a, "ptr 0"), "ok ");
	b0 = field(peer_cmd(b, "ptr 0"), "ok ");
	ck_assert_uint_ne(field(peer_cmd(a, "counters"), "handles="), 0);

	ck_ok(cms_pause(f.ctx, "kv", NULL, &pr));
	ck_assert_uint_eq(pr.bytes_released, 8 * MiB);
	/* Both importers dropped everything before the release: nobody holds the memory. */
	ck_assert_uint_eq(field(peer_cmd(a, "info"), "state="), CMS_IMPORT_REVOKED);
	ck_assert_uint_eq(field(peer_cmd(b, "info"), "state="), CMS_IMPORT_REVOKED);
	snprintf(line, sizeof(line), "%s", peer_cmd(a, "counters"));
	ck_assert_uint_eq(field(line, "handles="), 0);
	ck_assert_uint_eq(field(line, "mappings="), 0);
	ck_assert_uint_eq(field(line, "physical="), 0);
	c = t_counters();
	ck_assert_uint_eq(c.physical_allocations, 0);
	ck_assert_uint_eq(c.device_used_bytes[0], 0);
	ck_assert_msg(!strncmp(peer_cmd(a, "check 0 40"), "err read", 8),
		      "revoked memory still readable");
	ck_assert_uint_eq(wait_event(a, "revoked=", 1), 1);
	ck_assert_uint_eq(field(peer_cmd(a, "events"), "quiesced="), 1);

	ck_ok(cms_resume(f.ctx, "kv", NULL, NULL));
	ck_peer_ok(a, "wait %x", CMS_IMPORT_MAPPED);
	ck_peer_ok(b, "wait %x", CMS_IMPORT_MAPPED);
	ck_assert_uint_eq(field(peer_cmd(a, "ptr 0"), "ok "), a0); /* same addresses */
	ck_assert_uint_eq(field(peer_cmd(b, "ptr 0"), "ok "), b0);
	ck_assert_uint_eq(field(peer_cmd(a, "info"), "epoch="), 1);
	ck_assert_uint_eq(wait_event(a, "remapped=", 1), 1);
	/* HOST content came back; the importer writes again and the exporter sees it. */
	{
		int first = f.p[0] < f.p[1] ? 0 : 1;

		ck_peer_ok(a, "check 0 %u", 40 + first);
		ck_peer_ok(b, "check 1 %u", 40 + !first);
		ck_peer_ok(a, "fill 0 %u", 91);
		ck_assert_int_eq(t_check(0, f.p[first], 4 * MiB, 91), -1);
	}
	/* A second cycle. */
	ck_ok(cms_pause(f.ctx, "kv", NULL, NULL));
	ck_ok(cms_resume(f.ctx, "kv", NULL, NULL));
	ck_peer_ok(a, "wait %x", CMS_IMPORT_MAPPED);
	ck_assert_uint_eq(field(peer_cmd(a, "info"), "epoch="), 2);
	ck_assert_int_eq(peer_end(a, 0), 0);
	ck_assert_int_eq(peer_end(b, 0), 0);
	fix_end(&f);
}
END_TEST

START_TEST(import_while_paused)
{
	struct fix f;
	struct peer *imp;

	fix_start(&f, "w", 1, 2 * MiB, 7, 0, CMS_ACCESS_READWRITE);
	ck_ok(cms_pause(f.ctx, "w", NULL, NULL));
	imp = importer(f.path, "w", 0);
	ck_assert_uint_eq(field(peer_cmd(imp, "info"), "state="), CMS_IMPORT_REVOKED);
	ck_ok(cms_resume(f.ctx, "w", NULL, NULL));
	ck_peer_ok(imp, "wait %x", CMS_IMPORT_MAPPED);
	ck_peer_ok(imp, "check 0 7");
	ck_assert_int_eq(peer_end(imp, 0), 0);
	fix_end(&f);
}
END_TEST

struct pause_arg {
	cms_context *ctx;
	const char *tag;
	cms_status st;
	char msg[512];
};

static void *pause_thread(void *arg)
{
	struct pause_arg *a = arg;

	a->st = cms_pause(a->ctx, a->tag, NULL, NULL);
	cms_last_error_message(a->msg, sizeof(a->msg));
	return NULL;
}

START_TEST(importer_crash)
{
	struct fix f;
	struct pause_arg pa = { NULL, "w", 0, "" };
	struct peer *a, *b;
	pthread_t t;
	uint64_t n;

	/* A crash must never cost the timeout: a 10-minute timeout would fail the test. */
	fix_start(&f, "w", 1, 2 * MiB, 3, 600000, CMS_ACCESS_READWRITE);
	pa.ctx = f.ctx;
	a = importer(f.path, "w", 0);
	ck_assert_int_ne(peer_end(a, 1), 0); /* killed while mapped */
	ck_ok(cms_pause(f.ctx, "w", NULL, NULL));
	ck_ok(cms_resume(f.ctx, "w", NULL, NULL));
	/* Killed while the exporter waits for its answer. */
	b = importer(f.path, "w", 0);
	ck_peer_ok(b, "stall");
	ck_assert_int_eq(pthread_create(&t, NULL, pause_thread, &pa), 0);
	usleep(200000);
	ck_assert_int_ne(peer_end(b, 1), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(pa.st == CMS_OK, "pause: %s %s", cms_status_name(pa.st), pa.msg);
	ck_ok(cms_exporter_importers(f.exp, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(t_counters().physical_allocations, 0);
	ck_ok(cms_resume(f.ctx, "w", NULL, NULL));
	ck_assert_int_eq(t_check(0, f.p[0], 2 * MiB, 3), -1);
	fix_end(&f);
}
END_TEST

static int ev_count[6];
static uint64_t ev_epoch;
static void count_event(void *user, cms_import *imp, uint32_t event, uint64_t epoch)
{
	(void)user;
	(void)imp;
	__atomic_store_n(&ev_epoch, epoch, __ATOMIC_SEQ_CST); /* before the count is seen */
	__atomic_fetch_add(&ev_count[event % 6], 1, __ATOMIC_SEQ_CST);
}

/* Events are delivered after the state changes: poll for them. */
static int wait_count(int *counter, int want)
{
	int k, v = 0;

	for (k = 0; k < 2000 && (v = __atomic_load_n(counter, __ATOMIC_SEQ_CST)) < want; k++)
		usleep(10000);
	return v;
}

static uint32_t import_state(cms_import *imp, uint32_t want)
{
	cms_import_info info = { .struct_size = sizeof(info) };
	int k;

	for (k = 0; k < 2000; k++) {
		ck_ok(cms_import_info_get(imp, &info));
		if (info.state == want)
			break;
		usleep(10000);
	}
	return info.state;
}

static struct peer *exporter_peer(const char *path, const char *tag, const char *seed)
{
	struct peer *p = calloc(1, sizeof(*p));
	char *argv[] = { CMS_IPC_PEER, "export",  (char *)path, (char *)tag,
			 "2",	       "2097152", (char *)seed, NULL };
	const char *l;

	ck_assert_ptr_nonnull(p);
	peer_start(p, argv);
	l = peer_line(p);
	ck_assert_msg(!strncmp(l, "ok ready", 8), "exporter: %s", l);
	return p;
}

START_TEST(exporter_crash_and_two_exporters)
{
	cms_context *ctx = t_ctx();
	cms_import_options o = CMS_IMPORT_OPTIONS_INIT;
	cms_import_info info = { .struct_size = sizeof(info) };
	char path1[108], path2[108];
	struct peer *e1, *e2;
	cms_import *i1, *i2;
	uint64_t a, a2, sz;

	snprintf(path1, sizeof(path1), "%s", new_path("x1"));
	snprintf(path2, sizeof(path2), "%s", new_path("x2"));
	e1 = exporter_peer(path1, "weights", "10");
	e2 = exporter_peer(path2, "kv", "20");
	o.event_fn = count_event;
	ck_ok(cms_import_open(ctx, path1, "weights", &o, &i1));
	ck_ok(cms_import_open(ctx, path2, "kv", &o, &i2));
	ck_status(cms_import_open(ctx, path2, "nope", &o, &(cms_import *){ NULL }),
		  CMS_ERR_NOT_FOUND);
	ck_ok(cms_import_info_get(i1, &info));
	ck_assert_int_eq(info.exporter_pid, e1->pid);
	ck_assert_uint_eq(info.allocations, 2);
	ck_ok(cms_import_alloc_get(i1, 0, &a, &sz));
	ck_assert_uint_eq(sz, 2 * MiB);
	/* the exporter filled allocation i (its address order = creation order in one
	 * reservation each: compare both orders) */
	ck_assert(t_check(0, a, 2 * MiB, 10) == -1 || t_check(0, a, 2 * MiB, 11) == -1);
	ck_ok(cms_import_alloc_get(i2, 1, &a2, NULL));
	ck_assert(t_check(0, a2, 2 * MiB, 20) == -1 || t_check(0, a2, 2 * MiB, 21) == -1);

	/* The exporter pauses and resumes: same addresses here, events and epoch. */
	ck_peer_ok(e1, "pause");
	ck_assert_uint_eq(import_state(i1, CMS_IMPORT_REVOKED), CMS_IMPORT_REVOKED);
	ck_peer_ok(e1, "resume");
	ck_assert_uint_eq(import_state(i1, CMS_IMPORT_MAPPED), CMS_IMPORT_MAPPED);
	ck_ok(cms_import_alloc_get(i1, 0, &a2, NULL));
	ck_assert_uint_eq(a2, a);
	ck_assert(t_check(0, a, 2 * MiB, 10) == -1 || t_check(0, a, 2 * MiB, 11) == -1);
	ck_assert_int_eq(wait_count(&ev_count[CMS_IMPORT_EVENT_REVOKED], 1), 1);
	ck_assert_int_eq(wait_count(&ev_count[CMS_IMPORT_EVENT_REMAPPED], 1), 1);
	ck_assert_uint_eq(__atomic_load_n(&ev_epoch, __ATOMIC_SEQ_CST), 1);

	/* The exporter crashes: a clear error on the next call, no hang. */
	ck_assert_int_ne(peer_end(e1, 1), 0);
	ck_assert_uint_eq(import_state(i1, CMS_IMPORT_DISCONNECTED), CMS_IMPORT_DISCONNECTED);
	ck_status(cms_import_alloc_get(i1, 0, &a2, NULL), CMS_ERR_DISCONNECTED);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "gone"));
	ck_assert_int_eq(wait_count(&ev_count[CMS_IMPORT_EVENT_DISCONNECTED], 1), 1);
	/* the other import is unaffected */
	ck_ok(cms_import_alloc_get(i2, 1, &a2, NULL));
	ck_ok(cms_import_close(i1));
	ck_ok(cms_import_close(i2));
	ck_assert_int_eq(peer_end(e2, 0), 0);
	ck_assert_uint_eq(t_counters().mappings, 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(timeout_and_refusal_name_the_importer)
{
	struct fix f;
	cms_region_info ri = { .struct_size = sizeof(ri) };
	struct peer *imp;
	char pid[32];

	fix_start(&f, "w", 1, 2 * MiB, 8, 300, CMS_ACCESS_READWRITE);
	imp = importer(f.path, "w", 0);
	snprintf(pid, sizeof(pid), "pid %d", (int)imp->pid);
	ck_peer_ok(imp, "stall");
	ck_status(cms_pause(f.ctx, "w", NULL, NULL), CMS_ERR_TIMEOUT);
	ck_assert_msg(strstr(cms_last_error(), pid), "%s", cms_last_error());
	ck_ok(cms_region_info_get(f.r, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(ri.backed_bytes, 2 * MiB);
	ck_assert_int_eq(t_check(0, f.p[0], 2 * MiB, 8), -1);
	/* It answers late (drops its mappings): it is granted the memory again. */
	ck_peer_ok(imp, "unstall");
	ck_assert_uint_eq(wait_event(imp, "revoked=", 1), 1);
	ck_peer_ok(imp, "wait %x", CMS_IMPORT_MAPPED);
	ck_peer_ok(imp, "check 0 8");
	/* Refusal. */
	ck_peer_ok(imp, "refuse");
	ck_status(cms_pause(f.ctx, "w", NULL, NULL), CMS_ERR_REFUSED);
	ck_assert_msg(strstr(cms_last_error(), pid), "%s", cms_last_error());
	ck_peer_ok(imp, "check 0 8"); /* still mapped */
	ck_assert_int_eq(peer_end(imp, 0), 0);
	ck_ok(cms_pause(f.ctx, "w", NULL, NULL)); /* nobody left to ask */
	fix_end(&f);
}
END_TEST

START_TEST(wrong_uid_refused)
{
	cms_context *ctx = t_ctx();
	uint64_t p[1];
	cms_region *r = shared_region(ctx, "w", 1, 2 * MiB, 1, p);
	const char *path = new_path("uid");
	cms_exporter_options eo = CMS_EXPORTER_OPTIONS_INIT;
	cms_import_options io = CMS_IMPORT_OPTIONS_INIT;
	uint32_t other = (uint32_t)getuid() + 4242, mine = (uint32_t)getuid();
	cms_exporter *exp;
	cms_import *imp = NULL;

	eo.allowed_uids = &other;
	eo.nallowed_uids = 1;
	ck_ok(cms_exporter_create(ctx, path, &eo, &exp));
	ck_ok(cms_exporter_publish(exp, r, CMS_ACCESS_READWRITE));
	ck_status(cms_import_open(ctx, path, "w", NULL, &imp), CMS_ERR_PERMISSION);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "not allowed"));
	ck_assert_ptr_null(imp);
	ck_ok(cms_exporter_destroy(exp));
	/* The importer checks the exporter's uid too. */
	eo.allowed_uids = &mine;
	ck_ok(cms_exporter_create(ctx, path, &eo, &exp));
	ck_ok(cms_exporter_publish(exp, r, CMS_ACCESS_READWRITE));
	io.allowed_uids = &other;
	io.nallowed_uids = 1;
	ck_status(cms_import_open(ctx, path, "w", &io, &imp), CMS_ERR_PERMISSION);
	/* and the same process may import its own export (same uid by default) */
	ck_ok(cms_import_open(ctx, path, "w", NULL, &imp));
	ck_status(cms_context_destroy(ctx), CMS_ERR_INVALID_ARGUMENT); /* objects alive */
	ck_ok(cms_import_close(imp));
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Sends raw bytes and returns the status of the ERROR answer (0 when none came). */
static cms_status raw_exchange(const char *path, const void *bytes, size_t n)
{
	struct cms_ipc_msg m;
	char why[256];
	cms_status st;
	int fd;

	ck_assert_int_eq(cms_ipc_connect(path, &fd, why, sizeof(why)), CMS_OK);
	ck_assert_int_eq(send(fd, bytes, n, MSG_NOSIGNAL), (ssize_t)n);
	st = cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why));
	if (!st) {
		ck_assert_int_eq(m.type, CMS_IPC_ERROR);
		st = m.status;
		cms_ipc_msg_free(&m);
		/* then the exporter closes */
		ck_assert_int_eq(
			cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			CMS_ERR_DISCONNECTED);
	}
	close(fd);
	return st;
}

START_TEST(malformed_messages_refused)
{
	struct fix f;
	uint8_t hdr[16] = { 'C', 'M', 'S', 'I', 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	struct cms_ipc_msg m;
	uint8_t *buf;
	size_t len;
	struct peer *imp;

	fix_start(&f, "w", 1, 2 * MiB, 2, 0, CMS_ACCESS_READWRITE);
	ck_assert_int_eq(raw_exchange(f.path, "garbage that is no header", 25), CMS_ERR_PROTOCOL);
	hdr[4] = 9; /* version 9 */
	ck_assert_int_eq(raw_exchange(f.path, hdr, 16), CMS_ERR_PROTOCOL);
	hdr[4] = 1;
	hdr[8] = 0xff, hdr[9] = 0xff, hdr[10] = 0xff, hdr[11] = 0x7f; /* 2 GiB payload */
	ck_assert_int_eq(raw_exchange(f.path, hdr, 16), CMS_ERR_PROTOCOL);
	hdr[8] = hdr[9] = hdr[10] = hdr[11] = 0; /* HELLO with no payload at all */
	ck_assert_int_eq(raw_exchange(f.path, hdr, 16), CMS_ERR_PROTOCOL);
	/* A well-formed message of the wrong direction. */
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	m.seq = 1;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_OK);
	ck_assert_int_eq(raw_exchange(f.path, buf, len), CMS_ERR_PROTOCOL);
	free(buf);
	/* An unknown tag. */
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_HELLO;
	strcpy(m.tag, "nope");
	m.device = -1;
	m.access = CMS_IPC_ACCESS_READ;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_OK);
	ck_assert_int_eq(raw_exchange(f.path, buf, len), CMS_ERR_NOT_FOUND);
	free(buf);
	/* The exporter still serves a real importer. */
	imp = importer(f.path, "w", 0);
	ck_peer_ok(imp, "check 0 2");
	ck_assert_int_eq(peer_end(imp, 0), 0);
	fix_end(&f);
}
END_TEST

/* Sends an FDS message with n copies of /dev/null's descriptor (n fresh ones at the receiver). */
static void send_fds(int fd, uint32_t n)
{
	int fds[CMS_IPC_MAX_FDS], null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct cms_ipc_msg m;
	char why[256];
	uint32_t i;

	ck_assert_int_ge(null, 0);
	for (i = 0; i < n; i++)
		fds[i] = null;
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_FDS;
	m.nfds = n;
	ck_assert_msg(!cms_ipc_send(fd, &m, fds, cms_ipc_now_ms() + 20000, why, sizeof(why)), "%s",
		      why);
	close(null);
}

/* Reads until the peer closes (what it answered is skipped). */
static void wait_closed(int fd)
{
	struct cms_ipc_msg m;
	cms_status st;

	while (!(st = cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, NULL, 0)))
		cms_ipc_msg_free(&m);
	ck_assert_int_eq(st, CMS_ERR_DISCONNECTED);
}

/* The process's open descriptors once the servers closed what they are closing (<= 20 s). */
static int open_fds_settled(int want)
{
	int n, k;

	for (k = 0; k < 2000 && (n = t_open_fds()) != want; k++)
		usleep(10000);
	return n;
}

/* A client sends descriptors where none are expected: the server closes every one. */
static void fds_refused_by(const char *path)
{
	char why[256];
	int fd, before;

	before = t_open_fds();
	ck_assert_int_eq(cms_ipc_connect(path, &fd, why, sizeof(why)), CMS_OK);
	send_fds(fd, CMS_IPC_MAX_FDS);
	wait_closed(fd);
	close(fd);
	ck_assert_int_eq(open_fds_settled(before), before);
}

struct fake_open {
	cms_context *ctx;
	const char *path;
	cms_import *imp;
	cms_status st;
};

static void *fake_open_main(void *arg)
{
	struct fake_open *o = arg;

	o->st = cms_import_open(o->ctx, o->path, "x", NULL, &o->imp);
	return NULL;
}

START_TEST(received_descriptors_closed)
{
	struct fix f;
	struct fake_open o = { 0 };
	struct cms_ipc_sockfile file;
	struct cms_ipc_msg m;
	cms_control *ctl;
	pthread_t th;
	char why[256];
	int lfd, c, before;
	pid_t pid;
	uid_t uid;

	/* the exporter and the control socket expect no descriptors from a client */
	fix_start(&f, "fd", 1, 2 * MiB, 1, 0, CMS_ACCESS_READWRITE);
	fds_refused_by(f.path);
	ck_ok(cms_control_create(f.ctx, new_path("fdctl"), NULL, &ctl));
	fds_refused_by(sock_path);
	ck_ok(cms_control_destroy(ctl));

	/* the importer, from an exporter (this thread) sending descriptors out of turn */
	o.ctx = f.ctx;
	o.path = new_path("fdexp");
	ck_assert_int_eq(cms_ipc_listen(o.path, &lfd, &file, why, sizeof(why)), CMS_OK);
	ck_assert_int_eq(pthread_create(&th, NULL, fake_open_main, &o), 0);
	ck_assert_int_eq(poll(&(struct pollfd){ lfd, POLLIN, 0 }, 1, 20000), 1);
	ck_assert_int_eq(cms_ipc_accept(lfd, NULL, 0, "", o.path, &c, &pid, &uid, why, sizeof(why)),
			 CMS_OK);
	ck_assert_int_eq(cms_ipc_recv(c, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			 CMS_OK);
	ck_assert_int_eq(m.type, CMS_IPC_HELLO);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_LAYOUT;
	strcpy(m.tag, "x");
	m.state = CMS_STATE_PAUSED;
	m.access = CMS_IPC_ACCESS_READWRITE;
	m.granularity = 2 * MiB;
	ck_assert_int_eq(cms_ipc_send(c, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			 CMS_OK);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_ok(o.st);
	before = t_open_fds();
	send_fds(c, CMS_IPC_MAX_FDS);
	/* a revocation after them: its answer says the descriptors were handled */
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	m.seq = 7;
	ck_assert_int_eq(cms_ipc_send(c, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			 CMS_OK);
	ck_assert_int_eq(cms_ipc_recv(c, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			 CMS_OK);
	ck_assert_int_eq(m.type, CMS_IPC_REVOKED);
	ck_assert_uint_eq(m.seq, 7);
	ck_assert_int_eq(open_fds_settled(before), before);
	ck_ok(cms_import_close(o.imp));
	close(c);
	close(lfd);
	cms_ipc_unlink(&file);
	fix_end(&f);
}
END_TEST

/* A socket file another process bound but does not listen on yet is not replaced. */
START_TEST(bound_socket_not_replaced)
{
	cms_context *ctx = t_ctx();
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat before, after;
	cms_exporter *exp;
	cms_control *ctl;
	int s;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", new_path("bound"));
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(lstat(a.sun_path, &before), 0);
	ck_assert_int_eq(cms_exporter_create(ctx, a.sun_path, NULL, &exp), CMS_ERR_EXISTS);
	ck_assert_ptr_null(exp);
	ck_assert_int_eq(cms_control_create(ctx, a.sun_path, NULL, &ctl), CMS_ERR_EXISTS);
	ck_assert_ptr_null(ctl);
	ck_assert_int_eq(lstat(a.sun_path, &after), 0);
	ck_assert_uint_eq(after.st_ino, before.st_ino);
	/* once its owner is gone, the file is stale and replaced */
	close(s);
	ck_ok(cms_exporter_create(ctx, a.sun_path, NULL, &exp));
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static void make_file(const char *dir, const char *name)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

/* lstat of dir/name: its st_mode, or 0 when there is none. */
static mode_t file_mode(const char *dir, const char *name)
{
	char path[300];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &sb) ? 0 : sb.st_mode;
}

/*
 * A relative socket path means the directory current at the call: after a chdir(),
 * destroying removes the socket file created, not the same name in the new directory;
 * and a socket file someone else put at the path meanwhile stays.
 */
START_TEST(relative_socket_paths_resolved_at_the_call)
{
	cms_context *ctx = t_ctx();
	char a[] = "/tmp/cms-rel-a-XXXXXX", b[] = "/tmp/cms-rel-b-XXXXXX", cwd[4096], x[64];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	cms_exporter *exp;
	cms_control *ctl;
	int s;

	ck_assert_ptr_nonnull(mkdtemp(a));
	ck_assert_ptr_nonnull(mkdtemp(b));
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(a), 0);
	ck_ok(cms_exporter_create(ctx, "x.sock", NULL, &exp));
	ck_ok(cms_control_create(ctx, "c.sock", NULL, &ctl));
	ck_assert_int_eq(chdir(b), 0);
	make_file(b, "x.sock");
	make_file(b, "c.sock");
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_control_destroy(ctl));
	ck_assert_msg(S_ISREG(file_mode(b, "x.sock")) && S_ISREG(file_mode(b, "c.sock")),
		      "an unrelated file was unlinked");
	ck_assert_uint_eq(file_mode(a, "x.sock"), 0);
	ck_assert_uint_eq(file_mode(a, "c.sock"), 0);
	ck_assert_int_eq(chdir(cwd), 0);

	/* the socket file was replaced by another socket: destroy leaves that one */
	snprintf(x, sizeof(x), "%s/x.sock", a);
	ck_ok(cms_exporter_create(ctx, x, NULL, &exp));
	ck_assert_int_eq(unlink(x), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", x);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_ok(cms_exporter_destroy(exp));
	ck_assert_msg(S_ISSOCK(file_mode(a, "x.sock")), "another process's socket was unlinked");
	close(s);
	ck_assert_int_eq(unlink(x), 0);
	snprintf(x, sizeof(x), "%s/x.sock", b);
	ck_assert_int_eq(unlink(x), 0);
	snprintf(x, sizeof(x), "%s/c.sock", b);
	ck_assert_int_eq(unlink(x), 0);
	ck_assert_int_eq(rmdir(a), 0);
	ck_assert_int_eq(rmdir(b), 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A connection that sends nothing (n == 0) or the first n bytes of a header, then stalls. */
static int stalled_client(const char *path, size_t n)
{
	static const uint8_t hdr[8] = { 'C', 'M', 'S', 'I', 1, 0, 8, 0 };
	char why[256];
	int fd;

	ck_assert_int_eq(cms_ipc_connect(path, &fd, why, sizeof(why)), CMS_OK);
	if (n)
		ck_assert_int_eq(send(fd, hdr, n, MSG_NOSIGNAL), (ssize_t)n);
	return fd;
}

/* Whether the server closed (or answered) fd yet. */
static int server_closed(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, 0) == 1;
}

/* Connects to path and sends m; returns the connection. */
static int connect_send(const char *path, const struct cms_ipc_msg *m)
{
	char why[256];
	int fd;

	ck_assert_int_eq(cms_ipc_connect(path, &fd, why, sizeof(why)), CMS_OK);
	ck_assert_int_eq(cms_ipc_send(fd, m, NULL, cms_ipc_now_ms() + 60000, why, sizeof(why)),
			 CMS_OK);
	return fd;
}

/* Asks the control socket at path for a status and checks the reply; returns the ms it took. */
static int64_t status_request(const char *path)
{
	int64_t t0 = cms_ipc_now_ms();
	struct cms_ipc_msg m;
	char why[256];
	int fd;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_STATUS;
	fd = connect_send(path, &m);
	ck_assert_msg(!cms_ipc_recv(fd, &m, NULL, t0 + 60000, why, sizeof(why)), "%s", why);
	ck_assert_int_eq(m.type, CMS_IPC_CTL_REPLY);
	ck_assert_int_eq(m.status, CMS_OK);
	cms_ipc_msg_free(&m);
	close(fd);
	return cms_ipc_now_ms() - t0;
}

/*
 * Silent and stalled clients cost the control socket and the exporter nothing: a real
 * request is answered while they are all still connected (before, the single thread
 * spent up to 5 s on each in turn: 15 s for 3), a pause gets its importer's answer, and
 * destroying with idle clients does not wait for them.
 */
START_TEST(stalled_clients_delay_nobody)
{
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	struct peer *imp;
	cms_control *ctl;
	struct fix f;
	char ep[108];
	int64_t t0;
	int c[3], i;

	fix_start(&f, "st", 1, 2 * MiB, 3, 3000, CMS_ACCESS_READWRITE);
	snprintf(ep, sizeof(ep), "%s", f.path);
	f.path = ep;
	co.flags = CMS_CONTROL_ALLOW_ALL;
	ck_ok(cms_control_create(f.ctx, new_path("stctl"), &co, &ctl));
	for (i = 0; i < 3; i++)
		c[i] = stalled_client(sock_path, i ? 0 : 8);
	usleep(200000); /* the server has seen them */
	t0 = status_request(sock_path);
	ck_assert_msg(t0 < 3000, "answered after %lld ms", (long long)t0);
	for (i = 0; i < 3; i++)
		ck_assert_msg(!server_closed(c[i]), "client %d was served first", i);
	t0 = cms_ipc_now_ms();
	ck_ok(cms_control_destroy(ctl));
	ck_assert_msg(cms_ipc_now_ms() - t0 < 2500, "destroy took %lld ms",
		      (long long)(cms_ipc_now_ms() - t0));
	for (i = 0; i < 3; i++)
		close(c[i]);

	/* the exporter: a pause needs its importer's answer, read past two stalled clients */
	imp = importer(f.path, "st", 0);
	ck_peer_ok(imp, "check 0 3");
	for (i = 0; i < 2; i++)
		c[i] = stalled_client(f.path, 8);
	usleep(200000);
	ck_ok(cms_region_pause(f.r, NULL, NULL));
	ck_ok(cms_region_resume(f.r, NULL, NULL));
	ck_assert_int_eq(peer_end(imp, 0), 0);
	for (i = 0; i < 2; i++)
		close(c[i]);
	fix_end(&f);
}
END_TEST

/* A control callback that takes longer than the idle timeout (CMS_IPC_IDLE_MS, 5 s). */
static cms_status slow_refusal(void *user, const cms_control_request *req)
{
	(void)user;
	if (req->phase == CMS_CONTROL_BEFORE)
		usleep(6500 * 1000);
	return CMS_ERR_REFUSED;
}

/*
 * A request that arrives while the control thread serves a long one (a callback that takes
 * longer than the idle timeout) is answered, not dropped as idle: deadlines are judged when
 * the thread's poll returns, not after it has served others.
 */
START_TEST(request_during_a_long_one_is_served)
{
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	struct cms_ipc_msg m;
	cms_control *ctl;
	cms_context *ctx = t_ctx();
	char why[256];
	int64_t t0;
	int a, b;

	co.fn = slow_refusal;
	ck_ok(cms_control_create(ctx, new_path("slow"), &co, &ctl));
	t0 = cms_ipc_now_ms();
	/* b connects first and stays quiet: the thread accepts it, its idle clock runs */
	ck_assert_int_eq(cms_ipc_connect(sock_path, &b, why, sizeof(why)), CMS_OK);
	usleep(300 * 1000);
	ck_assert_int_eq(cms_ipc_connect(sock_path, &a, why, sizeof(why)), CMS_OK);
	usleep(300 * 1000);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_PAUSE;
	snprintf(m.tag, sizeof(m.tag), "kv");
	ck_assert_int_eq(cms_ipc_send(a, &m, NULL, t0 + 20000, why, sizeof(why)), CMS_OK);
	usleep(1000 * 1000); /* the thread is in a's callback (6.5 s) when b asks */
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_STATUS;
	ck_assert_int_eq(cms_ipc_send(b, &m, NULL, t0 + 30000, why, sizeof(why)), CMS_OK);
	ck_assert_msg(!cms_ipc_recv(b, &m, NULL, t0 + 30000, why, sizeof(why)), "%s", why);
	ck_assert_msg(m.type == CMS_IPC_CTL_REPLY && m.status == CMS_OK,
		      "status request answered with type %u status %s: %s", m.type,
		      cms_status_name(m.status), m.text);
	cms_ipc_msg_free(&m);
	ck_assert_msg(!cms_ipc_recv(a, &m, NULL, t0 + 30000, why, sizeof(why)), "%s", why);
	ck_assert_int_ne(m.status, CMS_ERR_TIMEOUT); /* the long request is answered too */
	cms_ipc_msg_free(&m);
	close(a);
	close(b);
	ck_ok(cms_control_destroy(ctl));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The exporter and the control socket keep at most their connection limit (128, 8: the
 * rest wait in the backlog), and when accept fails for want of descriptors (EMFILE) they
 * back off instead of spinning on the readable listening socket.
 */
START_TEST(connection_limit_and_accept_backoff)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct rlimit old, lim;
	cms_control *ctl;
	struct fix f;
	char ep[108];
	int c[160], fill[64], base, nfill = 0, i;
	double cpu;

	fix_start(&f, "lim", 1, 2 * MiB, 3, 0, CMS_ACCESS_READWRITE);
	snprintf(ep, sizeof(ep), "%s", f.path);
	f.path = ep;
	ck_ok(cms_control_create(f.ctx, new_path("limctl"), NULL, &ctl));
	base = t_open_fds();
	for (i = 0; i < 20; i++)
		c[i] = stalled_client(sock_path, 0);
	for (i = 20; i < 160; i++)
		c[i] = stalled_client(ep, 0);
	usleep(500000);
	/* the server side holds at most 8 + 128 of the 160 */
	ck_assert_int_le(t_open_fds() - base - 160, 8 + 128);
	for (i = 0; i < 160; i++)
		close(c[i]);
	ck_assert_int_eq(open_fds_settled(base), base); /* closed by the servers */

	/* no descriptor left: accept fails with EMFILE while a client waits */
	for (i = 0; i < 2; i++) {
		c[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(c[i], 0);
	}
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)t_open_fds() + 32;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	while (nfill < 64 && (fill[nfill] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		nfill++;
	ck_assert_int_eq(errno, EMFILE);
	ck_assert_int_lt(nfill, 64);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", ep);
	ck_assert_int_eq(connect(c[0], (struct sockaddr *)&a, sizeof(a)), 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	ck_assert_int_eq(connect(c[1], (struct sockaddr *)&a, sizeof(a)), 0);
	cpu = cpu_seconds();
	usleep(1000000);
	cpu = cpu_seconds() - cpu;
	while (nfill > 0)
		close(fill[--nfill]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_msg(cpu < 0.1, "the servers used %.2f s of CPU in 1 s, waiting for descriptors",
		      cpu);
	close(c[0]);
	close(c[1]);
	ck_ok(cms_control_destroy(ctl));
	fix_end(&f);
}
END_TEST

START_TEST(layout_change_detected)
{
	struct fix f;
	struct peer *imp;
	const char *l;

	fix_start(&f, "w", 2, 2 * MiB, 60, 0, CMS_ACCESS_READWRITE);
	imp = importer(f.path, "w", 0);
	ck_ok(cms_free(f.ctx, f.p[1]));
	ck_ok(cms_pause(f.ctx, "w", NULL, NULL));
	ck_ok(cms_resume(f.ctx, "w", NULL, NULL));
	ck_peer_ok(imp, "wait %x", CMS_IMPORT_LAYOUT_CHANGED);
	l = peer_cmd(imp, "ptr 0");
	ck_assert_msg(!strncmp(l, "err CMS_ERR_LAYOUT_CHANGED", 26), "%s", l);
	ck_assert_uint_eq(wait_event(imp, "layout=", 1), 1);
	ck_assert_uint_eq(field(peer_cmd(imp, "counters"), "mappings="), 0);
	/* A new import sees the new layout. */
	ck_assert_int_eq(peer_end(imp, 0), 0);
	imp = importer(f.path, "w", 0);
	ck_assert_uint_eq(field(peer_cmd(imp, "info"), "n="), 1);
	ck_assert_int_eq(peer_end(imp, 0), 0);
	fix_end(&f);
}
END_TEST

START_TEST(destroy_revokes)
{
	struct fix f;
	struct peer *imp;

	fix_start(&f, "w", 2, 2 * MiB, 70, 0, CMS_ACCESS_READWRITE);
	imp = importer(f.path, "w", 0);
	ck_ok(cms_region_destroy(f.r)); /* the importer drops its mappings first */
	ck_assert_uint_eq(field(peer_cmd(imp, "info"), "state="), CMS_IMPORT_REVOKED);
	ck_assert_uint_eq(field(peer_cmd(imp, "counters"), "mappings="), 0);
	ck_assert_uint_eq(t_counters().physical_allocations, 0);
	ck_ok(cms_exporter_destroy(f.exp));
	ck_peer_ok(imp, "wait %x", CMS_IMPORT_DISCONNECTED);
	ck_assert_int_eq(peer_end(imp, 0), 0);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

/* Waits until the exporter's thread has closed every connection (importers close first). */
static void settle(cms_exporter *exp)
{
	uint64_t n = 1;

	for (int k = 0; k < 1000 && n; k++) {
		ck_ok(cms_exporter_importers(exp, &n));
		if (n)
			usleep(5000);
	}
	ck_assert_uint_eq(n, 0);
}

/*
 * A driver call failing during an import (in this process: exporter and importer share the
 * simulation's fault table) leaves nothing held on either side, and a retry succeeds.
 */
START_TEST(import_faults_roll_back)
{
	static const char *const fns[] = { "cuMemExportToShareableHandle",
					   "cuMemImportFromShareableHandle", "cuMemAddressReserve",
					   "cuMemMap", "cuMemSetAccess" };
	struct fix f;
	cms_import_info info = { .struct_size = sizeof(info) };
	cms_import *imp;
	int points = 0, base_fds = 0;

	fix_start(&f, "w", 3, 2 * MiB, 30, 0, CMS_ACCESS_READWRITE);
	/* warm up: the device is prepared, every lazily created object exists */
	ck_ok(cms_import_open(f.ctx, f.path, "w", NULL, &imp));
	ck_ok(cms_import_close(imp));
	settle(f.exp);
	for (int k = 0; k < 50; k++) { /* the exporter's end closes a moment later */
		base_fds = t_open_fds();
		usleep(10000);
		if (t_open_fds() == base_fds)
			break;
	}
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		for (uint64_t nth = 1; nth <= 3; nth++) {
			cmssim_counters before, after;
			cms_status st;
			int fds;

			before = t_counters();
			fds = base_fds;

			ck_assert_int_eq(t_sim()->fail_call(fns[i], nth, CUDA_ERROR_OUT_OF_MEMORY),
					 0);
			st = cms_import_open(f.ctx, f.path, "w", NULL, &imp);
			t_sim()->clear_faults();
			if (!st) { /* fewer calls than nth: nothing failed */
				ck_ok(cms_import_close(imp));
				continue;
			}
			points++;
			settle(f.exp);
			for (int k = 0; k < 500 && t_open_fds() != fds; k++)
				usleep(10000); /* a dropped connection is closed a moment later */
			after = t_counters();
			ck_assert_msg(after.handles == before.handles &&
					      after.mappings == before.mappings &&
					      after.reservations == before.reservations,
				      "%s #%llu (%s): handles %llu->%llu mappings %llu->%llu",
				      fns[i], (unsigned long long)nth, cms_status_name(st),
				      (unsigned long long)before.handles,
				      (unsigned long long)after.handles,
				      (unsigned long long)before.mappings,
				      (unsigned long long)after.mappings);
			ck_assert_int_eq(t_open_fds(), fds);
		}
	ck_assert_int_ge(points, 5);
	ck_ok(cms_import_open(f.ctx, f.path, "w", NULL, &imp)); /* and a retry works */
	ck_ok(cms_import_info_get(imp, &info));
	ck_assert_uint_eq(info.state, CMS_IMPORT_MAPPED);
	ck_assert_int_eq(t_check(0, info.base, 2 * MiB, 30) == -1 ||
				 t_check(0, info.base, 2 * MiB, 31) == -1 ||
				 t_check(0, info.base, 2 * MiB, 32) == -1,
			 1);
	ck_ok(cms_import_close(imp));
	fix_end(&f);
}
END_TEST

/* Each allocation of f (filled with seed + i) reads the same through imp. */
static void check_import(cms_import *imp, const struct fix *f, int n, uint64_t bytes, uint32_t seed)
{
	uint64_t local;

	for (int i = 0; i < n; i++) {
		ck_ok(cms_import_translate(imp, f->p[i], &local));
		ck_assert_int_eq(t_check(0, local, bytes, seed + (uint32_t)i), -1);
	}
}

/*
 * A free of a shared allocation that fails at its cuMemUnmap (cms_free releases the handle
 * while mapped, then unmaps) changes nothing an importer can see (review items 2 and 11): the
 * handle is retained back, so a new import maps every allocation (before: CMS_ERR_INTERNAL, "an
 * allocation has no memory", until a pause and resume), an existing import keeps reading it and
 * gets its grant again after a pause and resume, and the free succeeds when tried again.
 */
START_TEST(failed_free_keeps_imports)
{
	cms_import *old, *imp;
	struct fix f;

	fix_start(&f, "w", 3, 2 * MiB, 40, 0, CMS_ACCESS_READWRITE);
	ck_ok(cms_import_open(f.ctx, f.path, "w", NULL, &old));
	ck_assert_int_eq(t_sim()->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_free(f.ctx, f.p[1]), CMS_ERR_DRIVER);
	ck_assert_int_eq(t_sim()->armed_faults(), 0);
	ck_ok(cms_import_open(f.ctx, f.path, "w", NULL, &imp));
	ck_assert_uint_eq(import_state(imp, CMS_IMPORT_MAPPED), CMS_IMPORT_MAPPED);
	check_import(imp, &f, 3, 2 * MiB, 40);
	check_import(old, &f, 3, 2 * MiB, 40);
	ck_ok(cms_import_close(imp));
	ck_ok(cms_region_pause(f.r, NULL, NULL));  /* revokes old's grant */
	ck_ok(cms_region_resume(f.r, NULL, NULL)); /* and grants it again */
	ck_assert_uint_eq(import_state(old, CMS_IMPORT_MAPPED), CMS_IMPORT_MAPPED);
	check_import(old, &f, 3, 2 * MiB, 40);
	ck_ok(cms_import_close(old));
	settle(f.exp);
	ck_ok(cms_free(f.ctx, f.p[1]));
	fix_end(&f);
}
END_TEST

START_TEST(bad_arguments)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_exporter *exp = NULL;
	cms_import *imp = NULL;
	cms_region *plain, *r;
	char longpath[200];

	plain = t_region(ctx, "plain", 0, CMS_POLICY_DISCARD);
	o.flags = CMS_REGION_SHAREABLE_FABRIC; /* the simulation has no fabric handles */
	ck_status(cms_region_create(ctx, "fab", &o, &r), CMS_ERR_NOT_SUPPORTED);
	o.flags = 0x80;
	ck_status(cms_region_create(ctx, "fab", &o, &r), CMS_ERR_INVALID_ARGUMENT);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	ck_status(cms_exporter_create(ctx, longpath, NULL, &exp), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_exporter_create(ctx, "", NULL, &exp), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_exporter_create(NULL, "/tmp/x", NULL, &exp), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_exporter_create(ctx, "/dev/null", NULL, &exp), CMS_ERR_EXISTS);
	/* a missing directory, or a file as one: CMS_ERR_IO, as the (frozen 1.1) headers list */
	ck_status(cms_exporter_create(ctx, "/tmp/no-such-cms-dir/x.sock", NULL, &exp), CMS_ERR_IO);
	ck_status(cms_exporter_create(ctx, "/dev/null/x.sock", NULL, &exp), CMS_ERR_IO);
	ck_status(cms_control_create(ctx, "/tmp/no-such-cms-dir/c.sock", NULL,
				     &(cms_control *){ NULL }),
		  CMS_ERR_IO);
	ck_ok(cms_exporter_create(ctx, new_path("args"), NULL, &exp));
	ck_status(cms_exporter_create(ctx, sock_path, NULL, &(cms_exporter *){ NULL }),
		  CMS_ERR_EXISTS); /* in use */
	ck_status(cms_exporter_publish(exp, plain, CMS_ACCESS_READ), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_exporter_publish(exp, NULL, CMS_ACCESS_READ), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_import_open(ctx, "/tmp/no-such-cms-socket", "w", NULL, &imp),
		  CMS_ERR_NOT_FOUND);
	ck_status(cms_import_open(ctx, sock_path, "", NULL, &imp), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_import_alloc_get(NULL, 0, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_exporter_destroy(NULL));
	ck_ok(cms_import_close(NULL));
	ck_ok(cms_control_destroy(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * The IPC structs appeared in 1.1: a struct_size of their 1.1 size (LP64, as a 1.1 header
 * declared them) is accepted by every later library, one field less is refused. A field
 * added in a later release must not make these sizes too small (their VER0 is the 1.1 size,
 * not sizeof).
 */
#define EXPORTER_OPTIONS_1_1 32u
#define IMPORT_OPTIONS_1_1 72u
#define IMPORT_INFO_1_1 136u
#define CONTROL_OPTIONS_1_1 48u
_Static_assert(sizeof(cms_exporter_options) >= EXPORTER_OPTIONS_1_1, "1.1 size");
_Static_assert(sizeof(cms_import_options) >= IMPORT_OPTIONS_1_1, "1.1 size");
_Static_assert(sizeof(cms_import_info) >= IMPORT_INFO_1_1, "1.1 size");
_Static_assert(sizeof(cms_control_options) >= CONTROL_OPTIONS_1_1, "1.1 size");

START_TEST(struct_sizes_of_1_1)
{
	cms_context *ctx = t_ctx();
	uint64_t p[1];
	cms_region *r = shared_region(ctx, "w", 1, 2 * MiB, 1, p);
	cms_exporter_options eo = CMS_EXPORTER_OPTIONS_INIT;
	cms_import_options io = CMS_IMPORT_OPTIONS_INIT;
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	cms_import_info ii;
	char epath[108], cpath[108];
	cms_exporter *exp = NULL;
	cms_import *imp = NULL;
	cms_control *ctl = NULL;

	snprintf(epath, sizeof(epath), "%s", new_path("v11e"));
	snprintf(cpath, sizeof(cpath), "%s", new_path("v11c"));
	eo.struct_size = EXPORTER_OPTIONS_1_1 - 4;
	ck_status(cms_exporter_create(ctx, epath, &eo, &exp), CMS_ERR_STRUCT_SIZE);
	eo.struct_size = EXPORTER_OPTIONS_1_1;
	ck_ok(cms_exporter_create(ctx, epath, &eo, &exp));
	ck_ok(cms_exporter_publish(exp, r, CMS_ACCESS_READWRITE));

	io.struct_size = IMPORT_OPTIONS_1_1 - 8;
	ck_status(cms_import_open(ctx, epath, "w", &io, &imp), CMS_ERR_STRUCT_SIZE);
	ck_assert_ptr_null(imp);
	io.struct_size = IMPORT_OPTIONS_1_1;
	ck_ok(cms_import_open(ctx, epath, "w", &io, &imp));

	memset(&ii, 0, sizeof(ii));
	ii.struct_size = IMPORT_INFO_1_1 - 4;
	ck_status(cms_import_info_get(imp, &ii), CMS_ERR_STRUCT_SIZE);
	ii.struct_size = IMPORT_INFO_1_1;
	ck_ok(cms_import_info_get(imp, &ii));
	ck_assert_uint_eq(ii.struct_size, IMPORT_INFO_1_1);
	ck_assert_str_eq(ii.tag, "w");
	ck_assert_uint_eq(ii.state, CMS_IMPORT_MAPPED);

	co.struct_size = CONTROL_OPTIONS_1_1 - 8;
	ck_status(cms_control_create(ctx, cpath, &co, &ctl), CMS_ERR_STRUCT_SIZE);
	ck_assert_ptr_null(ctl);
	co.struct_size = CONTROL_OPTIONS_1_1;
	ck_ok(cms_control_create(ctx, cpath, &co, &ctl));

	ck_ok(cms_control_destroy(ctl));
	ck_ok(cms_import_close(imp));
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

#ifdef CMS_CMSCTL
/* ---- control socket through cmsctl ---- */

static int ctl_calls[2];
static cms_status ctl_answer;
static int ctl_block; /* 1: the callback waits until it is 0 again */
static cms_status control_cb(void *user, const cms_control_request *req)
{
	(void)user;
	__atomic_fetch_add(&ctl_calls[req->phase & 1], 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&ctl_block, __ATOMIC_SEQ_CST))
		usleep(1000);
	return req->phase == CMS_CONTROL_BEFORE ? __atomic_load_n(&ctl_answer, __ATOMIC_SEQ_CST) :
						  CMS_OK;
}

/* Runs cmsctl with args; its stdout into out; returns the exit status. */
static int cmsctl(char *out, size_t len, char *const args[])
{
	char *argv[16] = { CMS_CMSCTL };
	struct peer p;
	size_t n = 0;
	int i, status;

	for (i = 0; args[i] && i < 14; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	peer_start(&p, argv);
	close(p.in);
	for (;;) {
		ssize_t k = read(p.out, out + n, len - 1 - n);

		if (k <= 0)
			break;
		n += (size_t)k;
	}
	out[n] = '\0';
	close(p.out);
	ck_assert_int_eq(waitpid(p.pid, &status, 0), p.pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

START_TEST(control_socket)
{
	cms_context *ctx = t_ctx();
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	cms_region_info ri = { .struct_size = sizeof(ri) };
	uint64_t p[1];
	cms_region *r = shared_region(ctx, "weights", 1, 2 * MiB, 4, p);
	char path[108], out[8192];
	cms_control *ctl;

	snprintf(path, sizeof(path), "%s", new_path("ctl"));
	co.fn = control_cb;
	__atomic_store_n(&ctl_answer, CMS_OK, __ATOMIC_SEQ_CST);
	ck_ok(cms_control_create(ctx, path, &co, &ctl));
	ck_assert_int_eq(cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "status", NULL }),
			 0);
	ck_assert_msg(strstr(out, "weights") && strstr(out, "active"), "%s", out);
	ck_assert_int_eq(cmsctl(out, sizeof(out),
				(char *[]){ "--socket", path, "--json", "pause", "weights", NULL }),
			 0);
	ck_assert_msg(strstr(out, "\"status\": \"CMS_OK\""), "%s", out);
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_PAUSED);
	ck_assert_int_eq(__atomic_load_n(&ctl_calls[0], __ATOMIC_SEQ_CST), 1);
	ck_assert_int_eq(__atomic_load_n(&ctl_calls[1], __ATOMIC_SEQ_CST), 1);
	ck_assert_int_eq(
		cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "--json", "status", NULL }),
		0);
	ck_assert_msg(strstr(out, "\"state\": \"paused\""), "%s", out);
	/* The library's failure reaches cmsctl's exit status. */
	ck_assert_int_ne(
		cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "pause", "weights", NULL }),
		0);
	ck_assert_int_eq(
		cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "resume", "weights", NULL }),
		0);
	ck_assert_int_eq(t_check(0, p[0], 2 * MiB, 4), -1);
	/* The application refuses. */
	__atomic_store_n(&ctl_answer, CMS_ERR_REFUSED, __ATOMIC_SEQ_CST);
	ck_assert_int_ne(cmsctl(out, sizeof(out),
				(char *[]){ "--socket", path, "--json", "pause", "weights", NULL }),
			 0);
	ck_assert_msg(strstr(out, "CMS_ERR_REFUSED"), "%s", out);
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_ACTIVE);
	ck_ok(cms_control_destroy(ctl));
	/* Without a callback: status only. */
	ck_ok(cms_control_create(ctx, path, NULL, &ctl));
	ck_assert_int_ne(
		cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "pause", "weights", NULL }),
		0);
	ck_assert_int_eq(cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "status", NULL }),
			 0);
	ck_ok(cms_control_destroy(ctl));
	/* No socket. */
	ck_assert_int_ne(cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "status", NULL }),
			 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* "79.9 GiB" (tool_format_bytes) -> bytes; -1 when it is not such a size. */
static double parse_size(const char *s, const char **end)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = strtod(s, (char **)end), mul = 1;
	size_t i;

	if (*end == s || **end != ' ')
		return -1;
	s = *end + 1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++, mul *= 1024) {
		size_t n = strlen(units[i]);

		if (!strncmp(s, units[i], n) && !isalpha((unsigned char)s[n])) {
			*end = s + n;
			return v * mul;
		}
	}
	return -1;
}

/*
 * What cmsctl reports is what happened: a DISK region is called "disk" (not
 * "discard"), the pause line's three sizes are the bytes released and the
 * driver's free memory before and after, every JSON object carries the schema
 * version, and --timeout bounds the wait for an answer.
 */
START_TEST(control_socket_reports)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region_info ri = { .struct_size = sizeof(ri) };
	uint64_t p[1];
	cms_region *r = shared_region(ctx, "weights", 1, 8 * MiB, 5, p), *d;
	char path[108], out[8192], dir[] = "/tmp/cms-ctl-disk-XXXXXX";
	const char *line, *s, *e;
	double released, before, after;
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	cms_control *ctl;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	o.policy = CMS_POLICY_DISK;
	ck_ok(cms_region_create(ctx, "ckpt", &o, &d));
	ck_ok(cms_region_disk_dir_set(d, dir));
	snprintf(path, sizeof(path), "%s", new_path("ctl2"));
	co.fn = control_cb;
	__atomic_store_n(&ctl_answer, CMS_OK, __ATOMIC_SEQ_CST);
	ck_ok(cms_control_create(ctx, path, &co, &ctl));

	/* The policy's name, in the table and in JSON. */
	ck_assert_int_eq(cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "status", NULL }),
			 0);
	line = strstr(out, "\nckpt ");
	ck_assert_msg(line && strstr(line, " disk "), "%s", out);
	ck_assert_int_eq(
		cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "--json", "status", NULL }),
		0);
	ck_assert_msg(strstr(out, "\"tag\": \"ckpt\", \"device\": 0, \"policy\": \"disk\""), "%s",
		      out);
	ck_assert_msg(strstr(out, "{\"schema_version\": 1, \"status\": \"CMS_OK\", ") == out, "%s",
		      out);

	/* The pause line: "... <released> released in ... (driver free <before> -> <after>)" */
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_int_eq(
		cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "pause", "weights", NULL }),
		0);
	s = strstr(out, "\": ");
	ck_assert_msg(s, "%s", out);
	released = parse_size(s + 3, &e);
	ck_assert_msg(released == (double)ri.physical_bytes, "released %.0f of %llu: %s", released,
		      (unsigned long long)ri.physical_bytes, out);
	s = strstr(out, "driver free ");
	ck_assert_msg(s, "%s", out);
	before = parse_size(s + 12, &e);
	ck_assert_msg(before >= 0 && !strncmp(e, " -> ", 4), "%s", out);
	after = parse_size(e + 4, &e);
	/* Memory released is free afterwards: at least the bytes released, no less than before. */
	ck_assert_msg(after >= before && after >= released, "%s", out);
	ck_assert_int_eq(
		cmsctl(out, sizeof(out),
		       (char *[]){ "--socket", path, "--json", "resume", "weights", NULL }),
		0);
	ck_assert_msg(strstr(out, "\"schema_version\": 1") && strstr(out, "\"op\": \"resume\""),
		      "%s", out);

	/* --timeout: an application that does not answer in time is an error, as JSON. */
	__atomic_store_n(&ctl_block, 1, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(cmsctl(out, sizeof(out),
				(char *[]){ "--socket", path, "--json", "--timeout", "1", "pause",
					    "weights", NULL }),
			 1);
	__atomic_store_n(&ctl_block, 0, __ATOMIC_SEQ_CST);
	ck_assert_msg(strstr(out, "{\"schema_version\": 1, \"status\": \"CMS_ERR_TIMEOUT\", "
				  "\"op\": \"pause\", \"tag\": \"weights\", \"message\": "),
		      "%s", out);
	ck_ok(cms_control_destroy(ctl));
	ck_ok(cms_region_info_get(r, &ri));
	if (ri.state == CMS_STATE_PAUSED) /* the pause went ahead once the callback returned */
		ck_ok(cms_resume(ctx, "weights", NULL, NULL));
	ck_assert_int_eq(t_check(0, p[0], 8 * MiB, 5), -1);

	/* No socket: still one JSON error object. */
	ck_assert_int_eq(
		cmsctl(out, sizeof(out), (char *[]){ "--socket", path, "--json", "status", NULL }),
		1);
	ck_assert_msg(strstr(out, "{\"schema_version\": 1, \"status\": \"CMS_ERR_NOT_FOUND\", "
				  "\"op\": \"status\""),
		      "%s", out);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST
#endif

/* Bytes the process has allocated now (the sanitizer's allocator when there is one). */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

static size_t allocated_bytes(void)
{
	struct mallinfo2 mi;

	if (__sanitizer_get_current_allocated_bytes)
		return __sanitizer_get_current_allocated_bytes();
	mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* A region of n allocations of 4 KiB (one 64 KiB granule each) published on a new exporter
 * at sock_path. */
static cms_region *big_region(cms_context *ctx, const char *tag, int n, uint32_t timeout_ms,
			      cms_exporter **exp)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r;
	uint64_t p;
	int i;

	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_SHAREABLE;
	ck_ok(cms_region_create(ctx, tag, &o, &r));
	for (i = 0; i < n; i++)
		ck_ok(cms_alloc(r, 4 * KiB, &p));
	*exp = exporter(ctx, new_path(tag), timeout_ms);
	ck_ok(cms_exporter_publish(*exp, r, CMS_ACCESS_READWRITE));
	return r;
}

/* A client that asks for tag's memory (HELLO) and then never reads. */
static int hello_client(const char *path, const char *tag)
{
	struct cms_ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_HELLO;
	m.device = -1;
	m.access = CMS_ACCESS_READWRITE;
	snprintf(m.tag, sizeof(m.tag), "%s", tag);
	return connect_send(path, &m);
}

static int64_t ms_since(int64_t t0)
{
	return cms_ipc_now_ms() - t0;
}

/*
 * Clients that ask for a region whose layout is larger than a socket buffer and then never
 * read cost nobody else anything (issue 26, 1): a pause of the region they asked for fails
 * after revoke_timeout_ms (1.5 s), not after 5 s per client; then a pause of another region,
 * another importer's HELLO and an allocation in their region finish at once. Before, grants
 * were written with a 5 s deadline under the exporter's and the region's locks: each of these
 * waited 4.9-15 s. The pause comes first: the clients are dropped 5 s (CMS_IPC_IO_MS) after
 * their HELLO, and a dropped client counts as revoked, so the pause must end before that.
 */
START_TEST(stalled_grant_delays_nobody)
{
	enum { NBIG = 8000, NSTALL = 3 };
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *big, *small;
	cms_exporter *exp;
	struct cms_ipc_msg m;
	uint64_t ptr, p;
	char why[256];
	int64_t t0, ms;
	int c[NSTALL], fd, i;

	big = big_region(ctx, "big", NBIG, 1500, &exp);
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_SHAREABLE;
	ck_ok(cms_region_create(ctx, "small", &o, &small));
	ck_ok(cms_alloc(small, 64 * KiB, &p));
	ck_ok(cms_exporter_publish(exp, small, CMS_ACCESS_READWRITE));
	for (i = 0; i < NSTALL; i++)
		c[i] = hello_client(sock_path, "big");
	usleep(300000); /* the exporter grants them (the layout fills their socket buffers) */

	/* the stalled clients hold the memory (granted, never answer): the pause gives up at
	 * revoke_timeout_ms, well before they are dropped (5 s after their HELLO) */
	t0 = cms_ipc_now_ms();
	ck_status(cms_region_pause(big, NULL, NULL), CMS_ERR_TIMEOUT);
	ms = ms_since(t0);
	ck_assert_msg(ms >= 1400 && ms < 1500 + 2500,
		      "a pause with stalled importers took %lld ms (revoke_timeout_ms 1500)",
		      (long long)ms);

	t0 = cms_ipc_now_ms();
	ck_ok(cms_region_pause(small, NULL, NULL));
	ck_ok(cms_region_resume(small, NULL, NULL));
	ms = ms_since(t0);
	ck_assert_msg(ms < 2500, "a pause of another region took %lld ms", (long long)ms);

	t0 = cms_ipc_now_ms();
	fd = hello_client(sock_path, "small");
	ck_assert_msg(!cms_ipc_recv(fd, &m, NULL, t0 + 60000, why, sizeof(why)), "%s", why);
	ms = ms_since(t0);
	ck_assert_int_eq(m.type, CMS_IPC_LAYOUT);
	cms_ipc_msg_free(&m);
	close(fd);
	ck_assert_msg(ms < 2500, "another importer's HELLO took %lld ms", (long long)ms);

	t0 = cms_ipc_now_ms();
	ck_ok(cms_alloc(big, 64 * KiB, &ptr));
	ms = ms_since(t0);
	ck_assert_msg(ms < 2500, "cms_alloc in the published region took %lld ms", (long long)ms);

	for (i = 0; i < NSTALL; i++)
		close(c[i]);
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * A pause that starts while an importer is still receiving a grant (its layout not read
 * yet): the revocation follows the grant's last descriptors, which the server thread
 * exports while the pause waits holding the region's lock; the importer that reads it all
 * and answers lets the pause succeed.
 */
START_TEST(pause_during_a_grant)
{
	enum { NBIG = 8000 };
	cms_context *ctx = t_ctx();
	struct pause_arg pa = { .ctx = ctx, .tag = "grant" };
	int fds[CMS_IPC_MAX_FDS];
	struct cms_ipc_msg m;
	cms_exporter *exp;
	uint32_t got = 0, k;
	char why[256];
	pthread_t t;
	int fd;

	big_region(ctx, "grant", NBIG, 120000, &exp);
	fd = hello_client(sock_path, "grant");
	usleep(300000); /* the layout fills the socket: the grant is under way */
	ck_assert_int_eq(pthread_create(&t, NULL, pause_thread, &pa), 0);
	usleep(300000); /* the pause waits for its importer */
	ck_assert_msg(!cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)), "%s",
		      why);
	ck_assert_int_eq(m.type, CMS_IPC_LAYOUT);
	ck_assert_int_eq(m.nallocs, NBIG);
	cms_ipc_msg_free(&m);
	while (got < NBIG) {
		ck_assert_msg(
			!cms_ipc_recv(fd, &m, fds, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			"after %u descriptors: %s", got, why);
		ck_assert_int_eq(m.type, CMS_IPC_FDS);
		ck_assert_int_eq(m.first, got);
		for (k = 0; k < m.nfds; k++)
			close(fds[k]);
		got += m.nfds;
		cms_ipc_msg_free(&m);
	}
	ck_assert_msg(!cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)), "%s",
		      why);
	ck_assert_int_eq(m.type, CMS_IPC_REVOKE);
	m.type = CMS_IPC_REVOKED;
	m.status = 0;
	ck_assert_int_eq(cms_ipc_send(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			 CMS_OK);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(pa.st == CMS_OK, "pause: %s: %s", cms_status_name(pa.st), pa.msg);
	close(fd);
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * A message's payload is not allocated when its header arrives (issue 26, 7): 128
 * connections that announce the largest message (8 MiB) and send a few bytes of it held
 * 1 GiB before; now the exporter holds little for them.
 */
START_TEST(partial_messages_hold_little_memory)
{
	enum { NCONN = 128 };
	uint8_t msg[16 + 100] = { 'C', 'M', 'S', 'I', 1, 0, CMS_IPC_HELLO, 0 };
	uint32_t payload = CMS_IPC_MAX_PAYLOAD;
	struct fix f;
	size_t before, after;
	int c[NCONN], i;

	fix_start(&f, "mem", 1, 64 * KiB, 3, 0, CMS_ACCESS_READWRITE);
	memcpy(msg + 8, &payload, sizeof(payload)); /* little-endian hosts */
	memset(msg + 16, 'x', 100);
	before = allocated_bytes();
	for (i = 0; i < NCONN; i++) {
		c[i] = stalled_client(f.path, 0);
		ck_assert_int_eq(send(c[i], msg, sizeof(msg), MSG_NOSIGNAL), (ssize_t)sizeof(msg));
	}
	usleep(500000);
	after = allocated_bytes();
	ck_assert_msg(after < before + 64 * MiB,
		      "%d connections with a partial message: %zu MiB allocated", NCONN,
		      (after - before) >> 20);
	for (i = 0; i < NCONN; i++)
		close(c[i]);
	fix_end(&f);
}
END_TEST

struct flood {
	const char *path;
	volatile int stop;
	int connects;
};

/* Connects to the socket and closes at once, as fast as it can, until told to stop. */
static void *flood_main(void *arg)
{
	struct flood *fl = arg;
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", fl->path);
	while (!__atomic_load_n(&fl->stop, __ATOMIC_ACQUIRE)) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			break;
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			fl->connects++;
		close(fd);
	}
	return NULL;
}

/*
 * A connect-and-close flood does not make a server hold more descriptors than a small
 * multiple of its connection limit (8 for the control socket). Before, each accept past
 * the limit marked the oldest idle connection closing, which no longer counted, so one
 * accept pass took the whole backlog: the reviewer's flood held 1080 extra descriptors.
 */
START_TEST(connect_flood_bounded)
{
	struct flood fl = { 0 };
	cms_context *ctx = t_ctx();
	cms_control *ctl;
	pthread_t th;
	int base, most = 0, i;

	fl.path = new_path("flood");
	ck_ok(cms_control_create(ctx, fl.path, NULL, &ctl));
	base = t_open_fds();
	ck_assert_int_eq(pthread_create(&th, NULL, flood_main, &fl), 0);
	for (i = 0; i < 100; i++) {
		int n = t_open_fds() - base;

		if (n > most)
			most = n;
		usleep(20000);
	}
	__atomic_store_n(&fl.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	ck_assert_msg(fl.connects > 100, "the flood connected only %d times", fl.connects);
	/* the flood's own socket is one of them */
	ck_assert_msg(most < 3 * 8, "%d descriptors held during a flood of %d connects", most,
		      fl.connects);
	ck_ok(cms_control_destroy(ctl));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * Idle connections do not deny the operator's request (issue 26, 7): with 48 connections
 * that send nothing, a status request is answered at once. Before, the control socket kept
 * 8 and the rest waited in the backlog until those timed out (5 s each round: 30 s).
 */
START_TEST(idle_control_clients_deny_nobody)
{
	enum { NIDLE = 48 };
	cms_context *ctx = t_ctx();
	cms_control *ctl;
	int c[NIDLE], i;
	int64_t ms;

	ck_ok(cms_control_create(ctx, new_path("idle"), NULL, &ctl));
	for (i = 0; i < NIDLE; i++)
		c[i] = stalled_client(sock_path, 0);
	usleep(200000);
	ms = status_request(sock_path);
	ck_assert_msg(ms < 3000, "status answered after %lld ms with %d idle connections",
		      (long long)ms, NIDLE);
	for (i = 0; i < NIDLE; i++)
		close(c[i]);
	ck_ok(cms_control_destroy(ctl));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- issue 34: descriptors sent to servers, who loses at the connection limit ---- */

#define CONTROL_CONNS 8 /* CMS_IPC_CONTROL_CONNS (src/ipc/ipc.h) */

/* Sends bytes[0, n) on fd with nfds descriptors attached (copies of one /dev/null descriptor). */
static void send_with_fds(int fd, const void *bytes, size_t n, uint32_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * CMS_IPC_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)bytes, n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct cmsghdr *c;
	uint32_t i;

	ck_assert_int_ge(null, 0);
	ck_assert_uint_le(nfds, CMS_IPC_MAX_FDS);
	memset(&ctl, 0, sizeof(ctl));
	mh.msg_control = ctl.buf;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	for (i = 0; i < nfds; i++)
		memcpy(CMSG_DATA(c) + i * sizeof(int), &null, sizeof(int));
	ck_assert_int_eq(sendmsg(fd, &mh, MSG_NOSIGNAL), (ssize_t)n);
	close(null);
}

/* Waits until the peer has read everything sent on fd (SIOCOUTQ: nothing queued; 20 s at
 * most). */
static void wait_consumed(int fd)
{
	int queued = -1, k;

	for (k = 0; k < 2000; k++) {
		ck_assert_int_eq(ioctl(fd, SIOCOUTQ, &queued), 0);
		if (!queued)
			return;
		usleep(10000);
	}
	ck_abort_msg("the server did not read %d bytes", queued);
}

/*
 * Servers keep no descriptor a client sends (issue 34, 1): no message to a server carries
 * any. Connections that sent part of a message with 200 descriptors (on its first byte or
 * on a later one) and stalled made the exporter and the control socket hold every one of
 * them until the message's 5 s deadline (128 such connections: 19,990 descriptors); now
 * the server reads without a control buffer, the kernel discards them, and the connection
 * is refused at once with ERROR CMS_ERR_PROTOCOL.
 */
START_TEST(servers_hold_no_passed_descriptors)
{
	enum { K = 3, NFDS = 200 };
	static const uint8_t hdr[8] = { 'C', 'M', 'S', 'I', 1, 0, 8, 0 };
	uint8_t hello[16 + 64];
	struct cms_ipc_msg m;
	cms_control *ctl;
	struct fix f;
	char ep[108], cp[108], why[256];
	uint8_t *buf;
	size_t len;
	int c[2 * K], base, held, i;

	fix_start(&f, "pfd", 1, 64 * KiB, 3, 0, CMS_ACCESS_READWRITE);
	snprintf(ep, sizeof(ep), "%s", f.path);
	f.path = ep;
	ck_ok(cms_control_create(f.ctx, new_path("pfdctl"), NULL, &ctl));
	snprintf(cp, sizeof(cp), "%s", sock_path);
	base = t_open_fds();
	for (i = 0; i < 2 * K; i++) {
		c[i] = stalled_client(i < K ? ep : cp, 0);
		if (i % 2) { /* with a later byte of the message */
			ck_assert_int_eq(send(c[i], hdr, 4, MSG_NOSIGNAL), 4);
			send_with_fds(c[i], hdr + 4, 2, NFDS);
		} else {
			send_with_fds(c[i], hdr, 6, NFDS);
		}
		wait_consumed(c[i]);
	}
	/* Each server's thread has returned from the reads that took them once it answers a
	 * request sent after them. */
	status_request(cp);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_HELLO;
	strcpy(m.tag, "nope");
	m.device = -1;
	m.access = CMS_IPC_ACCESS_READ;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_OK);
	ck_assert_uint_le(len, sizeof(hello));
	memcpy(hello, buf, len);
	free(buf);
	ck_assert_int_eq(raw_exchange(ep, hello, len), CMS_ERR_NOT_FOUND);
	held = t_open_fds() - base - 2 * K; /* less the clients' own sockets */
	ck_assert_msg(held <= 2 * K, "the servers hold %d descriptors for %d connections", held,
		      2 * K);
	for (i = 0; i < 2 * K; i++) {
		ck_assert_msg(
			!cms_ipc_recv(c[i], &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			"connection %d: %s", i, why);
		ck_assert_msg(m.type == CMS_IPC_ERROR && m.status == CMS_ERR_PROTOCOL,
			      "connection %d: type %u status %s: %s", i, m.type,
			      cms_status_name(m.status), m.text);
		cms_ipc_msg_free(&m);
		close(c[i]);
	}
	ck_ok(cms_control_destroy(ctl));
	fix_end(&f);
}
END_TEST

static int hold_entered, hold_release;

/* A control callback that waits until the test releases it, then refuses. */
static cms_status hold_cb(void *user, const cms_control_request *req)
{
	(void)user;
	(void)req;
	__atomic_store_n(&hold_entered, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&hold_release, __ATOMIC_SEQ_CST))
		usleep(1000);
	return CMS_ERR_REFUSED;
}

/* Holds the thread of the control socket at path (callback hold_cb) in a pause request of a
 * connection of its own, returned: the connections made meanwhile arrive in one burst. */
static int hold_server(const char *path)
{
	struct cms_ipc_msg m;
	int fd, k;

	__atomic_store_n(&hold_entered, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&hold_release, 0, __ATOMIC_SEQ_CST);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_PAUSE;
	strcpy(m.tag, "held");
	fd = connect_send(path, &m);
	for (k = 0; k < 20000 && !__atomic_load_n(&hold_entered, __ATOMIC_SEQ_CST); k++)
		usleep(1000);
	ck_assert_msg(__atomic_load_n(&hold_entered, __ATOMIC_SEQ_CST),
		      "the control socket did not take the request");
	return fd;
}

/* Lets the request of hold_server go (refused) and reads its reply. */
static void release_server(int fd)
{
	struct cms_ipc_msg m;
	char why[256];

	__atomic_store_n(&hold_release, 1, __ATOMIC_SEQ_CST);
	do {
		ck_assert_msg(
			!cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)),
			"%s", why);
		cms_ipc_msg_free(&m);
	} while (m.type == CMS_IPC_CTL_PROGRESS);
	close(fd);
}

/* The text of the ERROR the server closed fd with (waited for, 20 s at most). */
static void closed_why(int fd, char *text, size_t len)
{
	struct cms_ipc_msg m;
	char why[256];

	ck_assert_msg(!cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)), "%s",
		      why);
	ck_assert_int_eq(m.type, CMS_IPC_ERROR);
	snprintf(text, len, "%s", m.text);
	cms_ipc_msg_free(&m);
}

/* Whether the server has closed fd to make room (what it sent so far, without waiting). */
static int evicted(int fd)
{
	char text[CMS_IPC_MAX_TEXT + 1];

	if (!server_closed(fd))
		return 0;
	closed_why(fd, text, sizeof(text));
	return strstr(text, "make room") != NULL;
}

/*
 * Sends the rest of a status request on fd, which sent its first n bytes before
 * (stalled_client), and checks the reply. On the oldest connection of a control socket this
 * is a barrier that opens no connection (one would make room at the limit): the server writes
 * and reads its connections newest first, so once fd is answered, what it queued for the
 * others before the request came is written.
 */
static void finish_status(int fd, size_t n)
{
	struct cms_ipc_msg m;
	char why[256];
	uint8_t *buf;
	size_t len;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_STATUS;
	ck_assert_int_eq(cms_ipc_encode(&m, &buf, &len, NULL, 0), CMS_OK);
	ck_assert_int_eq(send(fd, buf + n, len - n, MSG_NOSIGNAL), (ssize_t)(len - n));
	free(buf);
	ck_assert_msg(!cms_ipc_recv(fd, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)), "%s",
		      why);
	ck_assert_msg(m.type == CMS_IPC_CTL_REPLY && m.status == CMS_OK,
		      "the oldest connection got type %u status %s: %s", m.type,
		      cms_status_name(m.status), m.text);
	cms_ipc_msg_free(&m);
}

/*
 * A request that arrives at the connection limit in one burst with idle connections is
 * served, and nobody is closed for it (issue 34, 2): the server reads a connection before
 * judging it idle. Before, the 9th accept of the burst closed the "oldest idle" connection
 * by a millisecond clock, none of them read yet: the request itself (ties went to the newest)
 * or an idle one.
 */
START_TEST(burst_request_served_at_the_limit)
{
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	struct cms_ipc_msg m;
	cms_control *ctl;
	char path[108], why[256];
	int s[CONTROL_CONNS], h, r, i;

	snprintf(path, sizeof(path), "%s", new_path("burst"));
	co.fn = hold_cb;
	ck_ok(cms_control_create(ctx, path, &co, &ctl));
	h = hold_server(path);
	for (i = 0; i < CONTROL_CONNS; i++)
		s[i] = stalled_client(path, 0);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REQUEST;
	m.op = CMS_IPC_OP_STATUS;
	r = connect_send(path, &m);
	release_server(h);
	ck_assert_msg(!cms_ipc_recv(r, &m, NULL, cms_ipc_now_ms() + 20000, why, sizeof(why)), "%s",
		      why);
	ck_assert_msg(m.type == CMS_IPC_CTL_REPLY && m.status == CMS_OK,
		      "the request got type %u status %s: %s", m.type, cms_status_name(m.status),
		      m.text);
	cms_ipc_msg_free(&m);
	close(r);
	finish_status(s[0], 0); /* the oldest: what the server wrote before is readable now */
	for (i = 1; i < CONTROL_CONNS; i++)
		ck_assert_msg(!evicted(s[i]), "idle connection %d was closed to make room", i);
	for (i = 0; i < CONTROL_CONNS; i++)
		close(s[i]);
	ck_ok(cms_control_destroy(ctl));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * Who loses at the limit (issue 34, 2): connections that have sent nothing go first, oldest
 * first; then those with part of a request, least progress first; a connection is read
 * before it is judged. In one burst: P1 (1 byte of a header), S1 (silent), P2 (2 bytes), S2,
 * P3-P6 (3-6 bytes), then four newcomers with 7 bytes each: they close S1, S2, P1, P2 in
 * this order. Before, a partial request was never closed (the newcomers waited or closed
 * each other) and silence was judged before reading.
 */
START_TEST(eviction_order_at_the_limit)
{
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_control *ctl;
	char path[108], text[CMS_IPC_MAX_TEXT + 1];
	int p[6], s[2], x[4], h, i;

	snprintf(path, sizeof(path), "%s", new_path("order"));
	co.fn = hold_cb;
	ck_ok(cms_control_create(ctx, path, &co, &ctl));
	h = hold_server(path);
	p[0] = stalled_client(path, 1);
	s[0] = stalled_client(path, 0);
	p[1] = stalled_client(path, 2);
	s[1] = stalled_client(path, 0);
	for (i = 2; i < 6; i++)
		p[i] = stalled_client(path, (size_t)i + 1);
	for (i = 0; i < 4; i++)
		x[i] = stalled_client(path, 7);
	release_server(h);
	for (i = 0; i < 2; i++) {
		closed_why(s[i], text, sizeof(text));
		ck_assert_msg(strstr(text, "make room") && strstr(text, "no request yet"),
			      "silent connection %d: %s", i, text);
	}
	for (i = 0; i < 2; i++) {
		closed_why(p[i], text, sizeof(text));
		ck_assert_msg(strstr(text, "make room") && strstr(text, "not whole"),
			      "connection with %d bytes: %s", i + 1, text);
	}
	finish_status(p[2], 3); /* the oldest left: what the server wrote before is readable now */
	for (i = 3; i < 6; i++)
		ck_assert_msg(!evicted(p[i]), "the connection with %d bytes was closed", i + 1);
	for (i = 0; i < 4; i++)
		ck_assert_msg(!evicted(x[i]), "newcomer %d was closed", i);
	for (i = 0; i < 6; i++)
		close(p[i]);
	for (i = 0; i < 2; i++)
		close(s[i]);
	for (i = 0; i < 4; i++)
		close(x[i]);
	ck_ok(cms_control_destroy(ctl));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("ipc");
	TCase *t = tcase_create("ipc");

	tcase_set_timeout(t, 240);
	tcase_add_test(t, share_read_write);
	tcase_add_test(t, read_only);
	tcase_add_test(t, pause_revokes_resume_remaps);
	tcase_add_test(t, import_while_paused);
	tcase_add_test(t, importer_crash);
	tcase_add_test(t, exporter_crash_and_two_exporters);
	tcase_add_test(t, timeout_and_refusal_name_the_importer);
	tcase_add_test(t, wrong_uid_refused);
	tcase_add_test(t, malformed_messages_refused);
	tcase_add_test(t, received_descriptors_closed);
	tcase_add_test(t, bound_socket_not_replaced);
	tcase_add_test(t, relative_socket_paths_resolved_at_the_call);
	tcase_add_test(t, stalled_clients_delay_nobody);
	tcase_add_test(t, request_during_a_long_one_is_served);
	tcase_add_test(t, connection_limit_and_accept_backoff);
	tcase_add_test(t, stalled_grant_delays_nobody);
	tcase_add_test(t, pause_during_a_grant);
	tcase_add_test(t, partial_messages_hold_little_memory);
	tcase_add_test(t, idle_control_clients_deny_nobody);
	tcase_add_test(t, connect_flood_bounded);
	tcase_add_test(t, layout_change_detected);
	tcase_add_test(t, destroy_revokes);
	tcase_add_test(t, import_faults_roll_back);
	tcase_add_test(t, failed_free_keeps_imports);
	tcase_add_test(t, bad_arguments);
	tcase_add_test(t, struct_sizes_of_1_1);
#ifdef CMS_CMSCTL
	tcase_add_test(t, control_socket);
	tcase_add_test(t, control_socket_reports);
#endif
	suite_add_tcase(s, t);
	/* issue 34 (CK_RUN_CASE=limits runs these alone) */
	t = tcase_create("limits");
	tcase_set_timeout(t, 240);
	tcase_add_test(t, servers_hold_no_passed_descriptors);
	tcase_add_test(t, burst_request_served_at_the_limit);
	tcase_add_test(t, eviction_order_at_the_limit);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return t_main(make, T_NEEDS_SIM);
}
