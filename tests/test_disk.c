/* SPDX-License-Identifier: MIT */
/*
 * test_disk.c - the DISK restore policy: content and addresses kept across
 * cycles, the region's file (unlinked at creation, so the directory stays
 * empty) truncated after resume and closed on destroy, directory errors, and
 * (simulation only) injected file write/read failures and driver faults
 * rolling back with nothing lost or leaked.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "cumemsaver_ipc.h"

/* Open descriptors are counted on the simulation only: the CUDA driver opens and closes
 * descriptors of its own (device nodes, pinned-memory bookkeeping) as it goes. */
#define ck_fds_eq(want)                                         \
	do {                                                    \
		if (t_is_sim())                                 \
			ck_assert_int_eq(t_open_fds(), (want)); \
	} while (0)

static char dir[256];

static void make_dir(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/cms-disk-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Entries of dir besides . and .. */
static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void remove_dir(void)
{
	ck_assert_int_eq(dir_entries(dir), 0); /* the library never leaves a name behind */
	ck_assert_int_eq(rmdir(dir), 0);
}

/* The descriptor of the library's unlinked file in dir (the last one), or -1; *count: how many. */
static int disk_fds(int *count)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1, files = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		char link[300], target[512];
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (!strncmp(target, dir, strlen(dir)) && strstr(target, "cumemsaver-") &&
		    strstr(target, "(deleted)")) {
			found = atoi(e->d_name);
			files++;
		}
	}
	closedir(d);
	if (count)
		*count = files;
	return found;
}

static int disk_fd(void)
{
	return disk_fds(NULL);
}

static int disk_files(void)
{
	int n;

	disk_fds(&n);
	return n;
}

/* Asserts that descriptor fd names a (deleted) file directly in parent/child. */
static void fd_in(int fd, const char *parent, const char *child)
{
	char link[64], target[512], want[400];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	ck_assert_int_gt(n, 0);
	target[n] = 0;
	snprintf(want, sizeof(want), "%s/%s/cumemsaver-", parent, child);
	ck_assert_msg(!strncmp(target, want, strlen(want)),
		      "descriptor %d names %s, not a file in %s/%s", fd, target, parent, child);
}

static off_t file_size(int fd)
{
	struct stat sb;

	ck_assert_int_eq(fstat(fd, &sb), 0);
	return sb.st_size;
}

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static cms_region *disk_region(cms_context *ctx, const char *tag)
{
	cms_region *r = t_region(ctx, tag, 0, CMS_POLICY_DISK);

	ck_ok(cms_region_disk_dir_set(r, dir));
	return r;
}

/* Odd sizes (not multiples of the 4 KiB slot alignment) and one above a staging buffer. */
#define NALLOC 5
static const uint64_t sizes[NALLOC] = { 2 * MiB, 3 * MiB + 8, 4100, 1 * MiB, 65 * MiB + 12 };

static void fill_all(const uint64_t *p, uint32_t seed)
{
	int i;

	for (i = 0; i < NALLOC; i++)
		ck_assert_int_eq(t_fill(0, p[i], sizes[i] & ~3ull, seed + (uint32_t)i), 0);
}

static void check_all(const uint64_t *p, uint32_t seed)
{
	int i;

	for (i = 0; i < NALLOC; i++)
		ck_assert_msg(t_check(0, p[i], sizes[i] & ~3ull, seed + (uint32_t)i) == -1,
			      "allocation %d lost its content", i);
}

START_TEST(cycles_keep_content_and_addresses)
{
	cms_context *ctx = t_ctx();
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_region *r;
	uint64_t p[NALLOC], total = 0;
	int fds0, fd, i, cycle;

	make_dir();
	fds0 = t_open_fds();
	r = disk_region(ctx, "d");
	ck_fds_eq(fds0 + 2); /* the region's file, already open, and its directory */
	fd = disk_fd();
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dir_entries(dir), 0); /* ... and already unlinked */
	for (i = 0; i < NALLOC; i++) {
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
		total += sizes[i];
	}
	for (cycle = 0; cycle < 3; cycle++) {
		cms_pointer_info pi = { .struct_size = sizeof(pi) };
		struct stat s0, s1;

		fill_all(p, 100u * (uint32_t)cycle); /* new content every cycle: nothing stale */
		ck_assert_int_eq(fstat(fd, &s0), 0);
		ck_ok(cms_region_pause(r, NULL, &pr));
		ck_assert_uint_eq(pr.bytes_backed_up, total);
		ck_assert_uint_eq(info(r).state, CMS_STATE_PAUSED);
		ck_assert_uint_eq(info(r).backup_bytes, total);
		ck_assert_uint_eq(info(r).host_bytes, 0); /* no host backup: the file holds it */
		ck_assert_int_ge(file_size(fd), (off_t)total);
		ck_assert_int_eq(dir_entries(dir), 0);
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_assert_uint_eq(info(r).backup_bytes, 0);
		/* The file keeps its space for the next pause: each cycle overwrites the same
		 * slots (same file, no growth after the first pause). */
		ck_assert_int_eq(fstat(fd, &s1), 0);
		ck_assert_int_ge(s1.st_size, (off_t)total);
		if (cycle)
			ck_assert_int_eq(s1.st_size, s0.st_size);
		ck_assert_uint_eq(s1.st_ino, s0.st_ino);
		for (i = 0; i < NALLOC; i++) {
			ck_ok(cms_pointer_info_get(ctx, p[i], &pi));
			ck_assert_uint_eq(pi.base, p[i]);
		}
		check_all(p, 100u * (uint32_t)cycle);
	}
	/* Async resume reads a DISK region synchronously: the content is there at once. */
	{
		cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;

		ro.flags = CMS_RESUME_ASYNC;
		fill_all(p, 7);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, &ro, NULL));
		check_all(p, 7);
	}
	ck_ok(cms_context_destroy(ctx)); /* closes the file */
	ck_fds_eq(fds0);
	remove_dir();
}
END_TEST

