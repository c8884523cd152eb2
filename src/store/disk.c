/* SPDX-License-Identifier: MIT */
/*
 * disk.c - the DISK restore policy: a region's content is written to a file
 * in a directory the application chose (cms_region_disk_dir_set) on pause
 * and read back on resume.
 *
 * One file per region, created with O_CREAT | O_EXCL, mode 0600, in that
 * directory and unlinked at once: it lives only as the region's open file
 * descriptor, so nothing is left behind whatever happens to the process, and
 * closing it (region or context destroyed, directory changed) gives the
 * space back. The directory is opened once, when it is chosen (O_PATH, not
 * following a symbolic link put at its resolved name since): each file is
 * created and unlinked relative to that descriptor (openat, unlinkat), so
 * both happen in the same directory whatever is renamed or replaced by a
 * link on the way to it meanwhile, and the region's later files go there
 * too. Each allocation has a slot in the file (offset rounded to
 * CMS_DISK_ALIGN, assigned at its first pause, consecutive allocations in
 * consecutive slots); a freed allocation's slot is punched out. The file keeps
 * its blocks from one cycle to the next (the next pause overwrites them), and
 * a resume empties it only for a region with CMS_REGION_RELEASE_HOST, or once
 * freed slots would make up more than half of it (disk_region_resumed).
 *
 * Emptying a large file is slow where the filesystem discards freed blocks
 * (mounted with -o discard, common on cloud images: about 0.13 s per GiB
 * measured on a virtio disk, and it grows with the disk's own speed). So a
 * resume that empties the file swaps in a new empty unlinked
 * file under the same descriptor number (dup3) and a helper thread, the
 * region's reaper, closes the old one, freeing its blocks off the resume's
 * path. The reaper is joined before the next swap and when the file closes
 * (region or context destroyed, directory changed); where anything of the
 * swap fails the file is truncated in place as before. Failed pauses
 * truncate in place.
 *
 * The file is opened with O_DIRECT where the filesystem accepts it (buffers,
 * offsets and lengths are all CMS_DISK_ALIGN-aligned), else buffered. Copies
 * go through a staging pool of two page-locked buffers of the tunable disk_stage
 * (64 MiB) per device and call (made for the call, freed after it): on pause
 * the device-to-host copy of batch i + 1 runs while batch i is written; on
 * resume batch i + 1 is read while batch i is copied to the device. A batch
 * is a run of consecutive slots of one region of at most one buffer's bytes
 * (several small allocations, or a piece of a large one), written or read as
 * up to disk_threads transfers at once (io_full: a disk goes faster with more
 * than one transfer in flight). A pause ends with
 * fdatasync of each file it wrote (disk_sync): its errors fail the pause,
 * which then rolls back with the content still on the device.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_internal.h"

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

struct cms_disk {
	int fd;
	int dirfd;	      /* the directory (O_PATH): files are made and unlinked in it */
	bool direct;	      /* opened with O_DIRECT */
	bool reaping;	      /* reaper started, not joined yet */
	unsigned reaper_fork; /* cms_fork_generation when it started */
	pthread_t reaper;     /* closes a swapped-out file (disk_swap) */
	uint64_t end;	      /* next free slot offset */
	char dir[];	      /* absolute: a later chdir() of the process does not move it */
};

static uint64_t align_up(uint64_t n)
{
	return (n + CMS_DISK_ALIGN - 1) & ~(uint64_t)(CMS_DISK_ALIGN - 1);
}

/* Maps an errno of a file operation to a status (a full disk: CMS_ERR_IO). */
static cms_status io_status(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
		return CMS_ERR_NOT_FOUND;
	case EACCES:
	case EPERM:
	case EROFS:
		return CMS_ERR_PERMISSION;
	case ENOMEM:
		return CMS_ERR_OUT_OF_HOST_MEMORY;
	case ENAMETOOLONG: /* a path the caller chose */
		return CMS_ERR_INVALID_ARGUMENT;
	default:
		return CMS_ERR_IO;
	}
}

