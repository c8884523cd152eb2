// SPDX-License-Identifier: MIT
/*
 * sim_copy.c - copies, memsets, streams, events, stream capture and graphs.
 *
 * Streams are synchronous: an operation runs when it is enqueued, unless its
 * stream is capturing, in which case it becomes a node of the graph being
 * captured. A graph launch validates every node, then runs them in order.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define SIM_KEY(p) ((uint64_t)(uintptr_t)(p))

/* ---- device transfers ---------------------------------------------------------- */

#ifdef SIM_TSAN
/* ThreadSanitizer's dynamic annotations (its runtime defines them): accesses between Begin and
 * End on this thread are not checked. */
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);

static void unchecked_begin(void)
{
	AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
	AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
}

static void unchecked_end(void)
{
	AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
	AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#else
static void unchecked_begin(void)
{
}

static void unchecked_end(void)
{
}
#endif

/* First SIM_TSAN_STRIDE-aligned address of p + SIM_TSAN_EDGE or above. */
static uintptr_t first_sample(const void *p)
{
	uintptr_t a = (uintptr_t)p + SIM_TSAN_EDGE;

	return (a + SIM_TSAN_STRIDE - 1) & ~(uintptr_t)(SIM_TSAN_STRIDE - 1);
}

/* Checked again after an unchecked move of n bytes: one byte at each SIM_TSAN_STRIDE-aligned
 * address of each side between the edges (the same value is written back), so that two
 * transfers over the same bytes on different threads meet at a sample. */
static void sample_move(char *d, const char *s, size_t n)
{
	uintptr_t a, end;

	end = (uintptr_t)d + n - SIM_TSAN_EDGE;
	for (a = first_sample(d); a < end; a += SIM_TSAN_STRIDE)
		d[a - (uintptr_t)d] = s[a - (uintptr_t)d];
	end = (uintptr_t)s + n - SIM_TSAN_EDGE;
	for (a = first_sample(s); a < end; a += SIM_TSAN_STRIDE)
		d[a - (uintptr_t)s] = s[a - (uintptr_t)s];
}

void sim_device_move(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;
	uintptr_t da = (uintptr_t)dst, sa = (uintptr_t)src;

	if (n <= 2 * SIM_TSAN_EDGE || (da < sa + n && sa < da + n)) {
		memmove(dst, src, n); /* small, or overlapping: all checked */
		return;
	}
	memcpy(d, s, SIM_TSAN_EDGE);
	unchecked_begin();
	memcpy(d + SIM_TSAN_EDGE, s + SIM_TSAN_EDGE, n - 2 * SIM_TSAN_EDGE);
	unchecked_end();
	memcpy(d + n - SIM_TSAN_EDGE, s + n - SIM_TSAN_EDGE, SIM_TSAN_EDGE);
	sample_move(d, s, n);
}

void sim_device_set(void *dst, int byte, size_t n)
{
	char *d = dst;
	uintptr_t a, end = (uintptr_t)dst + n - SIM_TSAN_EDGE;

	if (n <= 2 * SIM_TSAN_EDGE) {
		memset(dst, byte, n);
		return;
	}
	memset(d, byte, SIM_TSAN_EDGE);
	unchecked_begin();
	memset(d + SIM_TSAN_EDGE, byte, n - 2 * SIM_TSAN_EDGE);
	unchecked_end();
	memset(d + n - SIM_TSAN_EDGE, byte, SIM_TSAN_EDGE);
	for (a = first_sample(dst); a < end; a += SIM_TSAN_STRIDE)
		d[a - (uintptr_t)dst] = (char)byte;
}

/* @count 32-bit words of @value from @dst (4-byte aligned), checked as sim_device_set. */
static void device_set32(uint32_t *dst, uint32_t value, uint64_t count)
{
	const uint64_t edge = SIM_TSAN_EDGE / 4;
	uint64_t k = 0, mid = count > 2 * edge ? count - edge : 0;
	uintptr_t a;

	for (; k < edge && k < count; k++)
		dst[k] = value;
	unchecked_begin();
	for (; k < mid; k++)
		dst[k] = value;
	unchecked_end();
	for (; k < count; k++)
		dst[k] = value;
	for (a = first_sample(dst); mid && a < (uintptr_t)(dst + mid); a += SIM_TSAN_STRIDE)
		dst[(a - (uintptr_t)dst) / 4] = value;
}

/* ---- operations ------------------------------------------------------------ */

static int ops_append(struct sim_ops *ops, const struct sim_op *op, size_t count)
{
	if (!count)
		return 0;
	if (ops->n + count > ops->cap) {
		size_t cap = ops->cap ? ops->cap : 8;
		struct sim_op *v;

		while (cap < ops->n + count)
			cap *= 2;
		v = realloc(ops->v, cap * sizeof(*v));
		if (!v)
			return -1;
		ops->v = v;
		ops->cap = cap;
	}
	memcpy(&ops->v[ops->n], op, count * sizeof(*op));
	ops->n += count;
	return 0;
}

/* A host pointer must be non-NULL and not point into simulated device memory. */
static CUresult check_host(uint64_t host, uint64_t bytes)
{
	if (!host || host + bytes < host || sim_in_reservation(host, bytes))
		return CUDA_ERROR_INVALID_VALUE;
	return sim_check_host_registration(host, bytes);
}

/* Read lock. The device bytes must be accessible to device dev (the current context's). */
static CUresult op_validate(const struct sim_op *op, int dev)
{
	CUresult rc;

	if (!op->bytes)
		return CUDA_SUCCESS;
	switch (op->kind) {
	case SIM_OP_DTOH:
		rc = check_host(op->dst, op->bytes);
		if (rc == CUDA_SUCCESS)
			rc = sim_check_access(op->src, op->bytes, 0, dev);
		return rc;
	case SIM_OP_HTOD:
		rc = check_host(op->src, op->bytes);
		if (rc == CUDA_SUCCESS)
			rc = sim_check_access(op->dst, op->bytes, 1, dev);
		return rc;
	case SIM_OP_DTOD:
		rc = sim_check_access(op->src, op->bytes, 0, dev);
		if (rc == CUDA_SUCCESS)
			rc = sim_check_access(op->dst, op->bytes, 1, dev);
		return rc;
	default:
		return sim_check_access(op->dst, op->bytes, 1, dev);
	}
}

/* Read lock; op validated. */
static void op_run(const struct sim_op *op)
{
	void *dst = (void *)(uintptr_t)op->dst;
	const void *src = (const void *)(uintptr_t)op->src;

	if (!op->bytes)
		return;
	switch (op->kind) {
	case SIM_OP_MEMSET8:
		sim_device_set(dst, (int)(op->value & 0xff), op->bytes);
		break;
	case SIM_OP_MEMSET32:
		device_set32(dst, op->value, op->bytes / 4);
		break;
	default: /* HtoD, DtoH, DtoD */
		sim_device_move(dst, src, op->bytes);
		break;
	}
}

static CUresult find_stream(CUstream stream, struct CUstream_st **out)
{
	*out = NULL;
	if (!stream)
		return CUDA_SUCCESS;
	*out = (struct CUstream_st *)sim_set_find(&sim.streams, SIM_KEY(stream));
	return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/*
 * Runs @count operations on @stream now, or appends them to the graph the
 * stream is capturing. All are validated before any runs.
 */
static CUresult submit(const struct sim_op *ops, size_t count, CUstream stream)
{
	struct CUstream_st *st;
	CUresult rc;
	size_t k;
	int dev;

	rc = sim_current_device(&dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	sim_copy_gate_pass(); /* a test's rendezvous of copying threads (cmssim_copy_gate) */
	sim_rdlock();
	rc = find_stream(stream, &st);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	if (st && st->capture) {
		/* recording changes the graph: take the lock for writing */
		sim_unlock();
		sim_wrlock();
		rc = find_stream(stream, &st);
		if (rc != CUDA_SUCCESS)
			goto out_unlock;
	}
	if (st && st->capture) {
		rc = ops_append(&st->capture->ops, ops, count) ? CUDA_ERROR_OUT_OF_MEMORY :
								 CUDA_SUCCESS;
		goto out_unlock;
	}
	for (k = 0; k < count && rc == CUDA_SUCCESS; k++)
		rc = op_validate(&ops[k], dev);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	for (k = 0; k < count; k++)
		op_run(&ops[k]);
out_unlock:
	sim_unlock();
	return rc;
}

static CUresult copy(int kind, uint64_t dst, uint64_t src, size_t bytes, CUstream stream)
{
	struct sim_op op = { .kind = kind, .dst = dst, .src = src, .bytes = bytes };

	return submit(&op, 1, stream);
}

SIM_EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes)
{
	SIM_ENTER("cuMemcpyDtoH");
	return copy(SIM_OP_DTOH, SIM_KEY(dst), src, bytes, NULL);
}

SIM_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes)
{
	SIM_ENTER("cuMemcpyHtoD");
	return copy(SIM_OP_HTOD, dst, SIM_KEY(src), bytes, NULL);
}

SIM_EXPORT CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
	SIM_ENTER("cuMemcpyDtoHAsync");
	return copy(SIM_OP_DTOH, SIM_KEY(dst), src, bytes, stream);
}

