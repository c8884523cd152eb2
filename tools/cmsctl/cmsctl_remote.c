/* SPDX-License-Identifier: MIT */
/*
 * cmsctl_remote.c - `cmsctl --socket PATH [--json] [--timeout SECONDS] status |
 * pause TAG | resume TAG`: a client of a process's control socket
 * (cms_control_create). Progress lines go to stderr, the result to stdout (a
 * table, or one JSON object with --json); the exit status is 0 on success, 1
 * when the socket cannot be reached or the process answers with an error (its
 * message on stderr), 2 for a usage error. With --json every outcome, errors
 * included, is one object carrying "schema_version" (CMSCTL_JSON_SCHEMA) and
 * "status"; an error object has "op", "tag" and "message" as well.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmsctl.h"
#include "cumemsaver.h"
#include "ipc_sock.h"

int cmsctl_is_remote_command(const char *cmd)
{
	static const char *const remote[] = { "status", "pause", "resume", "stats", "metrics" };
	size_t i;

	for (i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
		if (!strcmp(cmd, remote[i]))
			return 1;
	return 0;
}

cms_status cmsctl_connect(const char *path, int *fd, char *why, size_t whylen)
{
	cms_status st = cms_ipc_connect(path, fd, why, whylen);
	struct stat sb;

	if (st == CMS_ERR_NOT_FOUND && !stat(path, &sb) && !S_ISSOCK(sb.st_mode)) {
		snprintf(why, whylen,
			 "%s is not a socket (it is a %s): give the path the process "
			 "passed to cms_control_create",
			 path,
			 S_ISDIR(sb.st_mode) ? "directory" :
			 S_ISREG(sb.st_mode) ? "regular file" :
					       "file of another type");
		st = CMS_ERR_INVALID_ARGUMENT;
	}
	return st;
}

const char *cmsctl_state_name(uint32_t s)
{
	return s == CMS_STATE_PAUSED ? "paused" : "active";
}

/* Indexed by CMS_POLICY_*: what the table and the JSON call each restore policy. */
static const char *const policy_names[] = {
	[CMS_POLICY_DISCARD] = "discard",
	[CMS_POLICY_ZERO] = "zero",
	[CMS_POLICY_HOST] = "host",
	[CMS_POLICY_DISK] = "disk",
};

const char *cmsctl_policy_name(uint32_t p)
{
	if (p < sizeof(policy_names) / sizeof(policy_names[0]) && policy_names[p])
		return policy_names[p];
	return "unknown";
}

/* The start of every JSON object cmsctl prints: {"schema_version": N, "status": "..." */
static void json_open(cms_status st)
{
	printf("{\"schema_version\": %d, \"status\": \"%s\"", CMSCTL_JSON_SCHEMA,
	       cms_status_name(st));
}

static void json_error(cms_status st, const char *op, const char *tag, const char *message)
{
	json_open(st);
	printf(", \"op\": ");
	tool_json_str(stdout, op);
	printf(", \"tag\": ");
	tool_json_str(stdout, tag);
	printf(", \"message\": ");
	tool_json_str(stdout, message);
	printf("}\n");
}

static void print_status(const struct cms_ipc_msg *m, int json)
{
	char b1[32], b2[32];
	uint32_t i;

	if (json) {
		json_open(m->status);
		printf(", \"regions\": [");
		for (i = 0; i < m->nregions; i++) {
			const struct cms_ipc_region_status *r = &m->regions[i];

			printf("%s\n  {\"tag\": ", i ? "," : "");
			tool_json_str(stdout, r->tag);
			printf(", \"device\": %d, \"policy\": \"%s\", \"state\": \"%s\", "
			       "\"allocations\": %llu, \"logical_bytes\": %llu, "
			       "\"physical_bytes\": "
			       "%llu, \"backed_bytes\": %llu, \"epoch\": %llu, \"importers\": %u}",
			       r->device, cmsctl_policy_name(r->policy),
			       cmsctl_state_name(r->state), (unsigned long long)r->allocations,
			       (unsigned long long)r->logical_bytes,
			       (unsigned long long)r->physical_bytes,
			       (unsigned long long)r->backed_bytes, (unsigned long long)r->epoch,
			       r->importers);
		}
		printf("%s]}\n", m->nregions ? "\n" : "");
		return;
	}
	printf("%-20s %6s %-8s %-7s %8s %12s %12s %6s %9s\n", "tag", "device", "policy", "state",
	       "allocs", "physical", "backed", "epoch", "importers");
	for (i = 0; i < m->nregions; i++) {
		const struct cms_ipc_region_status *r = &m->regions[i];

		printf("%-20s %6d %-8s %-7s %8llu %12s %12s %6llu %9u\n", r->tag, r->device,
		       cmsctl_policy_name(r->policy), cmsctl_state_name(r->state),
		       (unsigned long long)r->allocations,
		       tool_format_bytes(b1, sizeof(b1), r->physical_bytes),
		       tool_format_bytes(b2, sizeof(b2), r->backed_bytes),
		       (unsigned long long)r->epoch, r->importers);
	}
	if (!m->nregions)
		printf("(no regions)\n");
}