/* Full pwrite/pread of fd with EINTR and short transfers handled; *direct false once the
 * filesystem refused an O_DIRECT transfer (the file then goes buffered: F_SETFL is the file's,
 * so pieces running at once may each do it). 0, or -1 with errno set. */
static int io_loop(int fd, bool *direct, bool write, char *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = write ? pwrite(fd, buf + done, len - done, (off_t)(off + done)) :
				    pread(fd, buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EINVAL && *direct) {
			/* The filesystem refuses these O_DIRECT transfers: go buffered. */
			int fl = fcntl(fd, F_GETFL);

			if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_DIRECT) < 0)
				return -1;
			*direct = false;
			continue;
		}
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = write ? ENOSPC : ENODATA; /* no progress: full, or file too short */
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

/* One piece of a transfer, on a thread of its own (io_full). */
struct io_piece {
	int fd;
	bool direct, write, started;
	char *buf;
	size_t len;
	uint64_t off;
	int err; /* its errno, 0 when done */
	pthread_t thread;
};

static void *io_piece_main(void *arg)
{
	struct io_piece *p = arg;

	p->err = io_loop(p->fd, &p->direct, p->write, p->buf, p->len, p->off) ? errno : 0;
	return NULL;
}

/*
 * A whole transfer of len bytes at off, the simulation's fault first. The disk is kept busy
 * with up to disk_threads transfers at once (the store's tunable; no more pieces than
 * CMS_DISK_PIECE_MIN bytes fit in len, each whole CMS_DISK_ALIGN blocks, the last what is
 * left): one on the calling thread, the
 * others each on a thread of its own for this transfer (one that cannot start runs on the
 * calling thread after it). 0, or -1 with errno set (the first failed piece's).
 */
static int io_full(cms_context *ctx, struct cms_disk *d, bool write, void *buf, size_t len,
		   uint64_t off)
{
	struct io_piece p[CMS_DISK_THREADS_MAX];
	size_t n = cms_ctx_store(ctx)->tune.disk_threads, each, i;
	int err = 0;

	if (ctx->drv.io_hook) {
		err = ctx->drv.io_hook(write ? 1 : 2); /* CMSSIM_IO_WRITE / _READ */
		if (err) {
			errno = err;
			return -1;
		}
	}
	if (n > CMS_DISK_THREADS_MAX)
		n = CMS_DISK_THREADS_MAX;
	if (n > len / CMS_DISK_PIECE_MIN)
		n = len / CMS_DISK_PIECE_MIN;
	if (n <= 1)
		return io_loop(d->fd, &d->direct, write, buf, len, off);
	each = (len / n + CMS_DISK_ALIGN - 1) / CMS_DISK_ALIGN * CMS_DISK_ALIGN;
	for (i = 0; i < n; i++) {
		size_t at = i * each < len ? i * each : len;

		p[i] = (struct io_piece){ .fd = d->fd,
					  .direct = d->direct,
					  .write = write,
					  .buf = (char *)buf + at,
					  .off = off + at,
					  .len = len - at < each ? len - at : each };
		if (i && p[i].len)
			p[i].started = !cms_thread_start(&p[i].thread, io_piece_main, &p[i]);
	}
	for (i = 0; i < n; i++)
		if (!p[i].started && p[i].len)
			io_piece_main(&p[i]);
	for (i = 0; i < n; i++) {
		if (p[i].started)
			pthread_join(p[i].thread, NULL);
		if (!p[i].direct)
			d->direct = false;
		if (!err)
			err = p[i].err;
	}
	if (err)
		errno = err;
	return err ? -1 : 0;
}

/*
 * Creates and unlinks a new file in directory dirfd (O_CREAT | O_EXCL, 0600, O_DIRECT where
 * accepted). Returns its descriptor, or -1 with errno set and *unlinking telling which step
 * failed.
 */