START_TEST(files_go_with_free_destroy_and_context)
{
	cms_context *ctx = t_ctx();
	cms_region *a, *b;
	uint64_t pa[3], pb;
	int fds0, fd, i;

	make_dir();
	fds0 = t_open_fds();
	a = disk_region(ctx, "a");
	b = disk_region(ctx, "b");
	for (i = 0; i < 3; i++) {
		ck_ok(cms_alloc(a, 4 * MiB, &pa[i]));
		ck_assert_int_eq(t_fill(0, pa[i], 4 * MiB, (uint32_t)i), 0);
	}
	ck_ok(cms_alloc(b, 1 * MiB, &pb));
	ck_assert_int_eq(t_fill(0, pb, 1 * MiB, 9), 0);
	ck_assert_int_eq(disk_files(), 2);
	ck_ok(cms_pause(ctx, "a", NULL, NULL));
	/* Freeing an allocation of a paused region gives its part of the file back. */
	fd = disk_fd(); /* one of the two; its size says which */
	ck_assert_int_ge(fd, 0);
	ck_ok(cms_free(ctx, pa[1]));
	ck_ok(cms_resume(ctx, "a", NULL, NULL));
	ck_assert_int_eq(t_check(0, pa[0], 4 * MiB, 0), -1);
	ck_assert_int_eq(t_check(0, pa[2], 4 * MiB, 2), -1);
	/* Destroying a region closes its file; destroying a paused one too. */
	ck_ok(cms_region_destroy(a));
	ck_assert_int_eq(disk_files(), 1);
	ck_ok(cms_pause(ctx, "b", NULL, NULL));
	ck_ok(cms_context_destroy(ctx)); /* b paused, its file holding content */
	ck_assert_int_eq(disk_files(), 0);
	ck_fds_eq(fds0);
	remove_dir();
}
END_TEST

/*
 * With CMS_REGION_RELEASE_HOST, a resume empties the file under the same descriptor number:
 * with a new file (the old
 * one's blocks are freed by the region's reaper thread, off the resume's path), or in
 * place (ftruncate) where no new file can be made, here because the directory is gone.
 */
