// SPDX-License-Identifier: MIT
//! The safe crate against the host simulation (libcumemsaver-sim.so). The test command
//! exports CMS_DRIVER_LIBRARY (the simulation), LD_LIBRARY_PATH and PKG_CONFIG_PATH; the
//! tests set nothing themselves. On the simulation a device pointer is a host address
//! (docs/simulation.md), so the tests read and write device memory directly.
//!
//! Tests that compare the driver's free memory run under one lock: the simulated device
//! is shared by every context of the process.

mod common;
use common::*;
use cumemsaver::{
    status, Context, ContextOptions, LogLevel, PauseOptions, Policy, RegionOptions, State,
    PAUSE_NO_SYNC,
};
use std::sync::{Arc, Mutex};

fn all_bytes(ptr: u64, len: u64, v: u8) -> bool {
    let s = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
    s.iter().all(|b| *b == v)
}

#[test]
fn version_and_status_names() {
    assert_eq!(
        cumemsaver::version() as i64,
        cumemsaver::sys::CMS_VERSION_NUMBER as i64
    );
    let v = cumemsaver::version();
    assert_eq!(
        cumemsaver::version_string(),
        format!("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
    );
    assert_eq!(cumemsaver::status_name(status::OK), "CMS_OK");
    assert_eq!(
        cumemsaver::status_name(status::NOT_FOUND),
        "CMS_ERR_NOT_FOUND"
    );
    assert_eq!(cumemsaver::status_name(-9999), "CMS_ERR_UNKNOWN_STATUS");
    assert!(!cumemsaver::status_string(status::PAUSED).is_empty());
}

#[test]
fn host_policy_keeps_address_and_content_and_frees_device_memory() {
    let _g = serial();
    let ctx = ctx();
    let weights = ctx
        .create_region("weights", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let size = 3 * MIB;
    let ptr = weights.alloc(size).unwrap();
    assert_ne!(ptr, 0);
    fill(ptr, size, 7);

    let info = weights.info().unwrap();
    let gran = info.granularity;
    assert!(gran > 0);
    let phys = (size + gran - 1) / gran * gran;
    assert_eq!(info.tag, "weights");
    assert_eq!(info.policy, Policy::Host);
    assert_eq!(info.state, State::Active);
    assert_eq!(info.allocations, 1);
    assert_eq!(info.logical_bytes, size);
    assert_eq!(info.physical_bytes, phys);
    assert_eq!(info.backed_bytes, phys);
    assert_eq!(info.epoch, 0);
    assert_eq!(info.handle_types, 0, "not shareable");

    let before = ctx.device_memory_info(0).unwrap();
    let p = ctx.pause("weights").unwrap();
    assert_eq!(p.regions, 1);
    assert_eq!(p.allocations, 1);
    assert_eq!(p.bytes_released, phys);
    assert!(p.bytes_backed_up >= size, "backed up {}", p.bytes_backed_up);
    assert_eq!(p.driver_free_after - p.driver_free_before, phys);
    let after = ctx.device_memory_info(0).unwrap();
    assert_eq!(
        after.free - before.free,
        phys,
        "the driver got the memory back"
    );
    assert_eq!(after.total, before.total);

    let info = weights.info().unwrap();
    assert_eq!(info.state, State::Paused);
    assert_eq!(info.backed_bytes, 0);
    assert!(info.backup_bytes >= size);
    assert!(info.host_bytes >= size);
    assert_eq!(
        info.pinned_bytes, info.host_bytes,
        "the backup is page-locked"
    );
    let pi = ctx.pointer_info(ptr + 100).unwrap();
    assert_eq!((pi.base, pi.offset, pi.size), (ptr, 100, size));
    assert_eq!(pi.physical_size, phys);
    assert_eq!(pi.state, State::Paused);
    assert_eq!(pi.region, weights.id());

    let r = ctx.resume("weights").unwrap();
    assert_eq!((r.regions, r.allocations, r.bytes_backed), (1, 1, phys));
    assert!(r.bytes_restored >= size);
    assert_eq!(ctx.pointer_info(ptr).unwrap().base, ptr, "same address");
    assert!(same(ptr, size, 7), "HOST content survived the cycle");
    let info = weights.info().unwrap();
    assert_eq!(
        (info.state, info.epoch, info.backed_bytes),
        (State::Active, 1, phys)
    );
    assert!(
        info.pinned_bytes >= size,
        "the kept buffer stays page-locked"
    );
    assert_eq!(info.pinned_bytes, info.host_bytes);
    assert_eq!(ctx.device_memory_info(0).unwrap().free, before.free);
}

#[test]
fn zero_policy_reads_zero_and_discard_keeps_the_address() {
    let _g = serial();
    let ctx = ctx();
    let z = ctx
        .create_region("zeroed", &RegionOptions::with_policy(Policy::Zero))
        .unwrap();
    let d = ctx
        .create_region("scratch", &RegionOptions::with_policy(Policy::Discard))
        .unwrap();
    let pz = z.alloc(MIB).unwrap();
    let pd = d.alloc(MIB).unwrap();
    fill(pz, MIB, 1);
    fill(pd, MIB, 2);
    // Region-level pause and resume, and pause/resume of everything.
    assert_eq!(z.pause().unwrap().regions, 1);
    let all = ctx.pause_all().unwrap();
    assert_eq!(all.regions, 1, "only the active region is paused");
    assert_eq!(z.info().unwrap().state, State::Paused);
    assert_eq!(d.info().unwrap().state, State::Paused);
    assert_eq!(ctx.resume_all().unwrap().regions, 2);
    assert!(all_bytes(pz, MIB, 0), "ZERO region reads zero");
    assert_eq!(ctx.pointer_info(pd).unwrap().base, pd);
    fill(pd, MIB, 3); // usable again
    assert!(same(pd, MIB, 3));
    assert_eq!(d.info().unwrap().epoch, 1);
    assert_eq!(z.info().unwrap().epoch, 1);
}

#[test]
fn errors_carry_status_name_and_message() {
    let _g = serial();
    let ctx = ctx();
    let e = ctx.pause("no-such-tag").unwrap_err();
    assert_eq!(e.status(), status::NOT_FOUND);
    assert_eq!(e.name(), "CMS_ERR_NOT_FOUND");
    assert!(
        e.message().contains("no-such-tag"),
        "message: {:?}",
        e.message()
    );
    assert!(e.to_string().starts_with("CMS_ERR_NOT_FOUND: "));

    let r = ctx.create_region("kv", &RegionOptions::default()).unwrap();
    let e = ctx
        .create_region("kv", &RegionOptions::default())
        .unwrap_err();
    assert_eq!(e.status(), status::EXISTS);
    assert_eq!(r.alloc(0).unwrap_err().status(), status::INVALID_ARGUMENT);
    let long = "t".repeat(cumemsaver::TAG_MAX + 1);
    let e = ctx
        .create_region(&long, &RegionOptions::default())
        .unwrap_err();
    assert_eq!(e.status(), status::INVALID_ARGUMENT);
    let e = ctx
        .create_region("a\0b", &RegionOptions::default())
        .unwrap_err();
    assert_eq!(
        (e.status(), e.name()),
        (status::INVALID_ARGUMENT, "CMS_ERR_INVALID_ARGUMENT")
    );
    let bad = RegionOptions::with_policy(Policy::Other(77));
    assert_eq!(
        ctx.create_region("p", &bad).unwrap_err().status(),
        status::INVALID_ARGUMENT
    );

    let p = r.alloc(4 * MIB).unwrap();
    assert_eq!(ctx.free(p + 4096).unwrap_err().status(), status::NOT_BASE);
    r.pause().unwrap();
    assert_eq!(r.pause().unwrap_err().status(), status::ALREADY_PAUSED);
    assert_eq!(
        ctx.pause("kv").unwrap_err().status(),
        status::ALREADY_PAUSED
    );
    let e = r.alloc(MIB).unwrap_err();
    assert_eq!((e.status(), e.name()), (status::PAUSED, "CMS_ERR_PAUSED"));
    r.resume().unwrap();
    assert_eq!(r.resume().unwrap_err().status(), status::NOT_PAUSED);
    let opts = PauseOptions {
        flags: 0x8000,
        ..PauseOptions::default()
    };
    assert_eq!(
        ctx.pause_with(Some("kv"), &opts).unwrap_err().status(),
        status::INVALID_ARGUMENT
    );
    // Free works in any state; a second free does not find it.
    r.pause_with(&PauseOptions {
        flags: PAUSE_NO_SYNC,
        ..PauseOptions::default()
    })
    .unwrap();
    r.free(p).unwrap();
    let e = ctx.free(p).unwrap_err();
    assert_eq!(e.status(), status::NOT_FOUND);
    assert_eq!(ctx.pointer_info(p).unwrap_err().status(), status::NOT_FOUND);
    assert_eq!(r.info().unwrap().allocations, 0);
}

#[test]
fn messages_are_per_thread() {
    let _g = serial();
    let ctx = ctx();
    std::thread::scope(|s| {
        for i in 0..4 {
            let ctx = &ctx;
            s.spawn(move || {
                for round in 0..50 {
                    let tag = format!("missing-{}-{}", i, round);
                    let e = ctx.resume(&tag).unwrap_err();
                    assert_eq!(e.status(), status::NOT_FOUND);
                    assert!(
                        e.message().contains(&tag),
                        "{:?} lacks {}",
                        e.message(),
                        tag
                    );
                }
            });
        }
    });
}

#[test]
fn context_and_regions_are_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Context>();
    send_sync::<cumemsaver::Region>();
    let _g = serial();
    let ctx = ctx();
    let regions: Vec<_> = (0..4)
        .map(|i| {
            ctx.create_region(
                &format!("t{}", i),
                &RegionOptions::with_policy(Policy::Host),
            )
            .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for (i, r) in regions.iter().enumerate() {
            let ctx = &ctx;
            s.spawn(move || {
                let p = r.alloc(2 * MIB).unwrap();
                for cycle in 0..5u8 {
                    fill(p, 2 * MIB, cycle + i as u8);
                    ctx.pause(r.tag()).unwrap();
                    ctx.resume(r.tag()).unwrap();
                    assert!(same(p, 2 * MIB, cycle + i as u8));
                }
                assert_eq!(r.info().unwrap().epoch, 5);
            });
        }
    });
    // Drop a region on another thread.
    let last = regions.into_iter().last().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || drop(last));
    });
    assert_eq!(ctx.pause("t3").unwrap_err().status(), status::NOT_FOUND);
}

