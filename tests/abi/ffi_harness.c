/* SPDX-License-Identifier: MIT */
/*
 * ffi_harness.c - calls the library the way ctypes does: from a release's ABI
 * description alone (abi/<ver>/cumemsaver.json or abi/cumemsaver.json), never
 * its header.
 *
 *   ffi_harness DESCRIPTION.json LIBRARY.so
 *
 * It dlopens LIBRARY, resolves every function of the description by its
 * versioned name (dlvsym(name, node_prefix + since), e.g. "CMS_1.0"; a function
 * re-versioned later lists "versions", and the newest is used), builds
 * a libffi call interface from the recorded return and parameter types and:
 *  1. NULL for every non-nullable pointer parameter of every function that
 *     returns a status, the other arguments valid: must return
 *     CMS_ERR_INVALID_ARGUMENT, which the function's status list must name;
 *  2. a scripted valid sequence on the device (CMS_DRIVER_LIBRARY: the
 *     simulation): options_init, context_create, device_memory_info,
 *     region_create, region_find, region_info_get, alloc, pointer_info_get,
 *     pause, resume, region_pause, region_resume, free, region_destroy,
 *     context_destroy; with structs of this release's size (computed from the
 *     description with LP64 rules) followed by canary bytes that must stay;
 *     statuses by name, for every status of the release;
 *  3. every function not called yet, once, with valid arguments.
 * Every returned status must be in the function's documented list (its
 * statuses, plus the conventions' driver statuses where "driver" is true,
 * the any-call statuses and the fork status where "forked" is true).
 * Exits 0 when all checks pass, 1 otherwise, 77 without CMS_DRIVER_LIBRARY.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <ffi.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PARAMS 16
#define MAX_FUNCS 256
#define MAX_HANDLES 16
#define STRUCT_MAX 4096 /* the library's limit on struct_size */
#define CANARY 0xA5
#define MiB (1024ull * 1024ull)

/* A parsed C type of the description: [const] base [*...] or base[N]. */
struct ctype {
	char base[64];
	int depth; /* pointer levels */
	int count; /* array length, 0 if none */
};

struct func {
	const char *name, *since;
	json_object *j;
	void *fn;
	ffi_cif cif;
	ffi_type *args[MAX_PARAMS];
	ffi_type *ret;
	struct ctype rtype, ptype[MAX_PARAMS];
	int nparams, returns_status, called;
};

static struct {
	json_object *root, *statuses, *conv, *structs, *typedefs, *callbacks, *handles;
	const char *release, *prefix;
	struct func funcs[MAX_FUNCS];
	int nfuncs;
	int failures, checks, null_checks, scripted, generic;
	void *lib;
	/* live objects of the run */
	void *ctx, *region;
	uint64_t ptr;
	struct {
		const char *type;
		void *obj;
	} live[MAX_HANDLES]; /* other handles, made by their constructors */
	int nlive, npaths;
	char tmpdir[64]; /* paths for functions that take one (sockets) */
} H;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("ffi_harness: FAIL: ", stdout);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	H.failures++;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *get_str(json_object *o, const char *key)
{
	json_object *v = get(o, key);

	return v ? json_object_get_string(v) : NULL;
}

static const char *get_str_or(json_object *o, const char *key, const char *dflt)
{
	const char *v = get_str(o, key);

	return v ? v : dflt;
}

static int get_bool(json_object *o, const char *key)
{
	json_object *v = get(o, key);

	return v ? json_object_get_boolean(v) : 0;
}

static json_object *find_named(json_object *arr, const char *name)
{
	size_t i, n = arr ? json_object_array_length(arr) : 0;

	for (i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(arr, i);
		const char *nm = get_str(e, "name");

		if (nm && !strcmp(nm, name))
			return e;
	}
	return NULL;
}

/* ---- types and layouts ---------------------------------------------------- */

static int parse_type(const char *text, struct ctype *t)
{
	const char *s = text, *e;
	size_t n;

	memset(t, 0, sizeof(*t));
	if (!strncmp(s, "const ", 6))
		s += 6;
	e = s;
	while (*e && *e != '*' && *e != '[')
		e++;
	n = (size_t)(e - s);
	while (n && s[n - 1] == ' ')
		n--;
	if (!n || n >= sizeof(t->base))
		return -1;
	memcpy(t->base, s, n);
	for (; *e == '*' || *e == ' '; e++)
		t->depth += *e == '*';
	if (*e == '[')
		t->count = atoi(e + 1);
	return 0;
}

static const char *resolve_typedef(const char *base)
{
	json_object *td = find_named(H.typedefs, base);

	return td ? get_str(td, "type") : base;
}

