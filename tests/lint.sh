#!/usr/bin/env bash
# Lint: library code never aborts, exits, asserts or prints (outside the logging
# path marked allow-print), and every C file is clang-formatted.
set -euo pipefail
root=$1
cd "$root"
fail=0
hits=$(grep -nE '\b(abort|exit|_exit|_Exit|quick_exit|assert|perror|puts|putchar|printf|vprintf)\s*\(|\bfprintf\s*\(\s*std(out|err)|\bf?putc\s*\(|\b(stdout|stderr)\b' \
	$(find src -path src/sim -prune -o -name "*.[ch]" -print) | grep -v 'allow-print' | grep -vE '^[^:]+:[0-9]+:\s*(/?\*|//)' || true)
if [ -n "$hits" ]; then
	echo "library code must not abort, exit, assert or print:"; echo "$hits"; fail=1
fi
if command -v clang-format >/dev/null; then
	files=$(find src include tests tools examples lab -name '*.[ch]')
	if ! clang-format --dry-run --Werror $files 2>/tmp/cms-format.$$; then
		echo "not clang-formatted (run: clang-format -i <files>):"
		grep -oE '^[^:]+\.[ch]' /tmp/cms-format.$$ | sort -u; fail=1
	fi
	rm -f /tmp/cms-format.$$
else
	echo "clang-format not installed"; fail=1
fi
[ $fail -eq 0 ] && echo "lint: no abort/exit/assert/print in src/, $(find src include tests tools examples lab -name '*.[ch]' | wc -l) files formatted"
exit $fail
