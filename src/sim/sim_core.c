// SPDX-License-Identifier: MIT
/*
 * sim_core.c - global state, configuration, locking, object sets, call
 * counting, fault injection and the cmssim_* control API.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"

/* ThreadSanitizer: a write-locked read-write lock given up without an unlock (fork_child). */
#ifdef SIM_TSAN
#include <sanitizer/tsan_interface.h>
#define SIM_TSAN_WRITER_GONE(l) (__tsan_mutex_pre_unlock((l), 0), __tsan_mutex_post_unlock((l), 0))
#else
#define SIM_TSAN_WRITER_GONE(l) ((void)(l))
#endif

struct sim_state sim = {
	.lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP,
};

/* ---- configuration ---------------------------------------------------- */

#define SIM_DEFAULT_CAPACITY (8ULL << 30)
#define SIM_DEFAULT_GRAN (2ULL << 20)
#define SIM_FN_MAX 64

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int config_error; /* a CMS_SIM_* variable was malformed: cuInit fails */

struct sim_fault {
	int host;	     /* host allocation fault */
	int device;	     /* only calls with a context of this device current; -1: any */
	char fn[SIM_FN_MAX]; /* "" = any counted call */
	uint64_t left;	     /* matching calls until it fires */
	CUresult result;
};

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_fault faults[CMSSIM_MAX_FAULTS]; /* in arming order */
static int nfaults;				   /* atomic reads outside fault_lock */
static atomic_uint_fast64_t call_count;

uint64_t sim_parse_size(const char *s, int *ok)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	*ok = 0;
	if (!s || !*s || *s == '-')
		return 0;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (shift && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'B' || end[1] == 'b'))
		end += 2;
	else if (shift && (end[0] == 'B' || end[0] == 'b'))
		end++;
	if (*end)
		return 0;
	if (shift && v > (ULLONG_MAX >> shift))
		return 0;
	*ok = 1;
	return (uint64_t)v << shift;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int arm_fault(int host, int device, const char *fn, uint64_t nth, CUresult result)
{
	struct sim_fault *f;
	int rc = -1;

	if (!nth || (!host && result == CUDA_SUCCESS))
		return -1;
	if (!host && fn && strcmp(fn, "any") && !sim_known_function(fn))
		return -1;
	pthread_mutex_lock(&fault_lock);
	if (nfaults >= CMSSIM_MAX_FAULTS)
		goto out_unlock;
	f = &faults[nfaults];
	memset(f, 0, sizeof(*f));
	f->host = host;
	f->device = device;
	if (!host && fn && strcmp(fn, "any"))
		strcpy(f->fn, fn); /* length checked by sim_known_function */
	f->left = nth;
	f->result = result;
	__atomic_store_n(&nfaults, nfaults + 1, __ATOMIC_RELEASE);
	rc = 0;
out_unlock:
	pthread_mutex_unlock(&fault_lock);
	return rc;
}

/* "fn:nth:result" or "host:nth", comma separated. Returns -1 on a malformed entry. */
static int parse_faults(const char *spec)
{
	char *copy, *save = NULL, *tok;
	int rc = 0;

	copy = strdup(spec);
	if (!copy)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *nth_s, *res_s = NULL;
		long result = CUDA_ERROR_UNKNOWN;
		uint64_t nth;
		int ok, host;

		while (*tok == ' ')
			tok++;
		if (!*tok)
			continue;
		nth_s = strchr(tok, ':');
		if (!nth_s) {
			rc = -1;
			continue;
		}
		*nth_s++ = '\0';
		res_s = strchr(nth_s, ':');
		if (res_s)
			*res_s++ = '\0';
		host = !strcmp(tok, "host") || !strcmp(tok, "host_alloc");
		nth = sim_parse_size(nth_s, &ok);
		if (!ok || (!host && (!res_s || parse_int(res_s, 1, INT_MAX, &result)))) {
			rc = -1;
			continue;
		}
		if (arm_fault(host, -1, strcmp(tok, "any") ? tok : NULL, nth, (CUresult)result))
			rc = -1;
	}
	free(copy);
	return rc;
}