/* Scalar: size and ffi type; 0 when base is not a scalar. */
static size_t scalar(const char *base, ffi_type **ft)
{
	static const struct {
		const char *name;
		size_t size;
		ffi_type *ft;
	} tab[] = {
		{ "char", 1, &ffi_type_schar },		 { "int", 4, &ffi_type_sint32 },
		{ "unsigned int", 4, &ffi_type_uint32 }, { "int8_t", 1, &ffi_type_sint8 },
		{ "uint8_t", 1, &ffi_type_uint8 },	 { "int16_t", 2, &ffi_type_sint16 },
		{ "uint16_t", 2, &ffi_type_uint16 },	 { "int32_t", 4, &ffi_type_sint32 },
		{ "uint32_t", 4, &ffi_type_uint32 },	 { "int64_t", 8, &ffi_type_sint64 },
		{ "uint64_t", 8, &ffi_type_uint64 },	 { "size_t", 8, &ffi_type_uint64 },
		{ "ssize_t", 8, &ffi_type_sint64 },
	};
	size_t i;

	base = resolve_typedef(base);
	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (!strcmp(tab[i].name, base)) {
			if (ft)
				*ft = tab[i].ft;
			return tab[i].size;
		}
	return 0;
}

static int is_signed(const char *base)
{
	base = resolve_typedef(base);
	return !strncmp(base, "int", 3) || !strcmp(base, "char") || !strcmp(base, "ssize_t");
}

static ffi_type *ffi_of(const struct ctype *t)
{
	ffi_type *ft = NULL;

	if (t->depth || find_named(H.callbacks, t->base))
		return &ffi_type_pointer;
	if (!strcmp(t->base, "void"))
		return &ffi_type_void;
	return scalar(t->base, &ft) ? ft : NULL;
}

struct field {
	size_t offset, size;
	struct ctype t;
};

static json_object *struct_of(const char *name)
{
	return find_named(H.structs, name);
}

static int layout_struct(json_object *s, size_t *size_out, size_t *align_out);

static int type_layout(const struct ctype *t, size_t *size, size_t *align)
{
	json_object *s;
	size_t n;

	if (t->depth || find_named(H.callbacks, t->base)) {
		*size = *align = sizeof(void *);
	} else if ((n = scalar(t->base, NULL))) {
		*size = *align = n;
	} else if ((s = struct_of(t->base))) {
		if (layout_struct(s, size, align))
			return -1;
	} else {
		return -1;
	}
	if (t->count)
		*size *= (size_t)t->count;
	return 0;
}

/* Field name of struct s: its offset and type; the struct's size at this release. */
static int layout_field(json_object *s, const char *name, struct field *out, size_t *total,
			size_t *total_align)
{
	json_object *fields = get(s, "fields");
	size_t i, n = fields ? json_object_array_length(fields) : 0, off = 0, align = 1;
	int found = 0;

	for (i = 0; i < n; i++) {
		json_object *f = json_object_array_get_idx(fields, i);
		struct ctype t;
		size_t sz, al;

		if (parse_type(get_str(f, "type"), &t) || type_layout(&t, &sz, &al))
			return -1;
		off = (off + al - 1) / al * al;
		if (name && !strcmp(get_str(f, "name"), name)) {
			out->offset = off;
			out->size = sz;
			out->t = t;
			found = 1;
		}
		off += sz;
		align = al > align ? al : align;
	}
	if (total)
		*total = (off + align - 1) / align * align;
	if (total_align)
		*total_align = align;
	return name && !found ? -1 : 0;
}

static int layout_struct(json_object *s, size_t *size_out, size_t *align_out)
{
	return layout_field(s, NULL, NULL, size_out, align_out);
}

static size_t struct_size(const char *name)
{
	json_object *s = struct_of(name);
	size_t size = 0;

	if (!s || layout_struct(s, &size, NULL)) {
		fail("struct %s: no layout", name);
		return 0;
	}
	return size;
}

/* A struct of this release's size at the start of a STRUCT_MAX buffer, canaries after it. */
struct sbuf {
	const char *name;
	size_t size;
	unsigned char bytes[STRUCT_MAX];
};

static void sbuf_init(struct sbuf *b, const char *name)
{
	b->name = name;
	b->size = struct_size(name);
	memset(b->bytes, CANARY, sizeof(b->bytes));
	memset(b->bytes, 0, b->size);
	memcpy(b->bytes, &b->size, sizeof(size_t));
}

static int sbuf_canary_ok(const struct sbuf *b, const char *after)
{
	size_t i;

	for (i = b->size; i < STRUCT_MAX; i++)
		if (b->bytes[i] != CANARY) {
			fail("%s: wrote byte %zu of a %zu-byte %s (this release's size)", after, i,
			     b->size, b->name);
			return 0;
		}
	return 1;
}