SIM_EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes,
				      CUstream stream)
{
	SIM_ENTER("cuMemcpyHtoDAsync");
	return copy(SIM_OP_HTOD, dst, SIM_KEY(src), bytes, stream);
}

SIM_EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
				      CUstream stream)
{
	SIM_ENTER("cuMemcpyDtoDAsync");
	return copy(SIM_OP_DTOD, dst, src, bytes, stream);
}

SIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count,
				    CUstream stream)
{
	struct sim_op op = { .kind = SIM_OP_MEMSET8, .dst = dst, .bytes = count, .value = value };

	SIM_ENTER("cuMemsetD8Async");
	return submit(&op, 1, stream);
}

SIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
				     CUstream stream)
{
	struct sim_op op = { .kind = SIM_OP_MEMSET32, .dst = dst, .value = value };

	SIM_ENTER("cuMemsetD32Async");
	if ((dst & 3) || count > UINT64_MAX / 4)
		return CUDA_ERROR_INVALID_VALUE;
	op.bytes = (uint64_t)count * 4;
	return submit(&op, 1, stream);
}

/* ---- streams and events ------------------------------------------------------ */

/* Common prologue of the object functions: a current context is needed. */
#define NEED_CONTEXT()                                                      \
	do {                                                                \
		int need_ctx_dev_;                                          \
		CUresult need_ctx_rc_ = sim_current_device(&need_ctx_dev_); \
		if (need_ctx_rc_ != CUDA_SUCCESS)                           \
			return need_ctx_rc_;                                \
	} while (0)

