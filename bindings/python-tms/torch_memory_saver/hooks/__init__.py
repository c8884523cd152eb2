# SPDX-License-Identifier: MIT
"""torch_memory_saver.hooks: base (the HookMode type) and mode_preload
(configure_subprocess), over cumemsaver."""