static int register_atfork(void);

static void setup_once_fn(void)
{
	const char *s;
	uint64_t cap = SIM_DEFAULT_CAPACITY;
	long v;
	int ok, i, j;

	sim.ndev = 1;
	sim.gran = SIM_DEFAULT_GRAN;
	sim.poison = CMSSIM_DEFAULT_POISON;
	sim.next_handle = 0x5100000000000001ULL; /* never 0, never a small integer */

	s = getenv("CMS_SIM_DEVICES");
	if (s && *s) {
		if (parse_int(s, 0, INT_MAX, &v))
			config_error = 1;
		else
			sim.ndev = v > CMSSIM_MAX_DEVICES ? CMSSIM_MAX_DEVICES : (int)v;
	}
	s = getenv("CMS_SIM_CAPACITY");
	if (s && *s) {
		cap = sim_parse_size(s, &ok);
		if (!ok) {
			config_error = 1;
			cap = SIM_DEFAULT_CAPACITY;
		}
	}
	s = getenv("CMS_SIM_GRANULARITY");
	if (s && *s) {
		uint64_t g = sim_parse_size(s, &ok);

		if (!ok || !g || (g & (g - 1)) || g < (uint64_t)sysconf(_SC_PAGESIZE))
			config_error = 1;
		else
			sim.gran = g;
	}
	sim.chunk_granules = 16;
	s = getenv("CMS_SIM_CHUNK_GRANULES");
	if (s && *s) {
		if (parse_int(s, 0, 1 << 20, &v))
			config_error = 1;
		else
			sim.chunk_granules = (int)v;
	}
	snprintf(sim.tunables, sizeof(sim.tunables),
		 "overlap_batch=g/8,host_group=16g,host_stage=256K,disk_stage=1M,run_chunk=%dg",
		 sim.chunk_granules);
	s = getenv("CMS_SIM_GDR");
	if (s && *s) {
		if (parse_int(s, 0, 1, &v))
			config_error = 1;
		else
			sim.gdr = (int)v;
	}
	s = getenv("CMS_SIM_POISON");
	if (s && *s) {
		if (parse_int(s, 0, 255, &v))
			config_error = 1;
		else
			sim.poison = v ? (int)v : -1;
	}
	s = getenv("CMS_SIM_PEER");
	v = 1;
	if (s && *s && parse_int(s, 0, 1, &v))
		config_error = 1;
	for (i = 0; i < CMSSIM_MAX_DEVICES; i++) {
		sim.capacity[i] = cap;
		sim.ctx[i].device = i;
		for (j = 0; j < CMSSIM_MAX_DEVICES; j++)
			sim.peer[i][j] = (unsigned char)(v && j != i);
	}
	s = getenv("CMS_SIM_FAIL");
	if (s && *s && parse_faults(s))
		config_error = 1;
	if (register_atfork())
		config_error = 1; /* a forked child could hang: cuInit fails instead */
}

void sim_setup(void)
{
	pthread_once(&setup_once, setup_once_fn);
}

__attribute__((constructor)) static void sim_constructor(void)
{
	sim_setup();
}

int sim_config_error(void)
{
	return config_error;
}

/* ---- locking ------------------------------------------------------------ */

void sim_rdlock(void)
{
	pthread_rwlock_rdlock(&sim.lock);
}

void sim_wrlock(void)
{
	pthread_rwlock_wrlock(&sim.lock);
}

void sim_unlock(void)
{
	pthread_rwlock_unlock(&sim.lock);
}

/* ---- entry: counting and faults ----------------------------------------- */