SIM_EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	struct CUstream_st *st;
	int dev;
	CUresult rc;

	SIM_ENTER("cuStreamCreate");
	rc = sim_current_device(&dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!stream || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	st = calloc(1, sizeof(*st));
	if (!st)
		return CUDA_ERROR_OUT_OF_MEMORY;
	st->r.base = SIM_KEY(st);
	st->r.size = 1;
	st->flags = flags;
	st->device = dev;
	sim_wrlock();
	if (sim_set_insert(&sim.streams, &st->r)) {
		sim_unlock();
		free(st);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	sim_unlock();
	*stream = st;
	return CUDA_SUCCESS;
}

static void graph_free(struct CUgraph_st *g)
{
	if (!g)
		return;
	free(g->ops.v);
	free(g);
}

SIM_EXPORT CUresult cuStreamDestroy(CUstream stream)
{
	struct CUstream_st *st;

	SIM_ENTER("cuStreamDestroy");
	NEED_CONTEXT();
	if (!stream)
		return CUDA_ERROR_INVALID_HANDLE;
	sim_wrlock();
	st = (struct CUstream_st *)sim_set_find(&sim.streams, SIM_KEY(stream));
	if (!st) {
		sim_unlock();
		return CUDA_ERROR_INVALID_HANDLE;
	}
	sim_set_remove(&sim.streams, SIM_KEY(stream));
	sim_unlock();
	graph_free(st->capture); /* an unfinished capture dies with its stream */
	free(st);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamSynchronize(CUstream stream)
{
	struct CUstream_st *st;
	CUresult rc;

	SIM_ENTER("cuStreamSynchronize");
	NEED_CONTEXT();
	sim_rdlock();
	rc = find_stream(stream, &st);
	if (rc == CUDA_SUCCESS && st && st->capture)
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* as the driver does */
	sim_unlock();
	return rc;
}

SIM_EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
	struct CUstream_st *st;
	CUresult rc;

	SIM_ENTER("cuStreamWaitEvent");
	NEED_CONTEXT();
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	sim_rdlock();
	rc = find_stream(stream, &st);
	if (rc == CUDA_SUCCESS && !sim_set_find(&sim.events, SIM_KEY(event)))
		rc = CUDA_ERROR_INVALID_HANDLE;
	sim_unlock();
	return rc;
}

SIM_EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
	struct CUevent_st *ev;

	SIM_ENTER("cuEventCreate");
	NEED_CONTEXT();
	/* BLOCKING_SYNC 0x1, DISABLE_TIMING 0x2, INTERPROCESS 0x4 */
	if (!event || (flags & ~0x7u))
		return CUDA_ERROR_INVALID_VALUE;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ev->r.base = SIM_KEY(ev);
	ev->r.size = 1;
	ev->flags = flags;
	sim_wrlock();
	if (sim_set_insert(&sim.events, &ev->r)) {
		sim_unlock();
		free(ev);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	sim_unlock();
	*event = ev;
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream)
{
	struct CUstream_st *st;
	struct CUevent_st *ev;
	CUresult rc;

	SIM_ENTER("cuEventRecord");
	NEED_CONTEXT();
	sim_wrlock();
	rc = find_stream(stream, &st);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	ev = (struct CUevent_st *)sim_set_find(&sim.events, SIM_KEY(event));
	if (!ev) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out_unlock;
	}
	ev->recorded = 1; /* work is already done (or captured: ordering is kept anyway) */
out_unlock:
	sim_unlock();
	return rc;
}

