/* SPDX-License-Identifier: MIT */
/*
 * cmsctl_stats.c - `cmsctl --socket PATH [--json] stats [--prometheus]` and
 * `cmsctl --socket PATH metrics`: the cumulative counters of a process's
 * regions (cms_region_list, since 1.2) over its control socket, as a table,
 * JSON (schema_version CMSCTL_JSON_SCHEMA) or the Prometheus text exposition
 * format (version 0.0.4). A process whose library predates 1.2 refuses the
 * request; cmsctl then says so (exit status 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmsctl.h"
#include "cumemsaver.h"
#include "ipc_sock.h"

/* One counter of the exposition: how to read it from an entry. */
struct metric {
	const char *name, *type, *help;
	double (*get)(const struct cms_ipc_region_stats *s);
};

#define U64(field)                                                      \
	static double get_##field(const struct cms_ipc_region_stats *s) \
	{                                                               \
		return (double)s->field;                                \
	}
U64(pauses)
U64(resumes)
U64(swaps)
U64(bytes_released)
U64(bytes_backed)
U64(bytes_to_store)
U64(bytes_from_store)
static double get_pause_s(const struct cms_ipc_region_stats *s)
{
	return (double)s->pause_ns / 1e9;
}
static double get_resume_s(const struct cms_ipc_region_stats *s)
{
	return (double)s->resume_ns / 1e9;
}
static double get_paused(const struct cms_ipc_region_stats *s)
{
	return s->state == CMS_STATE_PAUSED;
}

static const struct metric metrics[] = {
	{ "cumemsaver_region_pauses_total", "counter", "Committed pauses of the region.",
	  get_pauses },
	{ "cumemsaver_region_resumes_total", "counter", "Committed resumes of the region.",
	  get_resumes },
	{ "cumemsaver_region_swaps_total", "counter",
	  "Pauses and resumes of the region made by cms_swap.", get_swaps },
	{ "cumemsaver_region_released_bytes_total", "counter",
	  "Physical bytes released by the region's pauses.", get_bytes_released },
	{ "cumemsaver_region_backed_bytes_total", "counter",
	  "Physical bytes created and mapped by the region's resumes.", get_bytes_backed },
	{ "cumemsaver_region_store_written_bytes_total", "counter",
	  "Content bytes the region's pauses copied to its store (host memory or disk).",
	  get_bytes_to_store },
	{ "cumemsaver_region_store_read_bytes_total", "counter",
	  "Content bytes the region's resumes copied back from its store.", get_bytes_from_store },
	{ "cumemsaver_region_pause_seconds_total", "counter",
	  "Time of the device work of the calls that paused the region.", get_pause_s },
	{ "cumemsaver_region_resume_seconds_total", "counter",
	  "Time of the device work of the calls that resumed the region.", get_resume_s },
	{ "cumemsaver_region_paused", "gauge", "1 while the region is paused, else 0.",
	  get_paused },
};

static void prom_labels(FILE *f, const struct cms_ipc_region_stats *s)
{
	fputs("{tag=\"", f);
	tool_prom_label(f, s->tag);
	fprintf(f, "\",device=\"%d\",policy=\"%s\"", s->device, cmsctl_policy_name(s->policy));
}

static void print_prometheus(FILE *f, const struct cms_ipc_msg *m)
{
	uint32_t i, k;
	size_t j;

	for (j = 0; j < sizeof(metrics) / sizeof(metrics[0]); j++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", metrics[j].name, metrics[j].help,
			metrics[j].name, metrics[j].type);
		for (i = 0; i < m->nstats; i++) {
			fputs(metrics[j].name, f);
			prom_labels(f, &m->stats[i]);
			fputs("} ", f);
			tool_print_double(f, metrics[j].get(&m->stats[i]));
			fputc('\n', f);
		}
	}
	fputs("# HELP cumemsaver_region_failures_total Failed pause, resume and swap calls that "
	      "were to change the region, by status.\n"
	      "# TYPE cumemsaver_region_failures_total counter\n",
	      f);
	for (i = 0; i < m->nstats; i++)
		for (k = 0; k < CMS_IPC_STATS_SLOTS; k++) {
			if (!m->stats[i].failures_by_status[k])
				continue;
			fputs("cumemsaver_region_failures_total", f);
			prom_labels(f, &m->stats[i]);
			fprintf(f, ",status=\"%s\"} %llu\n",
				k ? cms_status_name(-(cms_status)k) : "other",
				(unsigned long long)m->stats[i].failures_by_status[k]);
		}
}

static void print_json(FILE *f, const struct cms_ipc_msg *m)
{
	uint32_t i, k;

	fprintf(f, "{\"schema_version\": %d, \"status\": \"CMS_OK\", \"regions\": [",
		CMSCTL_JSON_SCHEMA);
	for (i = 0; i < m->nstats; i++) {
		const struct cms_ipc_region_stats *s = &m->stats[i];
		const char *sep = "";

		fprintf(f, "%s\n  {\"tag\": ", i ? "," : "");
		tool_json_str(f, s->tag);
		fprintf(f,
			", \"device\": %d, \"policy\": \"%s\", \"state\": \"%s\", "
			"\"region_id\": %llu, \"pauses\": %llu, \"resumes\": %llu, \"swaps\": "
			"%llu, "
			"\"failures\": %llu, \"failures_by_status\": {",
			s->device, cmsctl_policy_name(s->policy), cmsctl_state_name(s->state),
			(unsigned long long)s->region_id, (unsigned long long)s->pauses,
			(unsigned long long)s->resumes, (unsigned long long)s->swaps,
			(unsigned long long)s->failures);
		for (k = 0; k < CMS_IPC_STATS_SLOTS; k++)
			if (s->failures_by_status[k]) {
				fprintf(f, "%s\"%s\": %llu", sep,
					k ? cms_status_name(-(cms_status)k) : "other",
					(unsigned long long)s->failures_by_status[k]);
				sep = ", ";
			}
		fprintf(f,
			"}, \"bytes_released\": %llu, \"bytes_backed\": %llu, "
			"\"bytes_to_store\": %llu, \"bytes_from_store\": %llu, \"pause_ns\": %llu, "
			"\"resume_ns\": %llu}",
			(unsigned long long)s->bytes_released, (unsigned long long)s->bytes_backed,
			(unsigned long long)s->bytes_to_store,
			(unsigned long long)s->bytes_from_store, (unsigned long long)s->pause_ns,
			(unsigned long long)s->resume_ns);
	}
	fprintf(f, "%s]}\n", m->nstats ? "\n" : "");
}