static int file_create(int dirfd, uint64_t id, bool *direct, bool *unlinking)
{
	char name[96];
	unsigned k;
	int fd = -1, err;

	*unlinking = false;
	for (k = 0; k < 1000 && fd < 0; k++) {
		snprintf(name, sizeof(name), "cumemsaver-%ld-%llu-%u.swp", (long)getpid(),
			 (unsigned long long)id, k);
		*direct = true;
		fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_DIRECT, 0600);
		if (fd < 0 && errno == EINVAL) { /* no O_DIRECT on this filesystem */
			*direct = false;
			fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		}
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd >= 0 && unlinkat(dirfd, name, 0)) {
		err = errno;
		*unlinking = true;
		close(fd);
		unlinkat(dirfd, name, 0);
		fd = -1;
		errno = err;
	}
	return fd;
}

cms_status cms_store_dir_resolve(const char *dir, char **abs)
{
	struct stat sb;
	size_t len;

	*abs = NULL;
	if (!*dir || strlen(dir) > CMS_DISK_DIR_MAX)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "disk directory name is %s",
				     *dir ? "too long" : "empty");
	if (stat(dir, &sb))
		return cms_set_error(io_status(errno), "disk directory %s: %s", dir,
				     strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "disk directory %s: not a directory",
				     dir);
	*abs = realpath(dir, NULL);
	if (!*abs)
		return cms_set_error(io_status(errno), "disk directory %s: %s", dir,
				     strerror(errno));
	/* the limit is also the absolute path's: what is kept, and what file names extend */
	len = strlen(*abs);
	if (len > CMS_DISK_DIR_MAX) {
		free(*abs);
		*abs = NULL;
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "disk directory %s: its absolute path is too long (%zu bytes, "
				     "at most %u)",
				     dir, len, CMS_DISK_DIR_MAX);
	}
	return CMS_OK;
}

