/* SPDX-License-Identifier: MIT */
/*
 * kernels.h - PTX of the small kernels the demo and the GPU tests launch,
 * embedded so that nothing needs nvcc at build time (cuModuleLoadData JITs
 * it). cms_affine_u32(in, out, n): out[i] = in[i] * 2 + 1 for i < n; launch
 * with 256 threads per block and ceil(n / 256) blocks.
 */
#ifndef CMS_TOOLS_KERNELS_H
#define CMS_TOOLS_KERNELS_H

#define CMS_KERNEL_AFFINE_NAME "cms_affine_u32"
#define CMS_KERNEL_BLOCK 256u

static const char cms_kernels_ptx[] = ".version 7.0\n"
				      ".target sm_50\n"
				      ".address_size 64\n"
				      "\n"
				      ".visible .entry cms_affine_u32(\n"
				      "	.param .u64 p_in,\n"
				      "	.param .u64 p_out,\n"
				      "	.param .u64 p_n\n"
				      ")\n"
				      "{\n"
				      "	.reg .pred %p<2>;\n"
				      "	.reg .b32 %r<8>;\n"
				      "	.reg .b64 %rd<12>;\n"
				      "\n"
				      "	ld.param.u64 %rd1, [p_in];\n"
				      "	ld.param.u64 %rd2, [p_out];\n"
				      "	ld.param.u64 %rd3, [p_n];\n"
				      "	mov.u32 %r1, %ctaid.x;\n"
				      "	mov.u32 %r2, %ntid.x;\n"
				      "	mov.u32 %r3, %tid.x;\n"
				      "	mul.wide.u32 %rd4, %r1, %r2;\n"
				      "	cvt.u64.u32 %rd5, %r3;\n"
				      "	add.u64 %rd6, %rd4, %rd5;\n"
				      "	setp.ge.u64 %p1, %rd6, %rd3;\n"
				      "	@%p1 bra DONE;\n"
				      "	cvta.to.global.u64 %rd7, %rd1;\n"
				      "	cvta.to.global.u64 %rd8, %rd2;\n"
				      "	shl.b64 %rd9, %rd6, 2;\n"
				      "	add.u64 %rd10, %rd7, %rd9;\n"
				      "	add.u64 %rd11, %rd8, %rd9;\n"
				      "	ld.global.u32 %r4, [%rd10];\n"
				      "	shl.b32 %r5, %r4, 1;\n"
				      "	add.u32 %r6, %r5, 1;\n"
				      "	st.global.u32 [%rd11], %r6;\n"
				      "DONE:\n"
				      "	ret;\n"
				      "}\n";

#endif /* CMS_TOOLS_KERNELS_H */