#[test]
fn dropping_a_region_or_context_frees_its_memory() {
    let _g = serial();
    let observer = ctx();
    let base = observer.device_memory_info(0).unwrap().free;
    let ctx = ctx();
    let r = ctx
        .create_region("drop-me", &RegionOptions::default())
        .unwrap();
    let a = r.alloc(4 * MIB).unwrap();
    let b = r.alloc(6 * MIB).unwrap();
    assert_eq!(
        base - observer.device_memory_info(0).unwrap().free,
        10 * MIB
    );
    drop(r);
    assert_eq!(ctx.pointer_info(a).unwrap_err().status(), status::NOT_FOUND);
    assert_eq!(ctx.pointer_info(b).unwrap_err().status(), status::NOT_FOUND);
    assert_eq!(observer.device_memory_info(0).unwrap().free, base);

    let r = ctx
        .create_region("kept", &RegionOptions::default())
        .unwrap();
    r.alloc(8 * MIB).unwrap();
    r.destroy().unwrap();
    assert_eq!(observer.device_memory_info(0).unwrap().free, base);

    // close() refuses while a region still holds the context, and succeeds after.
    let r = ctx
        .create_region("held", &RegionOptions::default())
        .unwrap();
    r.alloc(2 * MIB).unwrap();
    let (ctx, e) = ctx.close().unwrap_err();
    assert_eq!(e.kind(), cumemsaver::ErrorKind::InvalidArgument);
    assert_eq!(base - observer.device_memory_info(0).unwrap().free, 2 * MIB);
    drop(r);
    ctx.close().unwrap();
    assert_eq!(observer.device_memory_info(0).unwrap().free, base);
}