static uint64_t sbuf_get(const struct sbuf *b, const char *field)
{
	struct field f;
	uint64_t v = 0;

	if (layout_field(struct_of(b->name), field, &f, NULL, NULL) || f.size > 8) {
		fail("%s.%s: no such scalar field", b->name, field);
		return 0;
	}
	memcpy(&v, b->bytes + f.offset, f.size); /* little-endian */
	return v;
}

static const char *sbuf_str(const struct sbuf *b, const char *field)
{
	struct field f;

	if (layout_field(struct_of(b->name), field, &f, NULL, NULL)) {
		fail("%s.%s: no such field", b->name, field);
		return "";
	}
	return (const char *)b->bytes + f.offset;
}

static void sbuf_set(struct sbuf *b, const char *field, uint64_t v)
{
	struct field f;

	if (layout_field(struct_of(b->name), field, &f, NULL, NULL) || f.size > 8) {
		fail("%s.%s: no such scalar field", b->name, field);
		return;
	}
	memcpy(b->bytes + f.offset, &v, f.size);
}

/* ---- statuses ------------------------------------------------------------- */

static int status_value(const char *name, int32_t *out)
{
	json_object *s = find_named(H.statuses, name);

	if (!s)
		return -1;
	*out = (int32_t)json_object_get_int64(get(s, "value"));
	return 0;
}

static int32_t status_of(const char *name)
{
	int32_t v = 0;

	if (status_value(name, &v))
		fail("status %s is not in the description", name);
	return v;
}

static const char *status_name(int32_t v)
{
	size_t i, n = json_object_array_length(H.statuses);

	for (i = 0; i < n; i++) {
		json_object *s = json_object_array_get_idx(H.statuses, i);

		if (json_object_get_int64(get(s, "value")) == v)
			return get_str(s, "name");
	}
	return "(not a status of this release)";
}

static int in_list(json_object *arr, int32_t v)
{
	size_t i, n = arr ? json_object_array_length(arr) : 0;
	int32_t x;

	for (i = 0; i < n; i++)
		if (!status_value(json_object_get_string(json_object_array_get_idx(arr, i)), &x) &&
		    x == v)
			return 1;
	return 0;
}

/* The function's documented statuses: its own plus the conventions that apply. */
static int documented(const struct func *f, int32_t v)
{
	const char *forked = get_str(H.conv, "forked_status");
	int32_t fv;

	if (in_list(get(f->j, "statuses"), v) || in_list(get(H.conv, "any_call_statuses"), v))
		return 1;
	if (get_bool(f->j, "driver") && in_list(get(H.conv, "driver_statuses"), v))
		return 1;
	return get_bool(f->j, "forked") && forked && !status_value(forked, &fv) && fv == v;
}

/* ---- functions ------------------------------------------------------------- */

static struct func *func(const char *name)
{
	int i;

	for (i = 0; i < H.nfuncs; i++)
		if (!strcmp(H.funcs[i].name, name))
			return &H.funcs[i];
	fail("function %s is not in the description", name);
	return NULL;
}

static int prepare(struct func *f, json_object *j)
{
	json_object *params = get(j, "params"), *versions;
	char node[64];
	int i, n;

	f->j = j;
	f->name = get_str(j, "name");
	f->since = get_str(j, "since");
	f->nparams = (int)json_object_array_length(params);
	if (f->nparams > MAX_PARAMS || parse_type(get_str(get(j, "returns"), "type"), &f->rtype)) {
		fail("%s: cannot read its signature", f->name);
		return -1;
	}
	f->ret = ffi_of(&f->rtype);
	f->returns_status = !f->rtype.depth && !strcmp(f->rtype.base, "cms_status");
	for (i = 0; i < f->nparams; i++) {
		json_object *p = json_object_array_get_idx(params, i);

		if (parse_type(get_str(p, "type"), &f->ptype[i]) ||
		    !(f->args[i] = ffi_of(&f->ptype[i]))) {
			fail("%s: parameter %s has a type libffi cannot pass: %s", f->name,
			     get_str(p, "name"), get_str(p, "type"));
			return -1;
		}
	}
	if (!f->ret || ffi_prep_cif(&f->cif, FFI_DEFAULT_ABI, (unsigned)f->nparams, f->ret,
				    f->args) != FFI_OK) {
		fail("%s: ffi_prep_cif failed", f->name);
		return -1;
	}
	/* "versions": every symbol version of a function re-versioned after its first
	 * release (oldest first); each must resolve, and calls use the newest, as a program
	 * built against this release's header would. Without it: the node of "since". */
	versions = get(j, "versions");
	n = versions ? json_object_array_length(versions) : 0;
	for (i = 0; i < n || (!n && i == 0); i++) {
		const char *v = n ? json_object_get_string(json_object_array_get_idx(versions, i)) :
				    f->since;

		snprintf(node, sizeof(node), "%s%s", H.prefix, v);
		f->fn = dlvsym(H.lib, f->name, node);
		if (!f->fn) {
			fail("%s@%s: not found in the library (%s)", f->name, node, dlerror());
			return -1;
		}
	}
	return 0;
}

