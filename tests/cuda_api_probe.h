/* Layout facts of the CUDA driver types that src/driver/cuda_api.h mirrors. */
#include <stddef.h>
struct cuda_api_facts {
	size_t prop_size, prop_location, prop_alloc_flags, prop_gdr, access_size, access_flags;
	long values[19];
};
void facts_ours(struct cuda_api_facts *f);
void facts_toolkit(struct cuda_api_facts *f);