START_TEST(resume_empties_the_file)
{
	cms_context *ctx = t_ctx();
	struct stat s0, s1;
	cms_region *r;
	uint64_t p;
	int fds0, fd, cycle;

	make_dir();
	fds0 = t_open_fds();
	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = disk_region(ctx, "d");
	t_region_flags = 0;
	fd = disk_fd();
	ck_assert_int_ge(fd, 0);
	ck_ok(cms_alloc(r, 8 * MiB, &p));
	for (cycle = 0; cycle < 3; cycle++) {
		ck_assert_int_eq(t_fill(0, p, 8 * MiB, 40u + (uint32_t)cycle), 0);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_assert_int_eq(fstat(fd, &s0), 0);
		ck_assert_int_ge(s0.st_size, (off_t)(8 * MiB));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_assert_int_eq(fstat(fd, &s1), 0);
		ck_assert_int_eq(s1.st_size, 0);
		ck_assert_int_eq(s1.st_blocks, 0);
		ck_assert_uint_ne(s1.st_ino, s0.st_ino); /* a new file, same number */
		ck_assert_int_eq(t_check(0, p, 8 * MiB, 40u + (uint32_t)cycle), -1);
	}
	/* The directory is empty (the files are unlinked): remove it; the next resume
	 * cannot make a new file there and truncates the current one. */
	ck_assert_int_eq(dir_entries(dir), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	ck_assert_int_eq(t_fill(0, p, 8 * MiB, 77), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_int_eq(fstat(fd, &s0), 0);
	ck_assert_int_ge(s0.st_size, (off_t)(8 * MiB));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(fstat(fd, &s1), 0);
	ck_assert_int_eq(s1.st_size, 0);
	ck_assert_uint_eq(s1.st_ino, s0.st_ino); /* truncated in place */
	ck_assert_int_eq(t_check(0, p, 8 * MiB, 77), -1);
	ck_ok(cms_context_destroy(ctx)); /* joins the reaper, closes the file */
	ck_assert_int_eq(disk_files(), 0);
	ck_fds_eq(fds0);
}
END_TEST

/*
 * A relative directory means the one current at cms_region_disk_dir_set: after a chdir()
 * the region's next file (a resume with CMS_REGION_RELEASE_HOST makes a new one) is still
 * made there, not in a directory of the same name under the new working directory.
 */
START_TEST(relative_directory_resolved_at_the_call)
{
	cms_context *ctx = t_ctx();
	char other[] = "/tmp/cms-disk-other-XXXXXX", sub[300], cwd[4096];
	struct stat s0, s1;
	cms_region *r;
	uint64_t p;
	int fd;

	make_dir();
	ck_assert_ptr_nonnull(mkdtemp(other));
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	snprintf(sub, sizeof(sub), "%s/sub", other);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(dir), 0);
	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = t_region(ctx, "rel", 0, CMS_POLICY_DISK);
	t_region_flags = 0;
	ck_ok(cms_region_disk_dir_set(r, "sub"));
	fd = disk_fd(); /* the region's descriptor: the resume keeps its number */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &s0), 0);
	ck_assert_int_eq(chdir(other), 0);
	ck_ok(cms_alloc(r, 4 * MiB, &p));
	ck_assert_int_eq(t_fill(0, p, 4 * MiB, 9), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL)); /* a new file */
	ck_assert_int_eq(t_check(0, p, 4 * MiB, 9), -1);
	/* The region's own descriptor, not a count of open files: the old file is closed
	 * by the region's reaper thread, which may not have run yet (issue 34, item 10). */
	ck_assert_int_eq(fstat(fd, &s1), 0);
	ck_assert_uint_ne(s1.st_ino, s0.st_ino);
	fd_in(fd, dir, "sub"); /* in dir/sub, not in other/sub */
	ck_assert_int_eq(chdir(cwd), 0);
	ck_ok(cms_context_destroy(ctx)); /* joins the reaper */
	ck_assert_int_eq(disk_files(), 0);
	ck_assert_int_eq(rmdir(sub), 0);
	ck_assert_int_eq(rmdir(other), 0);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	ck_assert_int_eq(rmdir(sub), 0);
	remove_dir();
}
END_TEST

/* Slots of freed allocations are not reused: the file starts over once they would make up
 * most of it, so churn between cycles keeps it bounded. */
START_TEST(file_bounded_under_churn)
{
	cms_context *ctx = t_ctx();
	uint64_t keep, churn;
	cms_region *r;
	int fd, c;

	make_dir();
	r = disk_region(ctx, "d");
	fd = disk_fd();
	ck_ok(cms_alloc(r, 256 * 1024, &keep));
	ck_ok(cms_alloc(r, 256 * 1024, &churn));
	for (c = 0; c < 16; c++) {
		ck_assert_int_eq(t_fill(0, keep, 256 * 1024, 5u + (uint32_t)c), 0);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ck_assert_int_eq(t_check(0, keep, 256 * 1024, 5u + (uint32_t)c), -1);
		ck_ok(cms_free(ctx, churn));
		ck_ok(cms_alloc(r, 256 * 1024, &churn));
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_msg(file_size(fd) <= (off_t)(4 * 256 * 1024),
		      "file of %lld bytes for 512 KiB of live allocations",
		      (long long)file_size(fd));
	ck_ok(cms_context_destroy(ctx));
	remove_dir();
}
END_TEST

START_TEST(directory_errors)
{
	cms_context *ctx = t_ctx();
	cms_region *r, *h;
	char path[320];
	uint64_t p;
	int fds0, fd;

	make_dir();
	r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	h = t_region(ctx, "h", 0, CMS_POLICY_HOST);
	ck_ok(cms_alloc(r, 1 * MiB, &p));
	fds0 = t_open_fds();
	/* No directory: pause refuses, nothing changes. */
	ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "cms_region_disk_dir_set"));
	ck_status(cms_pause(ctx, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(info(r).state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(info(h).state, CMS_STATE_ACTIVE);
	/* Bad arguments. */
	ck_status(cms_region_disk_dir_set(NULL, dir), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_disk_dir_set(h, dir), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_disk_dir_set(r, ""), CMS_ERR_INVALID_ARGUMENT);
	/* Missing directory, a file instead of a directory. */
	snprintf(path, sizeof(path), "%s/missing", dir);
	ck_status(cms_region_disk_dir_set(r, path), CMS_ERR_NOT_FOUND);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), path));
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_status(cms_region_disk_dir_set(r, path), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "not a directory"));
	ck_assert_int_eq(unlink(path), 0);
	/* Not writable (root writes anyway: checked only for others). */
	if (geteuid() != 0) {
		snprintf(path, sizeof(path), "%s/ro", dir);
		ck_assert_int_eq(mkdir(path, 0500), 0);
		ck_status(cms_region_disk_dir_set(r, path), CMS_ERR_PERMISSION);
		ck_assert_ptr_nonnull(strstr(cms_last_error(), "not writable"));
		ck_assert_int_eq(rmdir(path), 0);
	}
	ck_fds_eq(fds0); /* nothing opened by the failures */
	/* Set, then refused while the content is in the file; NULL closes it when resumed. */
	ck_ok(cms_region_disk_dir_set(r, dir));
	ck_assert_int_eq(t_fill(0, p, 1 * MiB, 3), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_status(cms_region_disk_dir_set(r, dir), CMS_ERR_PAUSED);
	ck_status(cms_region_disk_dir_set(r, NULL), CMS_ERR_PAUSED);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, 1 * MiB, 3), -1);
	ck_ok(cms_region_disk_dir_set(r, dir)); /* a new file replaces the old one */
	ck_fds_eq(fds0 + 2);			/* and its directory the old one */
	ck_ok(cms_region_disk_dir_set(r, NULL));
	ck_fds_eq(fds0);
	ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_context_destroy(ctx));
	remove_dir();
}
END_TEST