/* An argument slot: libffi gets a pointer to the value of each argument. */
union arg {
	void *p;
	int64_t i;
	uint64_t u;
	int32_t i32;
	uint32_t u32;
	unsigned char raw[8];
};

/* Calls f through libffi with the argument values in a[]; returns the raw result. */
static union arg call(struct func *f, union arg *a)
{
	void *values[MAX_PARAMS];
	ffi_arg rc = 0;
	union arg r;
	int i;

	memset(&r, 0, sizeof(r));
	if (!f)
		return r; /* not in the description: already reported */
	for (i = 0; i < f->nparams; i++)
		values[i] = &a[i];
	ffi_call(&f->cif, FFI_FN(f->fn), &rc, values);
	f->called = 1;
	if (f->ret == &ffi_type_pointer)
		r.p = (void *)(uintptr_t)rc;
	else if (f->ret != &ffi_type_void)
		r.i = f->ret->size == 4 && is_signed(f->rtype.base) ? (int64_t)(int32_t)rc :
								      (int64_t)rc;
	return r;
}

/* Calls a status-returning function; checks the status is documented and, want >= -1000,
 * that it is want. */
#define ANY (-100000)
static int32_t call_status(struct func *f, union arg *a, int32_t want, const char *what)
{
	int32_t st;

	if (!f)
		return ANY;
	if (!f->returns_status) {
		fail("%s: does not return cms_status", f->name);
		return ANY;
	}
	st = (int32_t)call(f, a).i;
	H.checks++;
	if (!documented(f, st))
		fail("%s (%s): returned %d %s, not in its documented statuses", f->name, what, st,
		     status_name(st));
	else if (want != ANY && st != want)
		fail("%s (%s): returned %s, want %s", f->name, what, status_name(st),
		     status_name(want));
	return st;
}

/* ---- arguments ---------------------------------------------------------------- */

struct arena {
	struct sbuf structs[MAX_PARAMS];
	uint64_t words[MAX_PARAMS][8];
	char text[MAX_PARAMS][128];
};

static int is_handle(const char *base)
{
	return find_named(get(H.root, "handles"), base) != NULL;
}

/* The run's object of handle type base, or NULL. */
static void *live_handle(const char *base)
{
	int i;

	if (!strcmp(base, "cms_context"))
		return H.ctx;
	if (!strcmp(base, "cms_region"))
		return H.region;
	for (i = 0; i < H.nlive; i++)
		if (!strcmp(H.live[i].type, base))
			return H.live[i].obj;
	return NULL;
}

/* A valid value for parameter i of f (the live context, region and allocation of the run). */
static void valid_arg(struct func *f, int i, union arg *a, struct arena *ar)
{
	json_object *p = json_object_array_get_idx(get(f->j, "params"), i);
	const struct ctype *t = &f->ptype[i];
	const char *name = get_str(p, "name");

	memset(a, 0, sizeof(*a));
	if (t->depth && get_bool(p, "nullable") &&
	    !strcmp(get_str_or(p, "ownership", ""), "consumed")) {
		a->p = NULL; /* never hand over the run's objects (destroy functions) */
	} else if (t->depth == 1 && !strcmp(t->base, "void") && !strcmp(name, "ptr")) {
		a->p = (void *)(uintptr_t)H.ptr; /* a device pointer */
	} else if (t->depth == 1 && is_handle(t->base)) {
		a->p = live_handle(t->base); /* NULL when none could be made */
	} else if (t->depth == 1 && struct_of(t->base)) {
		sbuf_init(&ar->structs[i], get_str(struct_of(t->base), "name"));
		a->p = ar->structs[i].bytes;
	} else if (t->depth == 1 && !strcmp(t->base, "char") && get(p, "length")) {
		a->p = ar->text[i];
	} else if (t->depth == 1 && !strcmp(t->base, "char") && !strcmp(name, "path")) {
		snprintf(ar->text[i], sizeof(ar->text[i]), "%s/p%d", H.tmpdir, H.npaths++);
		a->p = ar->text[i]; /* a fresh path in the run's directory */
	} else if (t->depth == 1 && !strcmp(t->base, "char")) {
		snprintf(ar->text[i], sizeof(ar->text[i]), "%s", "ffi");
		a->p = ar->text[i];
	} else if (t->depth >= 1) {
		if (get_bool(p, "nullable") && !strcmp(get_str(p, "dir"), "in"))
			a->p = NULL; /* an optional input (stream, user pointer) */
		else
			a->p = ar->words[i]; /* an out slot: a handle, a count, a pointer */
	} else if (!strcmp(name, "ptr")) {
		a->u = H.ptr;
	} else if (!strcmp(name, "size")) {
		a->i = (int64_t)MiB;
	} else if (!strcmp(name, "len") || !strcmp(name, "length")) {
		a->u = sizeof(ar->text[0]);
	} else {
		a->u = 0; /* device 0, status 0, flags 0 */
	}
}