/* Opens directory abs (resolved: not through a symbolic link put at its name since). */
static int dir_open(const char *abs)
{
	return open(abs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Opens a new unlinked file in dir (O_CREAT | O_EXCL, 0600). */
static cms_status disk_open(struct cms_region *r, const char *dir, struct cms_disk **out)
{
	struct cms_disk *d;
	bool unlinking;
	char *abs;
	size_t dl;
	int err;
	cms_status st;

	/* resolved now: the region's later files go to this directory whatever the cwd */
	st = cms_store_dir_resolve(dir, &abs);
	if (st)
		return st;
	dl = strlen(abs);
	d = calloc(1, sizeof(*d) + dl + 1);
	if (!d) {
		free(abs);
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate a disk file name");
	}
	memcpy(d->dir, abs, dl + 1);
	free(abs);
	d->dirfd = dir_open(d->dir);
	if (d->dirfd < 0) {
		err = errno;
		st = cms_set_error(io_status(err), "disk directory %s: %s", dir, strerror(err));
		goto out_free;
	}
	d->fd = file_create(d->dirfd, r->id, &d->direct, &unlinking);
	if (d->fd < 0) {
		err = errno;
		if (unlinking)
			st = cms_set_error(io_status(err), "cannot unlink disk file in %s: %s", dir,
					   strerror(err));
		else
			st = cms_set_error(
				io_status(err), "cannot create a file in disk directory %s: %s%s",
				dir, strerror(err),
				io_status(err) == CMS_ERR_PERMISSION ? " (not writable)" : "");
		goto out_dir;
	}
	*out = d;
	return CMS_OK;
out_dir:
	close(d->dirfd);
out_free:
	free(d);
	return st;
}

static void *reaper_main(void *arg)
{
	close((int)(intptr_t)arg); /* the last reference: the file's blocks are freed here */
	return NULL;
}

/* Waits for the region's reaper, if one runs (never in a forked child: it has no threads). */
static void reaper_join(struct cms_disk *d)
{
	if (!d->reaping)
		return;
	if (d->reaper_fork == cms_fork_generation)
		pthread_join(d->reaper, NULL);
	d->reaping = false;
}

/*
 * Replaces the region's file by a new empty one under the same descriptor number and
 * closes the old one on the reaper thread. Returns 0, or -1 with the old file still in
 * place (nothing changed).
 */
static int disk_swap(struct cms_region *r)
{
	struct cms_disk *d = cms_region_store(r)->disk;
	bool direct, unlinking;
	int nfd, old;

	reaper_join(d);
	nfd = file_create(d->dirfd, r->id, &direct, &unlinking);
	if (nfd < 0)
		return -1;
	old = fcntl(d->fd, F_DUPFD_CLOEXEC, 0); /* keeps the old file open past the dup3 */
	if (old < 0)
		goto out_nfd;
	if (dup3(nfd, d->fd, O_CLOEXEC) < 0)
		goto out_old;
	close(nfd);
	d->direct = direct;
	if (cms_thread_start(&d->reaper, reaper_main, (void *)(intptr_t)old)) {
		close(old); /* no thread: give the blocks back here */
		return 0;
	}
	d->reaping = true;
	d->reaper_fork = cms_fork_generation;
	return 0;
out_old:
	close(old);
out_nfd:
	close(nfd);
	return -1;
}

static void disk_region_close(struct cms_region *r)
{
	struct cms_alloc *a;

	if (!cms_region_store(r)->disk)
		return;
	close(cms_region_store(r)->disk->fd);
	close(cms_region_store(r)->disk->dirfd);
	reaper_join(cms_region_store(r)->disk);
	free(cms_region_store(r)->disk);
	cms_region_store(r)->disk = NULL;
	for (a = r->allocs; a; a = a->next)
		cms_alloc_store(a)->disk_slot = false;
}

static cms_status disk_dir_set(struct cms_region *r, const char *dir)
{
	struct cms_disk *d = NULL;
	struct cms_alloc *a;
	cms_status st = CMS_OK;

	for (a = r->allocs; a; a = a->next)
		if (a->saved) {
			st = cms_set_error(CMS_ERR_PAUSED,
					   "region \"%s\" holds content in its disk file", r->tag);
			goto out;
		}
	if (dir) {
		st = disk_open(r, dir, &d);
		if (st)
			goto out;
	}
	disk_region_close(r);
	cms_region_store(r)->disk = d;
	cms_log(r->ctx, CMS_LOG_DEBUG, "region \"%s\": disk directory %s (%s I/O)", r->tag,
		dir ? dir : "(none)", d && d->direct ? "direct" : "buffered");
out:
	return st;
}

static cms_status disk_check(const struct cms_region *r)
{
	if (!cms_region_store(r)->disk)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "DISK region \"%s\" has no directory: call "
				     "cms_region_disk_dir_set first",
				     r->tag);
	return CMS_OK;
}

static void disk_forget(cms_context *ctx, struct cms_alloc *a)
{
	struct cms_disk *d = cms_region_store(a->region)->disk;

	(void)ctx;
	if (!cms_alloc_store(a)->disk_slot)
		return;
	cms_alloc_store(a)->disk_slot = false;
	if (d) /* best effort: give the slot's blocks back */
		(void)fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)cms_alloc_store(a)->disk_off, (off_t)align_up(a->size));
}

/* Empties the region's file when no allocation's content is kept there; async: disk_swap. */
static void disk_trim(struct cms_region *r, bool async)
{
	struct cms_alloc *a;
	bool written;

	if (!cms_region_store(r)->disk)
		return;
	for (a = r->allocs; a; a = a->next)
		if (a->saved)
			return; /* content still needed */
	for (a = r->allocs; a; a = a->next)
		cms_alloc_store(a)->disk_slot = false;
	written = cms_region_store(r)->disk->end != 0; /* else empty since the last trim, or new */
	cms_region_store(r)->disk->end = 0;
	if (!written || (async && !disk_swap(r)))
		return;
	if (ftruncate(cms_region_store(r)->disk->fd, 0))
		cms_log(r->ctx, CMS_LOG_WARN, "region \"%s\": cannot truncate its disk file: %s",
			r->tag, strerror(errno));
}