#[test]
fn log_callback_receives_lines() {
    let _g = serial();
    let lines: Arc<Mutex<Vec<(LogLevel, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let ctx = Context::with_options(ContextOptions::new().log(
        LogLevel::Info,
        move |level, msg| {
            sink.lock().unwrap().push((level, msg.to_string()));
        },
    ))
    .unwrap();
    let r = ctx
        .create_region("logged", &RegionOptions::default())
        .unwrap();
    r.alloc(MIB).unwrap();
    ctx.pause("logged").unwrap();
    drop(r);
    drop(ctx);
    let lines = lines.lock().unwrap();
    assert!(
        lines
            .iter()
            .any(|(l, m)| *l == LogLevel::Info && m.contains("paused")),
        "{:?}",
        *lines
    );
    assert!(
        lines.iter().all(|(l, _)| *l <= LogLevel::Info),
        "no DEBUG lines at level INFO"
    );
}

#[test]
fn a_missing_driver_is_an_error_not_a_crash() {
    let _g = serial();
    let ctx = Context::with_options(ContextOptions::new().driver_path("/nonexistent/libcuda.so.1"))
        .unwrap();
    let e = ctx
        .create_region("x", &RegionOptions::default())
        .unwrap_err();
    assert_eq!(
        (e.status(), e.name()),
        (status::NO_DRIVER, "CMS_ERR_NO_DRIVER")
    );
    // the message names the switch to the simulation
    assert!(
        e.message().contains("CMS_DRIVER_LIBRARY=sim"),
        "{}",
        e.message()
    );
    assert_eq!(
        ctx.device_memory_info(0).unwrap_err().status(),
        status::NO_DRIVER
    );
}

#[test]
fn shareable_regions_report_their_handle_types() {
    let _g = serial();
    let ctx = ctx();
    let opts = RegionOptions {
        policy: Policy::Host,
        flags: cumemsaver::REGION_SHAREABLE,
        ..RegionOptions::default()
    };
    let r = ctx.create_region("shared", &opts).unwrap();
    r.alloc(MIB).unwrap();
    let info = r.info().unwrap();
    assert_eq!(info.flags, cumemsaver::REGION_SHAREABLE);
    assert_eq!(info.handle_types, cumemsaver::HANDLE_TYPE_POSIX_FD);
    let bad = RegionOptions {
        flags: 1 << 40,
        ..RegionOptions::default()
    };
    assert_eq!(
        ctx.create_region("bad-flags", &bad).unwrap_err().status(),
        status::INVALID_ARGUMENT
    );
}