CUresult sim_enter(const char *fn, int need_init)
{
	CUresult rc = CUDA_SUCCESS;
	int i, fired = 0, dev;

	sim_setup();
	atomic_fetch_add(&call_count, 1);
	if (__atomic_load_n(&nfaults, __ATOMIC_ACQUIRE)) {
		dev = sim_thread_device();
		pthread_mutex_lock(&fault_lock);
		for (i = 0; i < nfaults;) {
			struct sim_fault *f = &faults[i];

			if (f->host || (f->device >= 0 && f->device != dev) ||
			    (f->fn[0] && strcmp(f->fn, fn)) || --f->left) {
				i++;
				continue;
			}
			if (!fired)
				rc = f->result;
			fired = 1;
			memmove(f, f + 1, (size_t)(nfaults - i - 1) * sizeof(*f));
			__atomic_store_n(&nfaults, nfaults - 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&fault_lock);
		if (fired)
			return rc;
	}
	if (need_init && !__atomic_load_n(&sim.initialized, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_NOT_INITIALIZED;
	return CUDA_SUCCESS;
}

/* ---- sorted range sets -------------------------------------------------- */

ssize_t sim_set_floor(const struct sim_set *s, uint64_t key)
{
	size_t lo = 0, hi = s->n;

	/* first index whose base > key, minus one */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid]->base <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ssize_t)lo - 1;
}

struct sim_range *sim_set_find(const struct sim_set *s, uint64_t key)
{
	ssize_t i = sim_set_floor(s, key);

	if (i < 0 || s->v[i]->base != key)
		return NULL;
	return s->v[i];
}

struct sim_range *sim_set_containing(const struct sim_set *s, uint64_t addr, ssize_t *idx)
{
	ssize_t i = sim_set_floor(s, addr);

	if (i < 0 || addr - s->v[i]->base >= s->v[i]->size)
		return NULL;
	if (idx)
		*idx = i;
	return s->v[i];
}

int sim_set_insert(struct sim_set *s, struct sim_range *r)
{
	size_t pos;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct sim_range **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	pos = (size_t)(sim_set_floor(s, r->base) + 1);
	memmove(&s->v[pos + 1], &s->v[pos], (s->n - pos) * sizeof(*s->v));
	s->v[pos] = r;
	s->n++;
	return 0;
}

void sim_set_remove_at(struct sim_set *s, size_t idx, size_t count)
{
	memmove(&s->v[idx], &s->v[idx + count], (s->n - idx - count) * sizeof(*s->v));
	s->n -= count;
	if (!s->n) {
		free(s->v);
		s->v = NULL;
		s->cap = 0;
	}
}

void sim_set_remove(struct sim_set *s, uint64_t key)
{
	ssize_t i = sim_set_floor(s, key);

	if (i >= 0 && s->v[i]->base == key)
		sim_set_remove_at(s, (size_t)i, 1);
}

/* ---- control API -------------------------------------------------------- */

SIM_EXPORT const char *cmssim_version(void)
{
	return CMSSIM_VERSION_STRING;
}

SIM_EXPORT int cmssim_device_count(void)
{
	sim_setup();
	return sim.ndev;
}

SIM_EXPORT int cmssim_set_capacity(int device, uint64_t bytes)
{
	sim_setup();
	if (device < 0 || device >= sim.ndev)
		return -1;
	sim_wrlock();
	sim.capacity[device] = bytes;
	sim_unlock();
	return 0;
}

SIM_EXPORT uint64_t cmssim_get_capacity(int device)
{
	uint64_t cap;

	sim_setup();
	if (device < 0 || device >= sim.ndev)
		return 0;
	sim_rdlock();
	cap = sim.capacity[device];
	sim_unlock();
	return cap;
}

SIM_EXPORT uint64_t cmssim_call_count(void)
{
	return atomic_load(&call_count);
}

SIM_EXPORT int cmssim_fail_call(const char *fn, uint64_t nth, int result)
{
	sim_setup();
	return arm_fault(0, -1, fn, nth, (CUresult)result);
}

SIM_EXPORT int cmssim_fail_call_device(const char *fn, int device, uint64_t nth, int result)
{
	sim_setup();
	if (device < 0 || device >= sim.ndev)
		return -1;
	return arm_fault(0, device, fn, nth, (CUresult)result);
}

SIM_EXPORT int cmssim_set_peer_access(int device, int peer, int can)
{
	sim_setup();
	if (device < 0 || device >= sim.ndev || peer < 0 || peer >= sim.ndev || device == peer)
		return -1;
	sim_wrlock();
	sim.peer[device][peer] = can != 0;
	sim_unlock();
	return 0;
}

/* ---- copy gate ---------------------------------------------------------------- */

#define SIM_GATE_MAX_THREADS 64

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond;
static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static int gate_armed; /* atomic reads outside gate_lock */
static int gate_want, gate_waiting, gate_result = -1;
static uint32_t gate_timeout_ms;

static void gate_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&gate_cond, &a);
	pthread_condattr_destroy(&a);
}