static void disk_region_resumed(struct cms_region *r)
{
	/* By default the file keeps its blocks (and each allocation its slot) from one cycle
	 * to the next, as HOST keeps its buffers: the next pause overwrites them in place, with
	 * no block allocation and no discard of the old ones competing with its writes. */
	struct cms_alloc *a;
	uint64_t used = 0;

	if (!cms_region_store(r)->disk)
		return;
	for (a = r->allocs; a; a = a->next)
		if (cms_alloc_store(a)->disk_slot)
			used += align_up(a->size);
	/* Freed allocations' slots are not reused: start the file over once they would make
	 * up more than half of it (the next pause then lays the slots out anew). */
	if ((r->flags & CMS_REGION_RELEASE_HOST) || cms_region_store(r)->disk->end > 2 * used)
		disk_trim(r, true);
}

/* ---- staging pool and batches ---- */

static cms_status stage_make(cms_context *ctx, int32_t dev, uint64_t total, struct cms_stage *s)
{
	return cms_stage_make(
		ctx, dev, total,
		cms_tune_bytes(&cms_ctx_store(ctx)->tune.disk_stage, ctx->devices[dev].granularity),
		"disk", s);
}

struct piece {
	struct cms_alloc *a;
	size_t off, len; /* bytes of the allocation */
	uint64_t foff;	 /* file offset */
};

struct batch {
	size_t first, n; /* pieces */
	uint64_t foff, len;
};

struct plan {
	struct piece *p;
	struct batch *b;
	size_t np, nb;
	uint64_t bytes;
};

/* Pieces of the allocations of v that want(), in batches of at most chunk bytes. */
static cms_status plan_make(struct cms_alloc **v, size_t n, bool (*want)(struct cms_alloc *),
			    size_t chunk, struct plan *pl)
{
	size_t i, cap = 0;

	memset(pl, 0, sizeof(*pl));
	for (i = 0; i < n; i++)
		if (want(v[i]))
			cap += (v[i]->size + chunk - 1) / chunk;
	if (!cap)
		return CMS_OK;
	pl->p = malloc(cap * sizeof(*pl->p));
	pl->b = malloc(cap * sizeof(*pl->b));
	if (!pl->p || !pl->b) {
		free(pl->p);
		free(pl->b);
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a disk plan");
	}
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];
		size_t off;

		if (!want(a))
			continue;
		for (off = 0; off < a->size; off += chunk) {
			struct piece *pc = &pl->p[pl->np];
			struct batch *last = pl->nb ? &pl->b[pl->nb - 1] : NULL;
			uint64_t alen, live;

			pc->a = a;
			pc->off = off;
			pc->len = a->size - off < chunk ? a->size - off : chunk;
			pc->foff = cms_alloc_store(a)->disk_off + off;
			live = cms_span_live_bytes(a, off, off + pc->len);
			if (!live) /* declared content-free (cms_range_discard): no I/O */
				continue;
			alen = align_up(pc->len);
			if (last && pl->p[last->first].a->region == a->region &&
			    last->foff + last->len == pc->foff && last->len + alen <= chunk) {
				last->n++;
				last->len += alen;
			} else {
				last = &pl->b[pl->nb++];
				last->first = pl->np;
				last->n = 1;
				last->foff = pc->foff;
				last->len = alen;
			}
			pl->np++;
			pl->bytes += live;
		}
	}
	return CMS_OK;
}

static void plan_free(struct plan *pl)
{
	free(pl->p);
	free(pl->b);
}