static void print_table(FILE *f, const struct cms_ipc_msg *m)
{
	char b1[32], b2[32], b3[32];
	uint32_t i;

	fprintf(f, "%-20s %6s %-8s %-7s %7s %7s %6s %8s %12s %12s %12s %10s %10s\n", "tag",
		"device", "policy", "state", "pauses", "resumes", "swaps", "failures", "released",
		"to store", "from store", "pause ms", "resume ms");
	for (i = 0; i < m->nstats; i++) {
		const struct cms_ipc_region_stats *s = &m->stats[i];

		fprintf(f,
			"%-20s %6d %-8s %-7s %7llu %7llu %6llu %8llu %12s %12s %12s %10.3f "
			"%10.3f\n",
			s->tag, s->device, cmsctl_policy_name(s->policy),
			cmsctl_state_name(s->state), (unsigned long long)s->pauses,
			(unsigned long long)s->resumes, (unsigned long long)s->swaps,
			(unsigned long long)s->failures,
			tool_format_bytes(b1, sizeof(b1), s->bytes_released),
			tool_format_bytes(b2, sizeof(b2), s->bytes_to_store),
			tool_format_bytes(b3, sizeof(b3), s->bytes_from_store),
			(double)s->pause_ns / 1e6, (double)s->resume_ns / 1e6);
	}
	if (!m->nstats)
		fprintf(f, "(no regions)\n");
}

/* Sends the stats request and receives the reply into *m; why on failure. */
static cms_status exchange(const char *path, unsigned timeout_s, struct cms_ipc_msg *m, char *why,
			   size_t whylen)
{
	struct cms_ipc_msg q;
	int fd;
	int64_t deadline;
	cms_status st;

	memset(&q, 0, sizeof(q));
	q.type = CMS_IPC_CTL_REQUEST;
	q.op = CMS_IPC_OP_STATS;
	st = cmsctl_connect(path, &fd, why, whylen);
	if (st)
		return st;
	deadline = cms_ipc_now_ms() + (int64_t)timeout_s * 1000;
	st = cms_ipc_send(fd, &q, NULL, deadline, why, whylen);
	if (!st)
		st = cms_ipc_recv(fd, m, NULL, deadline, why, whylen); /* any descriptor: closed */
	close(fd);
	if (st)
		return st;
	if (m->type == CMS_IPC_ERROR && m->status == CMS_ERR_PROTOCOL) {
		snprintf(why, whylen,
			 "the process's cumemsaver predates 1.2 and has no stats (it answered: %s)",
			 m->text);
		st = CMS_ERR_NOT_SUPPORTED;
	} else if (m->type == CMS_IPC_ERROR || (m->type == CMS_IPC_CTL_STATS && m->status)) {
		snprintf(why, whylen, "%s", m->text);
		st = m->status;
	} else if (m->type != CMS_IPC_CTL_STATS) {
		snprintf(why, whylen, "unexpected message type %u", m->type);
		st = CMS_ERR_PROTOCOL;
	}
	if (st)
		cms_ipc_msg_free(m);
	return st;
}

int cmsctl_stats(const struct cmsctl_remote_opts *o, int argc, char **argv)
{
	int json = o->json;
	int prometheus = !strcmp(argv[0], "metrics");
	char why[CMS_IPC_MAX_TEXT + 128];
	struct cms_ipc_msg m;
	cms_status st;

	if (argc == 2 && !prometheus && !strcmp(argv[1], "--prometheus"))
		prometheus = 1;
	else if (argc != 1) {
		fprintf(stderr, "usage: cmsctl --socket PATH [--json] [--timeout SECONDS] stats "
				"[--prometheus] | metrics\n");
		return 2;
	}
	if (prometheus && json) {
		fprintf(stderr, "cmsctl: --json and the Prometheus format exclude each other\n");
		return 2;
	}
	memset(&m, 0, sizeof(m));
	st = exchange(o->socket, o->timeout_s, &m, why, sizeof(why));
	if (st) {
		if (json) {
			printf("{\"schema_version\": %d, \"status\": \"%s\", \"op\": \"%s\", "
			       "\"tag\": \"\", \"message\": ",
			       CMSCTL_JSON_SCHEMA, cms_status_name(st), argv[0]);
			tool_json_str(stdout, why);
			printf("}\n");
		}
		fprintf(stderr, "cmsctl: stats: %s: %s\n", cms_status_name(st), why);
		return 1;
	}
	if (prometheus)
		print_prometheus(stdout, &m);
	else if (json)
		print_json(stdout, &m);
	else
		print_table(stdout, &m);
	cms_ipc_msg_free(&m);
	return 0;
}