/*
 * The test's unlink and unlinkat, which the library's calls reach (they interpose the C
 * library's and call it, as test_fork.c's tfind): armed, the first call for a file of the
 * library replaces the directory swap_dir by a symbolic link to swap_target (the directory
 * itself moves to swap_moved) before the file is unlinked, as another process could between
 * the file's creation and its unlink.
 */
static char swap_dir[256], swap_moved[300], swap_target[256];
static atomic_int swap_armed;

static void swap_if_armed(const char *path)
{
	if (!strstr(path, "cumemsaver-") || !atomic_exchange(&swap_armed, 0))
		return;
	if (rename(swap_dir, swap_moved) || symlink(swap_target, swap_dir))
		atomic_store(&swap_armed, -1); /* the test fails */
}

int unlink(const char *path)
{
	int (*real)(const char *);

	swap_if_armed(path);
	*(void **)&real = dlsym(RTLD_NEXT, "unlink");
	return real(path);
}

int unlinkat(int fd, const char *path, int flags)
{
	int (*real)(int, const char *, int);

	swap_if_armed(path);
	*(void **)&real = dlsym(RTLD_NEXT, "unlinkat");
	return real(fd, path, flags);
}

/* Puts the moved directory back at its name (swap_if_armed undone). */
static void swap_undo(void)
{
	ck_assert_int_eq(unlink(swap_dir), 0); /* the symbolic link */
	ck_assert_int_eq(rename(swap_moved, swap_dir), 0);
}

/*
 * A file is unlinked in the directory it was made in, whatever another process does to the
 * directory's name meanwhile: here it is replaced by a symbolic link to another directory
 * between the creation and the unlink, for the region's first file (cms_region_disk_dir_set)
 * and for a later one (a resume with CMS_REGION_RELEASE_HOST). Before, the unlink went by
 * path: it followed the link, missed, and the file was left in the moved directory.
 */
START_TEST(directory_replaced_before_unlink)
{
	cms_context *ctx = t_ctx();
	char other[] = "/tmp/cms-disk-other-XXXXXX";
	cms_status st;
	cms_region *r;
	uint64_t p;

	make_dir();
	ck_assert_ptr_nonnull(mkdtemp(other));
	snprintf(swap_dir, sizeof(swap_dir), "%s", dir);
	snprintf(swap_moved, sizeof(swap_moved), "%s.moved", dir);
	snprintf(swap_target, sizeof(swap_target), "%s", other);
	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = t_region(ctx, "moved", 0, CMS_POLICY_DISK);
	t_region_flags = 0;
	ck_ok(cms_alloc(r, 4 * MiB, &p));
	ck_assert_int_eq(t_fill(0, p, 4 * MiB, 5), 0);

	atomic_store(&swap_armed, 1);
	st = cms_region_disk_dir_set(r, dir);
	ck_assert_int_eq(atomic_load(&swap_armed), 0); /* replaced before the unlink */
	ck_assert_msg(dir_entries(swap_moved) == 0, "a file was left behind by the first file");
	ck_assert_int_eq(dir_entries(other), 0);
	ck_assert_msg(st == CMS_OK, "%s: %s", cms_status_name(st), cms_last_error());
	swap_undo();

	ck_ok(cms_region_pause(r, NULL, NULL));
	atomic_store(&swap_armed, 1);
	ck_ok(cms_region_resume(r, NULL, NULL)); /* a new file */
	ck_assert_int_eq(atomic_load(&swap_armed), 0);
	ck_assert_msg(dir_entries(swap_moved) == 0, "a file was left behind by a later file");
	ck_assert_int_eq(dir_entries(other), 0);
	ck_assert_int_eq(t_check(0, p, 4 * MiB, 5), -1);
	swap_undo();
	ck_ok(cms_region_pause(r, NULL, NULL)); /* the new file works */
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, 4 * MiB, 5), -1);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(rmdir(other), 0);
	remove_dir();
}
END_TEST

