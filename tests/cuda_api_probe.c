/* Proves src/driver/cuda_api.h agrees with the CUDA toolkit's cuda.h (built only where cuda.h
 * exists). */
#include <stdio.h>
#include <string.h>

#include "cuda_api_probe.h"

int main(void)
{
	struct cuda_api_facts a, b;

	facts_ours(&a);
	facts_toolkit(&b);
	if (memcmp(&a, &b, sizeof(a))) {
		printf("src/driver/cuda_api.h disagrees with cuda.h\n");
		return 1;
	}
	printf("src/driver/cuda_api.h agrees with cuda.h: layouts and 19 constants\n");
	return 0;
}