static uint64_t want_total(struct cms_alloc **v, size_t n, bool (*want)(struct cms_alloc *))
{
	uint64_t t = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (want(v[i]))
			t += align_up(v[i]->size);
	return t;
}

/* A failed operation on r's file ("what": "fdatasync", "read of N bytes at offset M", ...). */
static cms_status file_error(struct cms_region *r, const char *what, int err)
{
	bool full = err == ENOSPC || err == EDQUOT;

	return cms_set_error(
		io_status(err), "region \"%s\": %s of its disk file in %s failed: %s%s", r->tag,
		what, cms_region_store(r)->disk->dir, strerror(err), full ? " (disk full)" : "");
}

static cms_status io_error(struct cms_region *r, bool write, uint64_t len, uint64_t off, int err)
{
	char what[96];

	snprintf(what, sizeof(what), "%s of %llu bytes at offset %llu", write ? "write" : "read",
		 (unsigned long long)len, (unsigned long long)off);
	return file_error(r, what, err);
}

/*
 * Ends a pause's writes to r's file: with fdatasync, so that the pause returns
 * once the content is on the disk, reports the errors that a buffered write
 * (no O_DIRECT) leaves for later, and the next resume's reads do not compete
 * with a write-back still in progress below the filesystem.
 */
static cms_status disk_sync(cms_context *ctx, struct cms_region *r)
{
	int err = ctx->drv.io_hook ? ctx->drv.io_hook(3) : 0; /* CMSSIM_IO_SYNC */

	while (!err && fdatasync(cms_region_store(r)->disk->fd))
		if (errno != EINTR)
			err = errno;
	if (err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP || err == ENOSYS) {
		/* A file system without sync (the writes themselves succeeded): as before 1.1. */
		cms_log(ctx, CMS_LOG_DEBUG, "region \"%s\": no fdatasync in %s (%s)", r->tag,
			cms_region_store(r)->disk->dir, strerror(err));
		err = 0;
	}
	return err ? file_error(r, "fdatasync", err) : CMS_OK;
}

/* A mapped allocation: its content is on the device. */
static bool wants_save(struct cms_alloc *a)
{
	return a->mapped;
}

/* The device copies of a batch between its pieces and a staging buffer. */
struct stage_copy {
	cms_context *ctx;
	struct piece *pc;
	char *h; /* the staging byte of the piece's first byte */
	bool save;
	CUstream s;
};

/* One live piece of pc (cms_store_pieces), offsets from the allocation's base. */
static cms_status stage_piece(void *arg, uint64_t off, uint64_t len)
{
	struct stage_copy *c = arg;
	CUdeviceptr d = c->pc->a->base + off;
	char *h = c->h + (off - c->pc->off);
	cms_context *ctx = c->ctx;
	cms_status st = CMS_OK;

	if (c->save)
		CU_TRY(ctx, cuMemcpyDtoHAsync(h, d, len, c->s), st, out);
	else
		CU_TRY(ctx, cuMemcpyHtoDAsync(d, h, len, c->s), st, out);
out:
	return st;
}

/* Enqueues the device copies of batch b into (save) or out of (restore) staging buffer buf:
 * the live pieces only (ranges declared content-free are left out). */
static cms_status batch_copies(cms_context *ctx, struct plan *pl, struct batch *b, char *buf,
			       bool save, CUstream s)
{
	struct stage_copy c = { .ctx = ctx, .save = save, .s = s };
	cms_status st = CMS_OK;
	uint64_t unused = 0;
	size_t j;

	for (j = b->first; j < b->first + b->n && !st; j++) {
		c.pc = &pl->p[j];
		c.h = buf + (c.pc->foff - b->foff);
		st = cms_store_pieces(&c.pc->a, 1, c.pc->off, c.pc->len, stage_piece, &c, &unused);
	}
	return st;
}

