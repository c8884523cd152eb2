// SPDX-License-Identifier: MIT
//! One pause/resume cycle: a HOST region keeps its content, a DISCARD region its address.
//!
//!     CMS_DRIVER_LIBRARY=sim cargo run --example cycle    # the simulation installed with the library
//!
//! On the host simulation a device pointer is a host address, so the example writes and
//! checks the content directly; on a GPU it only checks addresses and sizes.

use cumemsaver::{Context, Policy, RegionOptions};

fn main() {
    if let Err(e) = run() {
        eprintln!("cycle: {}", e);
        std::process::exit(1);
    }
}

fn run() -> Result<(), cumemsaver::Error> {
    let on_sim = std::env::var("CMS_DRIVER_LIBRARY").map_or(false, |p| {
        p == cumemsaver::SIMULATION || p.contains("cumemsaver-sim")
    });
    println!(
        "cumemsaver {} ({})",
        cumemsaver::version_string(),
        if on_sim { "host simulation" } else { "driver" }
    );
    let ctx = Context::new()?;
    let weights = ctx.create_region("weights", &RegionOptions::with_policy(Policy::Host))?;
    let kv = ctx.create_region("kv_cache", &RegionOptions::with_policy(Policy::Discard))?;
    let size: u64 = 8 << 20;
    let w = weights.alloc(size)?;
    let k = kv.alloc(size)?;
    if on_sim {
        let s = unsafe { std::slice::from_raw_parts_mut(w as *mut u8, size as usize) };
        for (i, b) in s.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
    }
    println!("weights 0x{:x}, kv_cache 0x{:x}, {} bytes each", w, k, size);

    let mem = ctx.device_memory_info(0)?;
    println!(
        "driver free before pause: {} MiB of {} MiB",
        mem.free >> 20,
        mem.total >> 20
    );
    let p = ctx.pause_all()?;
    println!(
        "pause:  {} regions, {} allocations, released {} MiB, backed up {} MiB, driver free +{} MiB, {:.3} ms",
        p.regions,
        p.allocations,
        p.bytes_released >> 20,
        p.bytes_backed_up >> 20,
        (p.driver_free_after.saturating_sub(p.driver_free_before)) >> 20,
        p.elapsed_ns as f64 / 1e6
    );
    let info = weights.info()?;
    println!(
        "weights: {:?}, backed {} bytes, backup {} bytes",
        info.state, info.backed_bytes, info.backup_bytes
    );

    let r = ctx.resume_all()?;
    println!(
        "resume: {} regions, {} allocations, backed {} MiB, restored {} MiB, {:.3} ms",
        r.regions,
        r.allocations,
        r.bytes_backed >> 20,
        r.bytes_restored >> 20,
        r.elapsed_ns as f64 / 1e6
    );
    let same = ctx.pointer_info(w)?.base == w && ctx.pointer_info(k)?.base == k;
    let info = weights.info()?;
    println!(
        "weights: {:?}, epoch {}, same addresses: {}",
        info.state, info.epoch, same
    );
    let mut ok = same && info.epoch == 1;
    if on_sim {
        let s = unsafe { std::slice::from_raw_parts(w as *const u8, size as usize) };
        let kept = s.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8);
        println!("weights content kept: {}", kept);
        ok &= kept;
    }
    println!("cycle: {}", if ok { "PASS" } else { "FAIL" });
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
