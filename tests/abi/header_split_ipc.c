/* SPDX-License-Identifier: MIT */
/* header_split_ipc.c - cumemsaver_ipc.h included alone (see header_split_hooks.c). */
#include <cumemsaver_ipc.h>

int header_split_ipc(void);

int header_split_ipc(void)
{
	cms_import_options io = CMS_IMPORT_OPTIONS_INIT, io2;
	cms_exporter_options eo;
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;

	if (cms_exporter_options_init(&eo) || eo.struct_size != sizeof(eo))
		return 10;
	if (cms_import_options_init(&io2) || io2.struct_size != sizeof(io2) ||
	    io2.exporter_device != -1 || io2.allowed_uids || io2.nallowed_uids)
		return 11;
	if (io.exporter_device != -1 || io.allowed_uids || io.nallowed_uids || io.timeout_ms)
		return 12;
	if (co.struct_size != sizeof(co) || co.fn || co.allowed_uids)
		return 13;
	if (cms_exporter_destroy(NULL) || cms_import_close(NULL) || cms_control_destroy(NULL))
		return 14;
	/* the core's declarations came with it */
	if (CMS_ACCESS_READ != 1u || CMS_TAG_MAX != 63 || CMS_ERR_IO != -25)
		return 15;
	return 0;
}