/* Log lines of a context (paths_are_escaped). */
struct logcap {
	char lines[32][512];
	int n;
};

static void cap_log(void *user, int32_t level, const char *message)
{
	struct logcap *c = user;

	(void)level;
	if (c->n < 32)
		snprintf(c->lines[c->n++], sizeof(c->lines[0]), "%s", message);
}

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* The lines logged since the last call: none has a control character, and one has want. */
static void lines_escaped(struct logcap *c, const char *want)
{
	bool found = false;
	int i;

	for (i = 0; i < c->n; i++) {
		ck_assert_msg(!has_control(c->lines[i]), "log line with a control character: %s",
			      c->lines[i]);
		found |= strstr(c->lines[i], want) != NULL;
	}
	ck_assert_msg(found, "no log line names %s", want);
	c->n = 0;
}

/* A directory or socket name with control characters reaches cms_last_error() and log lines
 * escaped: it cannot forge a line. */
START_TEST(paths_are_escaped)
{
	static const char name[] = "new\nline \x01\x1b[31m\r\t\x7f";
	static const char esc[] = "new\\nline \\x01\\x1b[31m\\r\\t\\x7f";
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	static struct logcap cap;
	cms_exporter *exp = NULL;
	cms_context *ctx = NULL;
	char path[320];
	cms_region *r;

	memset(&cap, 0, sizeof(cap));
	o.log_fn = cap_log;
	o.log_user = &cap;
	o.log_level = CMS_LOG_DEBUG;
	ck_ok(cms_context_create(&o, &ctx));
	make_dir();
	r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_status(cms_region_disk_dir_set(r, path), CMS_ERR_NOT_FOUND);
	ck_assert_msg(!has_control(cms_last_error()), "message: %s", cms_last_error());
	ck_assert_ptr_nonnull(strstr(cms_last_error(), esc));
	ck_assert_int_eq(mkdir(path, 0700), 0);
	cap.n = 0;
	ck_ok(cms_region_disk_dir_set(r, path));
	lines_escaped(&cap, esc);
	ck_ok(cms_region_disk_dir_set(r, NULL));
	ck_assert_int_eq(rmdir(path), 0);
	/* A socket in a missing directory, then one whose own name has them. */
	snprintf(path, sizeof(path), "%s/%s/s", dir, name);
	ck_assert_int_ne(cms_exporter_create(ctx, path, NULL, &exp), CMS_OK);
	ck_assert_msg(!has_control(cms_last_error()), "message: %s", cms_last_error());
	ck_assert_ptr_nonnull(strstr(cms_last_error(), esc));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cap.n = 0;
	ck_ok(cms_exporter_create(ctx, path, NULL, &exp));
	lines_escaped(&cap, esc);
	ck_ok(cms_exporter_destroy(exp));
	ck_ok(cms_context_destroy(ctx));
	remove_dir();
}
END_TEST

START_TEST(many_allocations)
{
	cms_context *ctx = t_ctx();
	enum { N = 600 };
	static uint64_t p[N];
	cms_region *r;
	int i, cycle;

	make_dir();
	r = disk_region(ctx, "many");
	for (i = 0; i < N; i++)
		ck_ok(cms_alloc(r, 64 * 1024 + 4 * (uint64_t)(i % 7), &p[i]));
	for (cycle = 0; cycle < 2; cycle++) {
		for (i = 0; i < N; i++)
			ck_assert_int_eq(t_fill(0, p[i], 64 * 1024, (uint32_t)(i + cycle * N)), 0);
		ck_ok(cms_region_pause(r, NULL, NULL));
		if (cycle == 1) /* free some while paused: the rest must still come back */
			for (i = 0; i < N; i += 3)
				ck_ok(cms_free(ctx, p[i]));
		ck_ok(cms_region_resume(r, NULL, NULL));
		for (i = 0; i < N; i++)
			if (cycle == 0 || i % 3)
				ck_assert_msg(t_check(0, p[i], 64 * 1024,
						      (uint32_t)(i + cycle * N)) == -1,
					      "allocation %d", i);
	}
	ck_ok(cms_context_destroy(ctx));
	remove_dir();
}
END_TEST