static void print_action(const struct cms_ipc_msg *m, const char *op, const char *tag, int json)
{
	char b1[32], b2[32], b3[32];

	if (json) {
		json_open(m->status);
		printf(", \"op\": ");
		tool_json_str(stdout, op);
		printf(", \"tag\": ");
		tool_json_str(stdout, tag);
		printf(", \"message\": ");
		tool_json_str(stdout, m->text);
		printf(", \"bytes\": %llu, \"elapsed_ms\": %.3f", (unsigned long long)m->bytes,
		       (double)m->elapsed_ns / 1e6);
		/* the driver's free memory is measured around a pause only (control.c): null
		 * after a resume, not 0 */
		if (!strcmp(op, "pause"))
			printf(", \"driver_free_before\": %llu, \"driver_free_after\": %llu",
			       (unsigned long long)m->driver_free_before,
			       (unsigned long long)m->driver_free_after);
		else
			printf(", \"driver_free_before\": null, \"driver_free_after\": null");
		printf("}\n");
		return;
	}
	if (m->status)
		return;
	if (!strcmp(op, "pause"))
		printf("paused \"%s\": %s released in %.3f ms (driver free %s -> %s)\n", tag,
		       tool_format_bytes(b1, sizeof(b1), m->bytes), (double)m->elapsed_ns / 1e6,
		       tool_format_bytes(b2, sizeof(b2), m->driver_free_before),
		       tool_format_bytes(b3, sizeof(b3), m->driver_free_after));
	else
		printf("resumed \"%s\": %s backed in %.3f ms\n", tag,
		       tool_format_bytes(b1, sizeof(b1), m->bytes), (double)m->elapsed_ns / 1e6);
}

/* Whether tag cannot go in a request for op (needed: pause and resume name one); why says so,
 * the tag quoted with its control characters shown as '?'. */
static bool tag_refused(const char *op, const char *tag, bool needed, char *why, size_t len)
{
	char shown[CMS_TAG_MAX + 1];
	size_t i, n = strlen(tag);

	if (n > CMS_TAG_MAX) {
		snprintf(why, len, "tag longer than %d bytes", CMS_TAG_MAX);
		return true;
	}
	if (!n && needed) {
		snprintf(why, len,
			 "%s: the tag is empty; name the tag of the regions to %s (status lists "
			 "them)",
			 op, op);
		return true;
	}
	for (i = 0; i < n && (unsigned char)tag[i] >= 0x20 && tag[i] != 0x7f; i++)
		;
	if (i == n)
		return false;
	for (i = 0; i <= n; i++)
		shown[i] =
			tag[i] && ((unsigned char)tag[i] < 0x20 || tag[i] == 0x7f) ? '?' : tag[i];
	snprintf(why, len, "%s: the tag \"%s\" holds a control character", op, shown);
	return true;
}

int cmsctl_remote(const struct cmsctl_remote_opts *o, int argc, char **argv)
{
	struct cms_ipc_msg q, m;
	const char *op = argc > 0 ? argv[0] : "";
	const char *tag = argc > 1 ? argv[1] : "";
	int fd, rc = 1, json = o->json;
	int64_t deadline;
	char why[CMS_IPC_MAX_TEXT + 64];
	cms_status st;

	if (!strcmp(op, "stats") || !strcmp(op, "metrics")) /* since 1.2: cmsctl_stats.c */
		return cmsctl_stats(o, argc, argv);
	memset(&q, 0, sizeof(q));
	q.type = CMS_IPC_CTL_REQUEST;
	if (!strcmp(op, "status") && argc == 1)
		q.op = CMS_IPC_OP_STATUS;
	else if (!strcmp(op, "pause") && argc == 2)
		q.op = CMS_IPC_OP_PAUSE;
	else if (!strcmp(op, "resume") && argc == 2)
		q.op = CMS_IPC_OP_RESUME;
	else {
		if (json)
			json_error(CMS_ERR_INVALID_ARGUMENT, op, tag, CMSCTL_REMOTE_USAGE);
		fprintf(stderr, "%s\n", CMSCTL_REMOTE_USAGE);
		return 2;
	}
	if (tag_refused(op, tag, q.op != CMS_IPC_OP_STATUS, why, sizeof(why))) {
		if (json)
			json_error(CMS_ERR_INVALID_ARGUMENT, op, tag, why);
		fprintf(stderr, "cmsctl: %s\n", why);
		return 2;
	}
	snprintf(q.tag, sizeof(q.tag), "%s", tag);
	st = cmsctl_connect(o->socket, &fd, why, sizeof(why));
	if (st) {
		if (json)
			json_error(st, op, tag, why);
		fprintf(stderr, "cmsctl: %s: %s\n", cms_status_name(st), why);
		return 1;
	}
	/* An operation may take long (a pause copying many GiB): --timeout bounds the wait. */
	deadline = cms_ipc_now_ms() + (int64_t)o->timeout_s * 1000;
	st = cms_ipc_send(fd, &q, NULL, deadline, why, sizeof(why));
	while (!st) {
		st = cms_ipc_recv(fd, &m, NULL, deadline, why, sizeof(why));
		if (st)
			break;
		if (m.type == CMS_IPC_CTL_PROGRESS) {
			fprintf(stderr, "cmsctl: %s\n", m.text);
			cms_ipc_msg_free(&m);
			continue;
		}
		if (m.type == CMS_IPC_ERROR) {
			st = m.status;
			snprintf(why, sizeof(why), "%s", m.text);
		} else if (m.type != CMS_IPC_CTL_REPLY) {
			st = CMS_ERR_PROTOCOL;
			snprintf(why, sizeof(why), "unexpected message type %u", m.type);
		} else {
			if (json && m.status)
				json_error(m.status, op, tag, m.text);
			else if (q.op == CMS_IPC_OP_STATUS)
				print_status(&m, json);
			else
				print_action(&m, op, tag, json);
			if (m.status)
				fprintf(stderr, "cmsctl: %s %s: %s: %s\n", op, tag,
					cms_status_name(m.status), m.text);
			rc = m.status ? 1 : 0;
		}
		cms_ipc_msg_free(&m);
		break;
	}
	if (st) {
		if (json)
			json_error(st, op, tag, why);
		fprintf(stderr, "cmsctl: %s: %s\n", cms_status_name(st), why);
		rc = 1;
	}
	close(fd);
	return rc;
}