/* Opens the gate with this result (gate_lock held). */
static void gate_open(int result)
{
	gate_result = result;
	gate_want = 0;
	__atomic_store_n(&gate_armed, 0, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&gate_cond);
}

void sim_copy_gate_pass(void)
{
	struct timespec deadline;

	if (!__atomic_load_n(&gate_armed, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&gate_lock);
	if (!gate_want) {
		pthread_mutex_unlock(&gate_lock);
		return;
	}
	if (++gate_waiting >= gate_want) {
		gate_open(1);
		gate_waiting--;
		pthread_mutex_unlock(&gate_lock);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += gate_timeout_ms / 1000;
	deadline.tv_nsec += (long)(gate_timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	while (gate_want) {
		if (pthread_cond_timedwait(&gate_cond, &gate_lock, &deadline) == ETIMEDOUT) {
			if (gate_want)
				gate_open(0);
			break;
		}
	}
	gate_waiting--;
	pthread_mutex_unlock(&gate_lock);
}

SIM_EXPORT int cmssim_copy_gate(int threads, uint32_t timeout_ms)
{
	if (threads > SIM_GATE_MAX_THREADS)
		return -1;
	pthread_once(&gate_once, gate_init);
	pthread_mutex_lock(&gate_lock);
	gate_want = threads > 0 ? threads : 0;
	gate_timeout_ms = timeout_ms;
	gate_result = -1;
	__atomic_store_n(&gate_armed, gate_want > 0, __ATOMIC_RELEASE);
	if (!gate_want)
		pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	return 0;
}

SIM_EXPORT int cmssim_copy_gate_result(void)
{
	int r;

	pthread_mutex_lock(&gate_lock);
	r = gate_result;
	pthread_mutex_unlock(&gate_lock);
	return r;
}

SIM_EXPORT int cmssim_fail_host_alloc(uint64_t nth)
{
	sim_setup();
	return arm_fault(1, -1, NULL, nth, CUDA_ERROR_OUT_OF_MEMORY);
}

SIM_EXPORT void cmssim_clear_faults(void)
{
	sim_setup();
	pthread_mutex_lock(&fault_lock);
	__atomic_store_n(&nfaults, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fault_lock);
}

SIM_EXPORT int cmssim_armed_faults(void)
{
	sim_setup();
	return __atomic_load_n(&nfaults, __ATOMIC_ACQUIRE);
}

SIM_EXPORT int cmssim_host_alloc_hook(size_t bytes)
{
	int i, fired = 0;

	sim_setup();
	pthread_mutex_lock(&fault_lock);
	for (i = 0; i < nfaults;) {
		struct sim_fault *f = &faults[i];

		if (!f->host || --f->left) {
			i++;
			continue;
		}
		fired = 1;
		memmove(f, f + 1, (size_t)(nfaults - i - 1) * sizeof(*f));
		__atomic_store_n(&nfaults, nfaults - 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&fault_lock);
	if (fired)
		return -1;
	sim_wrlock();
	sim.host_buffers++;
	sim.host_bytes += bytes;
	sim_unlock();
	return 0;
}

SIM_EXPORT void cmssim_host_free_hook(size_t bytes)
{
	sim_setup();
	sim_wrlock();
	if (sim.host_buffers)
		sim.host_buffers--;
	sim.host_bytes = sim.host_bytes >= bytes ? sim.host_bytes - bytes : 0;
	sim_unlock();
}

/*
 * The library's tunables with the simulation (engine/tunables.c): sizes small enough, and
 * relative to the granularity, that small tests run every pipeline with several batches,
 * buffers and chunks. CMS_SIM_CHUNK_GRANULES sets run_chunk (0: no chunks).
 */
SIM_EXPORT int cmssim_chunk_granules(void)
{
	sim_setup();
	return sim.chunk_granules;
}

SIM_EXPORT const char *cmssim_tunables(void)
{
	sim_setup();
	return sim.tunables;
}

SIM_EXPORT int cmssim_get_counters(cmssim_counters *out)
{
	cmssim_counters c;
	uint64_t want;
	int i;

	if (!out || out->struct_size < sizeof(uint64_t))
		return -1;
	sim_setup();
	want = out->struct_size;
	memset(&c, 0, sizeof(c));
	sim_rdlock();
	c.reservations = sim.reservations.n;
	c.handles = sim.handles.n;
	c.physical_allocations = sim.nphys;
	c.mappings = sim.mappings.n;
	for (i = 0; i < CMSSIM_MAX_DEVICES; i++) {
		c.device_used_bytes[i] = sim.used[i];
		c.primary_ctx_refs += (uint64_t)sim.ctx_refs[i];
	}
	c.streams = sim.streams.n;
	c.events = sim.events.n;
	c.graphs = sim.graphs.n;
	c.graph_execs = sim.execs.n;
	c.host_buffers = sim.host_buffers;
	c.host_buffer_bytes = sim.host_bytes;
	c.host_registrations = sim.host_regs.n;
	c.host_registered_bytes = sim.host_reg_bytes;
	c.modules = sim.modules;
	sim_unlock();
	c.calls = atomic_load(&call_count);
	if (want > sizeof(c))
		want = sizeof(c);
	memcpy((char *)out + sizeof(uint64_t), (char *)&c + sizeof(uint64_t),
	       (size_t)want - sizeof(uint64_t));
	return 0;
}

/* ---- fork ------------------------------------------------------------------- */

/* Every lock of the simulation is taken around fork(), so a child never starts with one held
 * by a thread that does not exist there (a driver call in flight on another thread). None of
 * them nests in another: any order is deadlock-free. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&fault_lock);
	pthread_mutex_lock(&gate_lock);
	sim_io_fork_prepare();
	sim_wrlock();
}

static void fork_parent(void)
{
	sim_unlock();
	sim_io_fork_parent();
	pthread_mutex_unlock(&gate_lock);
	pthread_mutex_unlock(&fault_lock);
}

/* In the child the forking thread holds them all. The mutexes are unlocked; the read-write
 * lock is initialised again instead (glibc knows its writer by thread id, which the child's
 * thread does not share), and ThreadSanitizer, which does not see that as an unlock, is told.
 * The parent's host registrations are dropped: the child's memory is not page-locked. */
static void fork_child(void)
{
	pthread_rwlockattr_t a;

	sim_host_fork_child();

	SIM_TSAN_WRITER_GONE(&sim.lock);
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&sim.lock, &a);
	pthread_rwlockattr_destroy(&a);
	sim_io_fork_child();
	pthread_mutex_unlock(&gate_lock);
	pthread_mutex_unlock(&fault_lock);
}

static int register_atfork(void)
{
	return pthread_atfork(fork_prepare, fork_parent, fork_child);
}