/* cms_swap with DISK on both sides, and between DISK and HOST: content and addresses kept in
 * every direction, nothing left in the directory. Refused (CMS_ERR_NOT_SUPPORTED) before
 * the single engine. */
START_TEST(swap_disk_both_ways)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_context *ctx;
	cms_region *x, *y, *h;
	uint64_t px[NALLOC], py[NALLOC], ph;
	int i, round;

	make_dir();
	ctx = t_ctx();
	x = disk_region(ctx, "x");
	y = disk_region(ctx, "y");
	h = t_region(ctx, "h", 0, CMS_POLICY_HOST);
	for (i = 0; i < NALLOC; i++) {
		ck_ok(cms_alloc(x, sizes[i], &px[i]));
		ck_ok(cms_alloc(y, sizes[i], &py[i]));
	}
	ck_ok(cms_alloc(h, 3 * MiB, &ph));
	fill_all(px, 300);
	fill_all(py, 400);
	ck_assert_int_eq(t_fill(0, ph, 3 * MiB, 500), 0);
	ck_ok(cms_pause(ctx, "y", NULL, NULL));
	ck_ok(cms_pause(ctx, "h", NULL, NULL));
	for (round = 0; round < 4; round++) {
		int from_x = round % 2 == 0;

		ck_ok(cms_swap(ctx, from_x ? "x" : "y", from_x ? "y" : "x", NULL, NULL, &pr, &rr));
		ck_assert_uint_eq(info(x).state, from_x ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE);
		ck_assert_uint_eq(info(y).state, from_x ? CMS_STATE_ACTIVE : CMS_STATE_PAUSED);
		ck_assert_uint_eq(pr.bytes_backed_up, info(x).logical_bytes);
		ck_assert_uint_eq(rr.bytes_restored, info(x).logical_bytes);
		check_all(from_x ? py : px, from_x ? 400 : 300);
	}
	/* DISK out, HOST in, and back. */
	ck_ok(cms_swap(ctx, "x", "h", NULL, NULL, NULL, NULL));
	ck_assert_int_eq(t_check(0, ph, 3 * MiB, 500), -1);
	ck_ok(cms_swap(ctx, "h", "x", NULL, NULL, NULL, NULL));
	check_all(px, 300);
	ck_ok(cms_resume(ctx, "y", NULL, NULL));
	check_all(py, 400);
	ck_ok(cms_context_destroy(ctx));
	remove_dir();
}
END_TEST

/* ---- simulation only: injected faults ---- */

static int (*fail_io)(int op, uint64_t nth, int err);

static int sim_ready(void)
{
	if (!t_is_sim())
		return 0;
	fail_io = (int (*)(int, uint64_t, int))dlsym(t_drv()->dl, "cmssim_fail_io");
	ck_assert_ptr_nonnull(fail_io);
	return 1;
}

static void same_counts(const cmssim_counters *a, cmssim_counters now)
{
	const cmssim_counters *b = &now;

	ck_assert_uint_eq(a->handles, b->handles);
	ck_assert_uint_eq(a->mappings, b->mappings);
	ck_assert_uint_eq(a->reservations, b->reservations);
	ck_assert_uint_eq(a->host_buffers, b->host_buffers);
	ck_assert_uint_eq(a->device_used_bytes[0], b->device_used_bytes[0]);
}