static cms_status disk_save(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	cms_context *ctx = l->ctx;
	int32_t dev = l->dev;
	struct cms_stage sg = { 0 };
	struct plan pl;
	uint64_t total = want_total(v, n, wants_save);
	cms_status st, st2;
	size_t i, k;

	if (!total)
		return CMS_OK;
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];
		struct cms_disk *d = cms_region_store(a->region)->disk;

		if (!wants_save(a) || cms_alloc_store(a)->disk_slot)
			continue;
		cms_alloc_store(a)->disk_off =
			d->end; /* consecutive allocations get consecutive slots */
		cms_alloc_store(a)->disk_slot = true;
		d->end += align_up(a->size);
	}
	st = stage_make(ctx, dev, total, &sg);
	if (st)
		return st;
	st = plan_make(v, n, wants_save, sg.chunk, &pl);
	if (st)
		goto out_stage;
	/* Batch k is copied into buffer k % 2 while batch k - 1 is written from the other. */
	for (k = 0; k <= pl.nb && !st; k++) {
		if (k < pl.nb)
			st = batch_copies(ctx, &pl, &pl.b[k], sg.base + (k % 2) * sg.chunk, true,
					  cms_lane_at(l, k % 2));
		if (!st && k > 0) {
			struct batch *b = &pl.b[k - 1];
			struct cms_region *r = pl.p[b->first].a->region;

			CU_TRY(ctx, cuStreamSynchronize(cms_lane_at(l, (k - 1) % 2)), st, out_sync);
			if (io_full(ctx, cms_region_store(r)->disk, true,
				    sg.base + ((k - 1) % 2) * sg.chunk, b->len, b->foff))
				st = io_error(r, true, b->len, b->foff, errno);
		}
	}
out_sync:
	st2 = cms_lanes_sync(l); /* no copy may run into the staging any more */
	if (!st)
		st = st2;
	for (k = 0; k < pl.nb && !st; k++) { /* each file once */
		struct cms_region *r = pl.p[pl.b[k].first].a->region;
		size_t e;

		for (e = 0; e < k && pl.p[pl.b[e].first].a->region != r; e++)
			;
		if (e == k)
			st = disk_sync(ctx, r);
	}
	if (!st) {
		for (i = 0; i < n; i++)
			if (wants_save(v[i])) {
				cms_alloc_set_saved(v[i], true);
			}
		*bytes += pl.bytes;
	} else {
		for (i = 0; i < n; i++) /* give the space back unless content is kept there */
			if (wants_save(v[i]))
				disk_trim(v[i]->region, false);
	}
	plan_free(&pl);
out_stage:
	cms_stage_free(ctx, &sg);
	return st;
}

static bool wants_restore(struct cms_alloc *a)
{
	return a->saved && cms_alloc_store(a)->disk_slot && a->mapped;
}

static cms_status disk_restore(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	cms_context *ctx = l->ctx;
	int32_t dev = l->dev;
	struct cms_stage sg = { 0 };
	struct plan pl;
	uint64_t total = want_total(v, n, wants_restore);
	cms_status st, st2;
	size_t k;

	if (!total)
		return CMS_OK;
	st = stage_make(ctx, dev, total, &sg);
	if (st)
		return st;
	st = plan_make(v, n, wants_restore, sg.chunk, &pl);
	if (st)
		goto out_stage;
	/* Batch k is read into buffer k % 2 while batch k - 1 is copied from the other. */
	for (k = 0; k < pl.nb && !st; k++) {
		struct batch *b = &pl.b[k];
		struct cms_region *r = pl.p[b->first].a->region;
		CUstream s = cms_lane_at(l, k % 2);
		char *buf = sg.base + (k % 2) * sg.chunk;

		if (k >= 2) /* the buffer's previous copy (batch k - 2) must be done */
			CU_TRY(ctx, cuStreamSynchronize(s), st, out_sync);
		if (io_full(ctx, cms_region_store(r)->disk, false, buf, b->len, b->foff)) {
			st = io_error(r, false, b->len, b->foff, errno);
			break;
		}
		st = batch_copies(ctx, &pl, b, buf, false, s);
	}
out_sync:
	st2 = cms_lanes_sync(l); /* staging is freed below */
	if (!st)
		st = st2;
	if (!st)
		*bytes += pl.bytes;
	plan_free(&pl);
out_stage:
	cms_stage_free(ctx, &sg);
	return st;
}

