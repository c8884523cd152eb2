# SPDX-License-Identifier: MIT
"""First pause of 2048 x 8 MiB cudaMalloc allocations through a torch_memory_saver-style module
in preload mode (GPU machine): the same driver work as cms-bench's (b) workload, asked of
either the peer (torch_memory_saver built from ../shared/peer) or cumemsaver's drop-in
(through a shim package named torch_memory_saver).

    python3 lab/exp-handles/first-pause.py [--cpu-backup]   # parent: re-runs itself under configure_subprocess()

--cpu-backup: the region has enable_cpu_backup=True (cms-bench's (d) workload instead of (b);
no content is written, so only the copy and release work is timed).

The allocations are made with the CUDA runtime's cudaMalloc looked up in the process's global
scope (so the preloaded interposer serves them), one per call, outside PyTorch's caching
allocator. Prints the pause and resume times of 4 cycles (the first pause is the one that
releases one handle per allocation) as one JSON line.
"""
import ctypes
import json
import os
import subprocess
import sys
import time

N, SIZE, CYCLES = 2048, 8 << 20, 4


def child(cpu_backup):
    import torch
    import torch_memory_saver as mod

    tms = mod.torch_memory_saver
    torch.zeros(1, device="cuda")
    rt = ctypes.CDLL(None)
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]
    ptrs = []
    t0 = time.perf_counter()
    with tms.region(tag="small", enable_cpu_backup=cpu_backup):
        for _ in range(N):
            p = ctypes.c_void_p()
            rc = rt.cudaMalloc(ctypes.byref(p), SIZE)
            assert rc == 0, f"cudaMalloc returned {rc}"
            ptrs.append(p.value)
    alloc_ms = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    rows = []
    for _ in range(CYCLES):
        t0 = time.perf_counter()
        tms.pause("small")
        t1 = time.perf_counter()
        freed = torch.cuda.mem_get_info()[0] - free0
        t2 = time.perf_counter()
        tms.resume("small")
        t3 = time.perf_counter()
        rows.append(dict(pause_ms=(t1 - t0) * 1e3, resume_ms=(t3 - t2) * 1e3, freed=freed))
    for p in ptrs:
        rt.cudaFree(p)
    print(json.dumps(dict(module_file=mod.__file__, n=N, size=SIZE, cpu_backup=cpu_backup,
                          alloc_ms=alloc_ms, cycles=rows)))


def main():
    cpu_backup = "--cpu-backup" in sys.argv[1:]
    if os.environ.get("CMS_FIRST_PAUSE_CHILD") == "1":
        child(cpu_backup)
        return
    import torch_memory_saver as mod

    env = dict(os.environ, CMS_FIRST_PAUSE_CHILD="1")
    with mod.configure_subprocess():
        env["LD_PRELOAD"] = os.environ.get("LD_PRELOAD", "")
    sys.exit(subprocess.call([sys.executable, __file__, *sys.argv[1:]], env=env))


if __name__ == "__main__":
    main()