START_TEST(write_and_read_failures_roll_back)
{
	cms_context *ctx;
	cms_region *r;
	uint64_t p[NALLOC];
	cmssim_counters c0;
	int fds0, fd, i, k, err;

	if (!sim_ready())
		return;
	make_dir();
	ctx = t_ctx();
	r = disk_region(ctx, "d");
	fd = disk_fd();
	for (i = 0; i < NALLOC; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	fill_all(p, 50);
	/* The k-th write of the pause fails (full disk, then an I/O error). */
	for (k = 1; k <= 3; k++)
		for (err = 0; err < 2; err++) {
			c0 = t_counters();
			fds0 = t_open_fds();
			ck_assert_int_eq(fail_io(CMSSIM_IO_WRITE, (uint64_t)k, err ? EIO : ENOSPC),
					 0);
			ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_IO);
			if (!err)
				ck_assert_ptr_nonnull(strstr(cms_last_error(), "disk full"));
			ck_assert_ptr_nonnull(strstr(cms_last_error(), dir));
			ck_assert_uint_eq(info(r).state, CMS_STATE_ACTIVE);
			ck_assert_uint_eq(info(r).backup_bytes, 0);
			ck_assert_int_eq(file_size(fd), 0); /* space given back */
			same_counts(&c0, t_counters());
			ck_fds_eq(fds0);
			check_all(p, 50);
		}
	ck_assert_int_eq(fail_io(CMSSIM_IO_WRITE, 0, 0), 0);
	/* The fdatasync that ends the pause fails: rolled back like a failed write. */
	for (err = 0; err < 2; err++) {
		c0 = t_counters();
		fds0 = t_open_fds();
		ck_assert_int_eq(fail_io(CMSSIM_IO_SYNC, 1, err ? EIO : ENOSPC), 0);
		ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_IO);
		ck_assert_ptr_nonnull(strstr(cms_last_error(), "fdatasync"));
		if (!err)
			ck_assert_ptr_nonnull(strstr(cms_last_error(), "disk full"));
		ck_assert_uint_eq(info(r).state, CMS_STATE_ACTIVE);
		ck_assert_uint_eq(info(r).backup_bytes, 0);
		ck_assert_int_eq(file_size(fd), 0);
		same_counts(&c0, t_counters());
		ck_fds_eq(fds0);
		check_all(p, 50);
	}
	ck_ok(cms_region_pause(r, NULL, NULL)); /* disarmed after firing: the next one works */
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 50);
	/* A file system without sync support (EINVAL): the written content counts. */
	ck_assert_int_eq(fail_io(CMSSIM_IO_SYNC, 1, EINVAL), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(info(r).state, CMS_STATE_PAUSED);
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 50);
	/* The k-th read of the resume fails: still paused with its file; a retry works. */
	for (k = 1; k <= 3; k++) {
		ck_ok(cms_region_pause(r, NULL, NULL));
		c0 = t_counters();
		ck_assert_int_eq(fail_io(CMSSIM_IO_READ, (uint64_t)k, EIO), 0);
		ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_IO);
		ck_assert_ptr_nonnull(strstr(cms_last_error(), "read"));
		ck_assert_uint_eq(info(r).state, CMS_STATE_PAUSED);
		same_counts(&c0, t_counters());
		ck_ok(cms_region_resume(r, NULL, NULL));
		check_all(p, 50);
	}
	ck_ok(cms_context_destroy(ctx));
	remove_dir();
}
END_TEST

/* A swap whose disk write (pause side) or read (resume side) fails: both tags as before. */
START_TEST(swap_disk_failures_roll_back)
{
	cms_context *ctx;
	cms_region *x, *y;
	uint64_t px[NALLOC], py[NALLOC];
	cmssim_counters c0;
	int i, k;

	if (!sim_ready())
		return;
	make_dir();
	ctx = t_ctx();
	x = disk_region(ctx, "x");
	y = disk_region(ctx, "y");
	for (i = 0; i < NALLOC; i++) {
		ck_ok(cms_alloc(x, sizes[i], &px[i]));
		ck_ok(cms_alloc(y, sizes[i], &py[i]));
	}
	fill_all(px, 600);
	fill_all(py, 700);
	ck_ok(cms_pause(ctx, "y", NULL, NULL));
	for (k = 0; k < 2; k++) {
		c0 = t_counters();
		ck_assert_int_eq(fail_io(k ? CMSSIM_IO_READ : CMSSIM_IO_WRITE, 1, EIO), 0);
		ck_status(cms_swap(ctx, "x", "y", NULL, NULL, NULL, NULL), CMS_ERR_IO);
		ck_assert_uint_eq(info(x).state, CMS_STATE_ACTIVE);
		ck_assert_uint_eq(info(y).state, CMS_STATE_PAUSED);
		same_counts(&c0, t_counters());
		check_all(px, 600);
	}
	ck_assert_int_eq(fail_io(CMSSIM_IO_WRITE, 0, 0), 0);
	ck_assert_int_eq(fail_io(CMSSIM_IO_READ, 0, 0), 0);
	ck_ok(cms_swap(ctx, "x", "y", NULL, NULL, NULL, NULL));
	check_all(py, 700);
	ck_ok(cms_swap(ctx, "y", "x", NULL, NULL, NULL, NULL));
	check_all(px, 600);
	ck_ok(cms_context_destroy(ctx));
	remove_dir();
}
END_TEST

/* Small sizes for the sweep: several 1 MiB staging batches with the simulation. */
#define NSWEEP 4
static const uint64_t sweep_sizes[NSWEEP] = { 2 * MiB, 1 * MiB + 8, 4100, 3 * MiB };

static void sweep_fill(const uint64_t *p)
{
	int i;

	for (i = 0; i < NSWEEP; i++)
		ck_assert_int_eq(t_fill(0, p[i], sweep_sizes[i] & ~3ull, 20u + (uint32_t)i), 0);
}

/* Ranges declared content-free in the declared sweeps (cms_range_discard): part of both
 * 1 MiB staging chunks of allocation 0, and the whole second chunk of allocation 3 (no I/O). */
static const struct {
	int i;
	uint64_t lo, hi;
} sweep_decl[2] = { { 0, 256 * 1024, 3 * MiB / 2 }, { 3, 1 * MiB, 2 * MiB } };