/* Streams are synchronous: recorded work is always complete, so waiting and querying agree. */
static CUresult event_done(CUevent event)
{
	CUresult rc = CUDA_SUCCESS;

	sim_rdlock();
	if (!sim_set_find(&sim.events, SIM_KEY(event)))
		rc = CUDA_ERROR_INVALID_HANDLE;
	sim_unlock();
	return rc;
}

SIM_EXPORT CUresult cuEventSynchronize(CUevent event)
{
	SIM_ENTER("cuEventSynchronize");
	NEED_CONTEXT();
	return event_done(event);
}

SIM_EXPORT CUresult cuEventQuery(CUevent event)
{
	SIM_ENTER("cuEventQuery");
	NEED_CONTEXT();
	return event_done(event);
}

SIM_EXPORT CUresult cuEventDestroy(CUevent event)
{
	struct CUevent_st *ev;

	SIM_ENTER("cuEventDestroy");
	NEED_CONTEXT();
	sim_wrlock();
	ev = (struct CUevent_st *)sim_set_find(&sim.events, SIM_KEY(event));
	if (ev)
		sim_set_remove(&sim.events, SIM_KEY(event));
	sim_unlock();
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	free(ev);
	return CUDA_SUCCESS;
}

/* ---- capture and graphs ------------------------------------------------------ */

