/* SPDX-License-Identifier: MIT */
/*
 * tool_text.c - text the tools print for programs to parse: JSON string
 * literals, Prometheus label values and numbers. A tag is any NUL-terminated
 * bytes the library accepted, not necessarily UTF-8, so each writer splits
 * the bytes into valid UTF-8 sequences and invalid ones; each maximal invalid
 * subpart becomes one U+FFFD (the replacement character, as in Unicode's
 * recommended practice and Python's errors="replace"), so every output is
 * valid whatever the tag.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tool_common.h"

#define REPLACEMENT_UTF8 "\xef\xbf\xbd" /* U+FFFD */

/*
 * The UTF-8 sequence at s (Unicode 15, table 3-7: no overlong forms, no surrogates, nothing
 * above U+10FFFF): returns its length (1-4) when valid; else minus the length of its maximal
 * subpart (the lead byte and the continuation bytes that were still possible), which is
 * replaced by one U+FFFD, as Unicode recommends (and Python's errors="replace" does).
 */
static int utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
	int n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return -1;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	for (i = 1; i < n; i++) {
		if (s[i] < lo || s[i] > hi) /* also stops at the NUL */
			return -i;
		lo = 0x80;
		hi = 0xbf;
	}
	return n;
}

void tool_json_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	int n;

	fputc('"', f);
	while (*s) {
		n = utf8_len(s);
		if (n < 0) {
			fputs("\\ufffd", f);
			s += -n;
		} else if (*s == '"' || *s == '\\') {
			fprintf(f, "\\%c", *s++);
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u%04x", *s++);
		} else {
			fwrite(s, 1, (size_t)n, f);
			s += n;
		}
	}
	fputc('"', f);
}

void tool_prom_label(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	int n;

	while (*s) {
		n = utf8_len(s);
		if (n < 0) {
			fputs(REPLACEMENT_UTF8, f);
			s += -n;
		} else if (*s == '"' || *s == '\\') {
			fprintf(f, "\\%c", *s++);
		} else if (*s == '\n') {
			fputs("\\n", f);
			s++;
		} else {
			fwrite(s, 1, (size_t)n, f);
			s += n;
		}
	}
}

void tool_print_double(FILE *f, double v)
{
	char buf[32];
	int prec;

	if (isnan(v)) {
		fputs("NaN", f);
		return;
	}
	if (isinf(v)) {
		fputs(v > 0 ? "+Inf" : "-Inf", f);
		return;
	}
	/* the fewest significant digits that read back as the same double */
	for (prec = 1; prec < 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fprintf(f, "%.*g", prec, v);
}