static void valid_args(struct func *f, union arg *a, struct arena *ar)
{
	int i;

	for (i = 0; i < f->nparams; i++)
		valid_arg(f, i, &a[i], ar);
}

/* 1. NULL for every non-nullable pointer parameter. */
static void null_checks(void)
{
	static struct arena ar;
	union arg a[MAX_PARAMS];
	int fi, i;

	for (fi = 0; fi < H.nfuncs; fi++) {
		struct func *f = &H.funcs[fi];
		json_object *params = get(f->j, "params");

		for (i = 0; i < f->nparams; i++) {
			json_object *p = json_object_array_get_idx(params, i);
			char what[128];

			if (!f->ptype[i].depth || get_bool(p, "nullable"))
				continue;
			if (!f->returns_status) {
				fail("%s: non-nullable %s but no status to report it", f->name,
				     get_str(p, "name"));
				continue;
			}
			if (!in_list(get(f->j, "statuses"), status_of("CMS_ERR_INVALID_ARGUMENT")))
				fail("%s: non-nullable %s, but CMS_ERR_INVALID_ARGUMENT is not "
				     "among "
				     "its statuses",
				     f->name, get_str(p, "name"));
			valid_args(f, a, &ar);
			a[i].p = NULL;
			snprintf(what, sizeof(what), "%s NULL", get_str(p, "name"));
			call_status(f, a, status_of("CMS_ERR_INVALID_ARGUMENT"), what);
			H.null_checks++;
		}
	}
}

/* ---- 2. the scripted sequence ------------------------------------------------- */

#define A(...) ((union arg[]){ __VA_ARGS__ })
#define P(x)                     \
	{                        \
		.p = (void *)(x) \
	}
#define U(x)                       \
	{                          \
		.u = (uint64_t)(x) \
	}
#define I(x)                      \
	{                         \
		.i = (int64_t)(x) \
	}

static int32_t OK_, NOT_FOUND_, ALREADY_PAUSED_, NOT_PAUSED_;

/* options_init into a buffer of this release's size: fills it, writes nothing past it. */
static void init_options(struct sbuf *b, const char *sname)
{
	json_object *s = struct_of(sname);
	const char *init = s ? get_str(s, "init") : NULL;

	sbuf_init(b, sname);
	if (!init) {
		fail("struct %s has no init function", sname);
		return;
	}
	memset(b->bytes, 0, sizeof(size_t)); /* the init function sets it */
	H.scripted++;
	call_status(func(init), A(P(b->bytes)), OK_, "release-size buffer");
	if (sbuf_canary_ok(b, init) && sbuf_get(b, "struct_size") != b->size)
		fail("%s: struct_size %llu, this release's size is %zu", init,
		     (unsigned long long)sbuf_get(b, "struct_size"), b->size);
}