/* Paused: the saved slot; active: a slot kept from the last pause (the file keeps it). */
static bool disk_backup_held(const struct cms_alloc *a, void **host)
{
	*host = NULL;
	return cms_alloc_store(a)->disk_slot && cms_region_store(a->region)->disk &&
	       (a->saved || a->region->state == CMS_STATE_ACTIVE);
}

#define READ_BOUNCE (1u << 20) /* bytes of an aligned buffer for reads through O_DIRECT */

/* pread of up to len bytes at off, EINTR retried: bytes read (0 at the end), or -1 (errno). */
static ssize_t read_some(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	do
		n = pread(fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n;
}

/*
 * Copies len bytes of a's slot from offset off into buf: straight into buf from a buffered
 * file, through an aligned buffer (whole CMS_DISK_ALIGN blocks) from an O_DIRECT one. The
 * file's mode stays as it is.
 */
static cms_status disk_backup_read(struct cms_alloc *a, uint64_t off, void *buf, uint64_t len)
{
	struct cms_region *r = a->region;
	struct cms_disk *d = cms_region_store(r)->disk;
	uint64_t pos = cms_alloc_store(a)->disk_off + off, end = pos + len;
	char *out = buf, *bounce = NULL;
	cms_status st = CMS_OK;
	int err = 0;

	if (r->ctx->drv.io_hook)
		err = r->ctx->drv.io_hook(2); /* CMSSIM_IO_READ */
	if (!err && d->direct && !(bounce = aligned_alloc(CMS_DISK_ALIGN, READ_BOUNCE)))
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a read buffer");
	while (!err && pos < end) {
		uint64_t from = d->direct ? pos & ~(uint64_t)(CMS_DISK_ALIGN - 1) : pos;
		uint64_t want = end - from, skip = pos - from;
		ssize_t n;

		if (d->direct && want > READ_BOUNCE)
			want = READ_BOUNCE;
		n = read_some(d->fd, d->direct ? bounce : out, d->direct ? align_up(want) : want,
			      from);
		if (n < 0) {
			err = errno;
			break;
		}
		if ((uint64_t)n <= skip) {
			/* The file ends inside the slot: a pause writes no chunk whose bytes are
			 * all declared content-free (cms_range_discard), so the rest is undefined:
			 * zeros. */
			memset(out, 0, end - pos);
			break;
		}
		if ((uint64_t)n - skip < want - skip)
			want = (uint64_t)n;
		if (d->direct)
			memcpy(out, bounce + skip, want - skip);
		out += want - skip;
		pos += want - skip;
	}
	if (err)
		st = io_error(r, false, len, cms_alloc_store(a)->disk_off + off, err);
	free(bounce);
	return st;
}

/* Empties active region r's file when asked for files (CMS_REGION_RELEASE_HOST). */
static void disk_release_kept(struct cms_region *r, bool files)
{
	if (files)
		disk_trim(r, true);
}

const struct cms_store_ops cms_store_disk = {
	.name = "disk",
	.save = disk_save,
	.save_sync = true,
	.restore = disk_restore,
	.restore_batched = true,
	.region_resumed = disk_region_resumed,
	.forget = disk_forget,
	.check = disk_check,
	.dir_set = disk_dir_set,
	.region_close = disk_region_close,
	.backup_held = disk_backup_held,
	.backup_read = disk_backup_read,
	.release_kept = disk_release_kept,
};