static void sweep_declare(cms_context *ctx, const uint64_t *p)
{
	int k;

	for (k = 0; k < 2; k++)
		ck_ok(cms_range_discard(ctx, p[sweep_decl[k].i] + sweep_decl[k].lo,
					sweep_decl[k].hi - sweep_decl[k].lo));
}

/* The content of every allocation (the declared ranges aside when declared). */
static void sweep_check(const uint64_t *p, const char *when, int declared)
{
	int i, k;

	for (i = 0; i < NSWEEP; i++) {
		uint64_t lo = 0, hi = 0;

		for (k = 0; declared && k < 2; k++)
			if (sweep_decl[k].i == i) {
				lo = sweep_decl[k].lo;
				hi = sweep_decl[k].hi;
			}
		ck_assert_msg(t_check_except(0, p[i], sweep_sizes[i] & ~3ull, 20u + (uint32_t)i, lo,
					     hi) == -1,
			      "%s: allocation %d lost its content", when, i);
	}
}

/* Every driver call of a pause (_i 0, 2) or resume (_i 1, 3) fails once in turn; _i 2 and 3
 * with ranges declared content-free (staging copies split, a chunk skipped). */
START_TEST(driver_fault_sweep)
{
	const struct t_sim *sim;
	int resume = _i & 1, declared = _i >= 2;
	uint64_t calls = 0, n;
	int points = 0;

	if (!sim_ready())
		return;
	sim = t_sim();
	make_dir();
	for (n = 0;; n++) {
		cms_context *ctx = t_ctx();
		cms_region *r = disk_region(ctx, "d");
		uint64_t p[NSWEEP];
		cmssim_counters c0;
		cms_status st = CMS_OK;
		char when[64];
		int i, fds0;

		for (i = 0; i < NSWEEP; i++)
			ck_ok(cms_alloc(r, sweep_sizes[i], &p[i]));
		sweep_fill(p);
		if (declared)
			sweep_declare(ctx, p);
		if (resume)
			ck_ok(cms_region_pause(r, NULL, NULL));
		c0 = t_counters();
		fds0 = t_open_fds();
		if (n == 0) { /* dry run: count the calls */
			calls = sim->call_count();
			ck_ok(resume ? cms_region_resume(r, NULL, NULL) :
				       cms_region_pause(r, NULL, NULL));
			calls = sim->call_count() - calls;
			ck_assert_uint_gt(calls, 0);
		} else {
			ck_assert_int_eq(sim->fail_call(NULL, n, CUDA_ERROR_UNKNOWN), 0);
			st = resume ? cms_region_resume(r, NULL, NULL) :
				      cms_region_pause(r, NULL, NULL);
			ck_assert_msg(sim->armed_faults() == 0, "call %llu of %llu not reached: %s",
				      (unsigned long long)n, (unsigned long long)calls,
				      cms_status_name(st));
			if (st != CMS_OK) {
				points++;
				ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED, "call %llu: %s",
					      (unsigned long long)n, cms_last_error());
				ck_assert_uint_eq(info(r).state,
						  resume ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE);
				same_counts(&c0, t_counters());
				ck_fds_eq(fds0);
				snprintf(when, sizeof(when), "call %llu failed: %s",
					 (unsigned long long)n, cms_status_name(st));
				if (!resume)
					sweep_check(p, when, declared);
				ck_ok(resume ? cms_region_resume(r, NULL, NULL) :
					       cms_region_pause(r, NULL, NULL));
			}
		}
		if (!resume)
			ck_ok(cms_region_resume(r, NULL, NULL));
		snprintf(when, sizeof(when), "after call %llu (%s)", (unsigned long long)n,
			 cms_status_name(st));
		sweep_check(p, when, declared);
		ck_ok(cms_context_destroy(ctx));
		if (n == calls)
			break;
	}
	ck_assert_int_gt(points, 0);
	remove_dir();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("disk");
	TCase *tc = tcase_create("disk");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, cycles_keep_content_and_addresses);
	tcase_add_test(tc, files_go_with_free_destroy_and_context);
	tcase_add_test(tc, resume_empties_the_file);
	tcase_add_test(tc, relative_directory_resolved_at_the_call);
	tcase_add_test(tc, file_bounded_under_churn);
	tcase_add_test(tc, directory_errors);
	tcase_add_test(tc, directory_replaced_before_unlink);
	tcase_add_test(tc, many_allocations);
	tcase_add_test(tc, swap_disk_both_ways);
	suite_add_tcase(s, tc);
	tc = tcase_create("faults"); /* simulation only (pass elsewhere without running) */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, write_and_read_failures_roll_back);
	tcase_add_test(tc, swap_disk_failures_roll_back);
	tcase_add_loop_test(tc, driver_fault_sweep, 0, 4);
	suite_add_tcase(s, tc);
	tc = tcase_create("escape"); /* paths in messages and log lines */
	tcase_add_test(tc, paths_are_escaped);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