static void scripted(void)
{
	struct sbuf ctx_o, reg_o, pause_o, resume_o, info, pinfo, presult, rresult;
	uint64_t free_b = 0, total_b = 0, versions;
	const char *s;
	void *found = NULL, *ctx = NULL, *region = NULL;
	json_object *c;
	size_t i, n;
	char buf[16];

	/* versions, status names of every status of the release, errors */
	versions = call(func("cms_version"), NULL).u & 0xffffffffu;
	c = find_named(get(H.root, "constants"), "CMS_VERSION_NUMBER");
	if (!c || versions < (uint64_t)json_object_get_int64(get(c, "value")) ||
	    versions >> 16 != (uint64_t)json_object_get_int64(get(c, "value")) >> 16)
		fail("cms_version 0x%llx: older than or another major than the description's",
		     (unsigned long long)versions);
	s = call(func("cms_version_string"), NULL).p;
	if (!s || strncmp(s, "1.", 2))
		fail("cms_version_string: %s", s ? s : "NULL");
	n = json_object_array_length(H.statuses);
	for (i = 0; i < n; i++) {
		json_object *st = json_object_array_get_idx(H.statuses, i);
		union arg v = { .i = json_object_get_int64(get(st, "value")) };

		s = call(func("cms_status_name"), &v).p;
		if (!s || strcmp(s, get_str(st, "name")))
			fail("cms_status_name(%lld) = %s, the description says %s", (long long)v.i,
			     s ? s : "NULL", get_str(st, "name"));
		s = call(func("cms_status_string"), &v).p;
		if (!s || !s[0])
			fail("cms_status_string(%lld): empty", (long long)v.i);
		H.scripted += 2;
	}
	if (!call(func("cms_last_error"), NULL).p)
		fail("cms_last_error returned NULL");
	call(func("cms_last_error_message"), A(P(buf), U(sizeof(buf))));
	H.scripted += 4;

	/* context, device, region */
	init_options(&ctx_o, "cms_context_options");
	init_options(&reg_o, "cms_region_options");
	init_options(&pause_o, "cms_pause_options");
	init_options(&resume_o, "cms_resume_options");
	call_status(func("cms_context_create"), A(P(ctx_o.bytes), P(&ctx)), OK_, "valid");
	if (!ctx)
		return;
	call_status(func("cms_device_memory_info"), A(P(ctx), I(0), P(&free_b), P(&total_b)), OK_,
		    "device 0");
	if (!total_b || free_b > total_b)
		fail("cms_device_memory_info: free %llu of %llu", (unsigned long long)free_b,
		     (unsigned long long)total_b);
	sbuf_set(&reg_o, "policy", 2); /* CMS_POLICY_HOST */
	call_status(func("cms_region_create"),
		    A(P(ctx), P("ffi-script"), P(reg_o.bytes), P(&region)), OK_, "HOST region");
	call_status(func("cms_region_find"), A(P(ctx), P("ffi-script"), I(0), P(&found)), OK_,
		    "its tag");
	if (found != region)
		fail("cms_region_find: another handle");
	sbuf_init(&info, "cms_region_info");
	call_status(func("cms_region_info_get"), A(P(region), P(info.bytes)), OK_, "release size");
	sbuf_canary_ok(&info, "cms_region_info_get");
	if (strcmp(sbuf_str(&info, "tag"), "ffi-script") || sbuf_get(&info, "policy") != 2)
		fail("cms_region_info_get: tag \"%s\" policy %llu", sbuf_str(&info, "tag"),
		     (unsigned long long)sbuf_get(&info, "policy"));

	/* allocation, pause, resume */
	H.ptr = 0;
	call_status(func("cms_alloc"), A(P(region), U(3 * MiB), P(&H.ptr)), OK_, "3 MiB");
	sbuf_init(&pinfo, "cms_pointer_info");
	call_status(func("cms_pointer_info_get"), A(P(ctx), U(H.ptr + 7), P(pinfo.bytes)), OK_,
		    "inside the allocation");
	sbuf_canary_ok(&pinfo, "cms_pointer_info_get");
	if (sbuf_get(&pinfo, "base") != H.ptr || sbuf_get(&pinfo, "offset") != 7 ||
	    sbuf_get(&pinfo, "size") != 3 * MiB)
		fail("cms_pointer_info_get: wrong base, offset or size");
	sbuf_init(&presult, "cms_pause_result");
	call_status(func("cms_pause"),
		    A(P(ctx), P("ffi-script"), P(pause_o.bytes), P(presult.bytes)), OK_, "its tag");
	sbuf_canary_ok(&presult, "cms_pause");
	if (sbuf_get(&presult, "regions") != 1 || sbuf_get(&presult, "allocations") != 1)
		fail("cms_pause: result counts");
	call_status(func("cms_region_pause"), A(P(region), P(NULL), P(NULL)), ALREADY_PAUSED_,
		    "paused region");
	sbuf_init(&rresult, "cms_resume_result");
	call_status(func("cms_resume"),
		    A(P(ctx), P("ffi-script"), P(resume_o.bytes), P(rresult.bytes)), OK_,
		    "its tag");
	sbuf_canary_ok(&rresult, "cms_resume");
	if (sbuf_get(&rresult, "allocations") != 1)
		fail("cms_resume: result counts");
	call_status(func("cms_region_resume"), A(P(region), P(NULL), P(NULL)), NOT_PAUSED_,
		    "active region");
	call_status(func("cms_region_pause"), A(P(region), P(pause_o.bytes), P(NULL)), OK_,
		    "active region");
	call_status(func("cms_region_resume"), A(P(region), P(resume_o.bytes), P(NULL)), OK_,
		    "paused region");
	sbuf_init(&info, "cms_region_info");
	call_status(func("cms_region_info_get"), A(P(region), P(info.bytes)), OK_,
		    "after 2 cycles");
	if (sbuf_get(&info, "epoch") != 2)
		fail("cms_region_info_get: epoch %llu after two resumes",
		     (unsigned long long)sbuf_get(&info, "epoch"));
	call_status(func("cms_free"), A(P(ctx), U(H.ptr)), OK_, "its allocation");
	call_status(func("cms_free"), A(P(ctx), U(H.ptr)), NOT_FOUND_, "freed already");
	call_status(func("cms_region_destroy"), A(P(region)), OK_, "empty region");
	call_status(func("cms_region_destroy"), A(P(NULL)), OK_, "NULL");
	call_status(func("cms_context_destroy"), A(P(ctx)), OK_, "valid");
	call_status(func("cms_context_destroy"), A(P(NULL)), OK_, "NULL");
	H.scripted += 21;
}