SIM_EXPORT CUresult cuStreamBeginCapture(CUstream stream, int mode)
{
	struct CUgraph_st *g;
	struct CUstream_st *st;
	CUresult rc;

	SIM_ENTER("cuStreamBeginCapture");
	NEED_CONTEXT();
	if (!stream)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
	if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->r.base = SIM_KEY(g);
	g->r.size = 1;
	sim_wrlock();
	rc = find_stream(stream, &st);
	if (rc != CUDA_SUCCESS)
		goto err_unlock;
	if (st->capture) {
		rc = SIM_ERROR_ILLEGAL_STATE;
		goto err_unlock;
	}
	st->capture = g;
	sim_unlock();
	return CUDA_SUCCESS;

err_unlock:
	sim_unlock();
	free(g);
	return rc;
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
	struct CUstream_st *st;
	CUresult rc;

	SIM_ENTER("cuStreamEndCapture");
	NEED_CONTEXT();
	if (!graph)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stream)
		return SIM_ERROR_ILLEGAL_STATE;
	sim_wrlock();
	rc = find_stream(stream, &st);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	if (!st->capture) {
		rc = SIM_ERROR_ILLEGAL_STATE;
		goto out_unlock;
	}
	if (sim_set_insert(&sim.graphs, &st->capture->r)) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_unlock;
	}
	*graph = st->capture;
	st->capture = NULL;
out_unlock:
	sim_unlock();
	return rc;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
						unsigned long long flags)
{
	struct CUgraphExec_st *ex;
	struct CUgraph_st *g;
	CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;

	SIM_ENTER("cuGraphInstantiateWithFlags");
	NEED_CONTEXT();
	/* AUTO_FREE_ON_LAUNCH 1, UPLOAD 2, DEVICE_LAUNCH 4, USE_NODE_PRIORITY 8 */
	if (!exec || (flags & ~0xfULL))
		return CUDA_ERROR_INVALID_VALUE;
	ex = calloc(1, sizeof(*ex));
	if (!ex)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ex->r.base = SIM_KEY(ex);
	ex->r.size = 1;
	sim_wrlock();
	g = (struct CUgraph_st *)sim_set_find(&sim.graphs, SIM_KEY(graph));
	if (!g) {
		rc = graph ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
		goto err_unlock;
	}
	if (g->ops.n && ops_append(&ex->ops, g->ops.v, g->ops.n))
		goto err_unlock;
	if (sim_set_insert(&sim.execs, &ex->r))
		goto err_unlock;
	sim_unlock();
	*exec = ex;
	return CUDA_SUCCESS;

err_unlock:
	sim_unlock();
	free(ex->ops.v);
	free(ex);
	return rc;
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
	struct CUgraphExec_st *ex;
	struct sim_op *ops = NULL;
	size_t n;
	CUresult rc;

	SIM_ENTER("cuGraphLaunch");
	NEED_CONTEXT();
	/* copy the nodes so that submit() can take the lock its own way */
	sim_rdlock();
	ex = (struct CUgraphExec_st *)sim_set_find(&sim.execs, SIM_KEY(exec));
	if (!ex) {
		sim_unlock();
		return exec ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
	}
	n = ex->ops.n;
	if (n) {
		ops = malloc(n * sizeof(*ops));
		if (ops)
			memcpy(ops, ex->ops.v, n * sizeof(*ops));
	}
	sim_unlock();
	if (n && !ops)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = submit(ops, n, stream);
	free(ops);
	return rc;
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
	struct CUgraphExec_st *ex;

	SIM_ENTER("cuGraphExecDestroy");
	NEED_CONTEXT();
	sim_wrlock();
	ex = (struct CUgraphExec_st *)sim_set_find(&sim.execs, SIM_KEY(exec));
	if (ex)
		sim_set_remove(&sim.execs, SIM_KEY(exec));
	sim_unlock();
	if (!ex)
		return exec ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
	free(ex->ops.v);
	free(ex);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
	struct CUgraph_st *g;

	SIM_ENTER("cuGraphDestroy");
	NEED_CONTEXT();
	sim_wrlock();
	g = (struct CUgraph_st *)sim_set_find(&sim.graphs, SIM_KEY(graph));
	if (g)
		sim_set_remove(&sim.graphs, SIM_KEY(graph));
	sim_unlock();
	if (!g)
		return graph ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
	graph_free(g);
	return CUDA_SUCCESS;
}
