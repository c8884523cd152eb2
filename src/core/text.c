/* SPDX-License-Identifier: MIT */
/*
 * text.c - escaping of text that reaches a log line, cms_last_error() or a
 * peer (error.c, log.c, adapters/control.c): quoted paths and peers' text
 * cannot forge lines.
 */
#include <string.h>

#include "core_internal.h"

size_t cms_text_escape(char *dst, size_t cap, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	if (!cap)
		return 0;
	for (; *src; src++) {
		unsigned char c = (unsigned char)*src;
		char e[4];
		size_t len = 2;

		e[0] = '\\';
		if (c == '\n')
			e[1] = 'n';
		else if (c == '\r')
			e[1] = 'r';
		else if (c == '\t')
			e[1] = 't';
		else if (c < 0x20 || c == 0x7f) {
			e[1] = 'x';
			e[2] = hex[c >> 4];
			e[3] = hex[c & 15];
			len = 4;
		} else {
			e[0] = (char)c;
			len = 1;
		}
		if (n + len >= cap)
			break;
		memcpy(dst + n, e, len);
		n += len;
	}
	dst[n] = '\0';
	return n;
}