/* ---- 3. every other function, once ----------------------------------------- */

/* Gives back what a generic call made: caller-owned handles and returned pointers. */
static void release_outputs(struct func *f, union arg *a, union arg r, struct arena *ar)
{
	json_object *params = get(f->j, "params"), *ret = get(f->j, "returns");
	const char *rel;
	union arg b[MAX_PARAMS];
	int i;

	for (i = 0; i < f->nparams; i++) {
		json_object *p = json_object_array_get_idx(params, i);
		json_object *h = find_named(get(H.root, "handles"), f->ptype[i].base);
		void *obj;

		if (f->ptype[i].depth != 2 || !h || !a[i].p ||
		    strcmp(get_str_or(p, "ownership", ""), "caller-owned"))
			continue;
		obj = *(void **)a[i].p;
		if (!obj)
			continue;
		rel = get_str(h, "release");
		if (!rel || !func(rel))
			continue;
		valid_args(func(rel), b, ar);
		b[0].p = obj;
		call(func(rel), b);
	}
	rel = get_str(ret, "release");
	if (f->rtype.depth && r.p && rel && func(rel)) {
		valid_args(func(rel), b, ar);
		b[0].p = r.p;
		call(func(rel), b);
	}
}

static void generic_calls(void)
{
	static struct arena ar;
	union arg a[MAX_PARAMS], r;
	int32_t want;
	int fi, i;

	for (fi = 0; fi < H.nfuncs; fi++) {
		struct func *f = &H.funcs[fi];
		json_object *params = get(f->j, "params");
		int handed_over = 0;

		if (f->called)
			continue;
		for (i = 0; i < f->nparams; i++) {
			json_object *p = json_object_array_get_idx(params, i);

			handed_over |= !strcmp(get_str_or(p, "ownership", ""), "consumed") &&
				       !get_bool(p, "nullable") &&
				       find_named(get(H.root, "handles"), f->ptype[i].base);
		}
		if (handed_over) {
			fail("%s: takes a handle over; give it a scripted call", f->name);
			continue;
		}
		valid_args(f, a, &ar);
		for (i = 0, want = ANY; i < f->nparams; i++)
			if (f->ptype[i].depth && !a[i].p &&
			    !get_bool(json_object_array_get_idx(params, i), "nullable"))
				want = status_of(
					"CMS_ERR_INVALID_ARGUMENT"); /* no such handle made */
		if (f->returns_status) {
			r.i = call_status(f, a, want,
					  want == ANY ? "valid arguments" : "no handle");
		} else {
			r = call(f, a);
			if (f->rtype.depth && !get_bool(get(f->j, "returns"), "nullable") && !r.p)
				fail("%s: returned NULL, documented non-NULL", f->name);
		}
		if (!f->returns_status || r.i == OK_)
			release_outputs(f, a, r, &ar);
		H.generic++;
	}
}

/* ---- main --------------------------------------------------------------- */

static int load(const char *path, const char *lib)
{
	json_object *rel, *funcs;
	size_t i, n;

	H.root = json_object_from_file(path);
	if (!H.root) {
		fail("%s: cannot read: %s", path, json_util_get_last_err());
		return -1;
	}
	rel = get(H.root, "releases");
	funcs = get(H.root, "functions");
	H.statuses = get(H.root, "statuses");
	H.conv = get(H.root, "conventions");
	H.structs = get(H.root, "structs");
	H.typedefs = get(H.root, "typedefs");
	H.callbacks = get(H.root, "callbacks");
	H.prefix = get_str_or(H.root, "node_prefix", "CMS_");
	if (!rel || !funcs || !H.statuses || !H.structs || !json_object_array_length(rel)) {
		fail("%s: not an ABI description", path);
		return -1;
	}
	H.release = json_object_get_string(
		json_object_array_get_idx(rel, json_object_array_length(rel) - 1));
	H.lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!H.lib) {
		fail("dlopen %s: %s", lib, dlerror());
		return -1;
	}
	n = json_object_array_length(funcs);
	if (n > MAX_FUNCS) {
		fail("%zu functions: raise MAX_FUNCS", n);
		return -1;
	}
	for (i = 0; i < n; i++)
		prepare(&H.funcs[H.nfuncs++], json_object_array_get_idx(funcs, i));
	OK_ = status_of("CMS_OK");
	NOT_FOUND_ = status_of("CMS_ERR_NOT_FOUND");
	ALREADY_PAUSED_ = status_of("CMS_ERR_ALREADY_PAUSED");
	NOT_PAUSED_ = status_of("CMS_ERR_NOT_PAUSED");
	return H.failures ? -1 : 0;
}

/*
 * One object of every other handle type, made by its constructor (the function with a
 * caller-owned `T **` out parameter) with valid arguments; a constructor that fails is
 * fine (its status must be documented): functions needing that handle then get NULL.
 */
static void make_handles(void)
{
	json_object *handles = get(H.root, "handles");
	static struct arena ar;
	union arg a[MAX_PARAMS];
	size_t hi, nh = handles ? json_object_array_length(handles) : 0;
	int32_t st;
	int fi, i;

	H.nlive = 0;
	for (hi = 0; hi < nh && H.nlive < MAX_HANDLES; hi++) {
		const char *type = get_str(json_object_array_get_idx(handles, hi), "name");

		if (!strcmp(type, "cms_context") || !strcmp(type, "cms_region"))
			continue;
		for (fi = 0; fi < H.nfuncs; fi++) {
			struct func *f = &H.funcs[fi];
			int out = -1;

			for (i = 0; i < f->nparams; i++)
				if (f->ptype[i].depth == 2 && !strcmp(f->ptype[i].base, type) &&
				    !strcmp(get_str_or(json_object_array_get_idx(
							       get(f->j, "params"), i),
						       "ownership", ""),
					    "caller-owned"))
					out = i;
			if (out < 0 || !f->returns_status)
				continue;
			valid_args(f, a, &ar);
			st = call_status(f, a, ANY, "constructor");
			if (st == OK_ && ar.words[out][0]) {
				H.live[H.nlive].type = type;
				H.live[H.nlive++].obj = (void *)(uintptr_t)ar.words[out][0];
			}
			printf("ffi_harness: %s from %s: %s\n", type, f->name, status_name(st));
			break;
		}
	}
}

/* The live objects the NULL checks and the generic calls pass as valid arguments. */
static int setup(void)
{
	struct sbuf reg_o;

	if (call_status(func("cms_context_create"), A(P(NULL), P(&H.ctx)), OK_, "setup") != OK_)
		return -1;
	sbuf_init(&reg_o, "cms_region_options");
	if (call_status(func("cms_region_create"),
			A(P(H.ctx), P("ffi"), P(reg_o.bytes), P(&H.region)), OK_, "setup") != OK_)
		return -1;
	make_handles();
	return call_status(func("cms_alloc"), A(P(H.region), U(MiB), P(&H.ptr)), OK_, "setup") ==
			       OK_ ?
		       0 :
		       -1;
}

static void teardown(void)
{
	union arg b[MAX_PARAMS];
	static struct arena ar;
	struct func *rel;

	while (H.nlive > 0) { /* newest first: an import before its exporter */
		H.nlive--;
		rel = func(get_str(find_named(get(H.root, "handles"), H.live[H.nlive].type),
				   "release"));
		if (!rel)
			continue;
		valid_args(rel, b, &ar);
		b[0].p = H.live[H.nlive].obj;
		call_status(rel, b, OK_, "teardown");
	}
	call_status(func("cms_context_destroy"), A(P(H.ctx)), OK_, "teardown");
	H.ctx = H.region = NULL;
	H.ptr = 0;
}

/* Removes the run's directory and what the library left there (sockets). */
static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[384];

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	int i;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DESCRIPTION.json LIBRARY.so\n", argv[0]);
		return 2;
	}
	if (!getenv("CMS_DRIVER_LIBRARY")) {
		printf("ffi_harness: CMS_DRIVER_LIBRARY is not set; skipped\n");
		return 77;
	}
	snprintf(H.tmpdir, sizeof(H.tmpdir), "/tmp/cms-ffi-XXXXXX");
	if (!mkdtemp(H.tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (load(argv[1], argv[2]) == 0 && setup() == 0) {
		null_checks();
		teardown();
		for (i = 0; i < H.nfuncs; i++)
			H.funcs[i].called = 0;
		scripted();
		for (i = 0; i < H.nfuncs; i++)
			if (!H.funcs[i].called && !strcmp(H.funcs[i].since, "1.0"))
				fail("%s: a 1.0 function the scripted sequence left out",
				     H.funcs[i].name);
		if (setup() == 0) {
			generic_calls(); /* the functions of later releases */
			teardown();
		}
	}
	printf("ffi_harness %s: %d functions resolved by versioned name, %d NULL-argument checks, "
	       "%d scripted calls, %d generic calls, %d statuses checked: %s\n",
	       H.release ? H.release : "?", H.nfuncs, H.null_checks, H.scripted, H.generic,
	       H.checks, H.failures ? "FAILED" : "ok");
	if (H.root)
		json_object_put(H.root);
	remove_tree(H.tmpdir);
	return H.failures ? 1 : 0;
}
