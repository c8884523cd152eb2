// SPDX-License-Identifier: MIT
//! The 1.2 API on the host simulation: a region's cumulative counters after a known
//! sequence of pauses, resumes and a swap (`Region::stats`), the list of a context's
//! regions (`Context::regions`) and guarded regions (`REGION_GUARD`: a paused range reads
//! zeros). On the simulation a device pointer is a host address.

mod common;
use common::*;
use cumemsaver::{
    hook_alloc, hook_free, status, ErrorKind, Policy, RegionOptions, RegionStats, State,
    REGION_GUARD, REGION_RELEASE_HOST, STATS_STATUS_SLOTS,
};

fn zeros(ptr: u64, len: u64) -> bool {
    let s = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
    s.iter().all(|b| *b == 0)
}

fn no_failures(s: &RegionStats) {
    assert_eq!(s.failures, 0, "{:?}", s);
    assert_eq!(s.failures_by_status, [0u64; STATS_STATUS_SLOTS], "{:?}", s);
}

#[test]
fn stats_count_a_known_pause_resume_sequence() {
    let _g = serial();
    let ctx = ctx();
    let w = ctx
        .create_region("st-w", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let (sa, sb) = (3 * MIB + 4096, MIB);
    let a = w.alloc(sa).unwrap();
    let b = w.alloc(sb).unwrap();
    fill(a, sa, 3);
    fill(b, sb, 9);
    let phys = w.info().unwrap().physical_bytes;
    assert!(phys >= sa + sb);

    let s0 = w.stats().unwrap();
    assert_eq!(
        (s0.tag.as_str(), s0.device, s0.policy, s0.state),
        ("st-w", 0, Policy::Host, State::Active)
    );
    assert_eq!((s0.pauses, s0.resumes, s0.swaps), (0, 0, 0));
    assert_eq!((s0.bytes_released, s0.bytes_backed), (0, 0));
    assert_eq!((s0.bytes_to_store, s0.bytes_from_store), (0, 0));
    no_failures(&s0);

    // Pause by tag: one pause, the region's physical bytes released.
    let p1 = ctx.pause("st-w").unwrap();
    let s1 = w.stats().unwrap();
    assert_eq!((s1.pauses, s1.resumes, s1.state), (1, 0, State::Paused));
    assert_eq!(s1.bytes_released, phys);
    assert_eq!(s1.bytes_released, p1.bytes_released);
    assert!(p1.bytes_backed_up > 0);
    assert_eq!(s1.bytes_to_store, p1.bytes_backed_up);
    assert_eq!(s1.region_id, s0.region_id);

    // A pause of a paused region skips it: it counts nothing, not even a failure.
    assert_eq!(w.pause().unwrap_err().kind(), ErrorKind::AlreadyPaused);
    assert_eq!(w.stats().unwrap(), s1);

    // Resume the region, pause it by handle, resume every tag.
    let r1 = w.resume().unwrap();
    let p2 = w.pause().unwrap();
    let r2 = ctx.resume_all().unwrap();
    let s = w.stats().unwrap();
    assert_eq!((s.pauses, s.resumes, s.swaps), (2, 2, 0));
    assert_eq!(s.state, State::Active);
    assert_eq!(s.bytes_released, 2 * phys);
    assert_eq!(s.bytes_backed, 2 * phys);
    assert_eq!(s.bytes_backed, r1.bytes_backed + r2.bytes_backed);
    assert_eq!(s.bytes_to_store, p1.bytes_backed_up + p2.bytes_backed_up);
    assert_eq!(s.bytes_from_store, r1.bytes_restored + r2.bytes_restored);
    no_failures(&s);
    assert_eq!(s.failures_of(status::ALREADY_PAUSED), 0);
    assert!(same(a, sa, 3) && same(b, sb, 9));
}

#[test]
fn stats_count_both_sides_of_a_swap() {
    let _g = serial();
    let ctx = ctx();
    let a = ctx
        .create_region("sw-a", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let b = ctx
        .create_region("sw-b", &RegionOptions::default())
        .unwrap();
    a.alloc(2 * MIB).unwrap();
    b.alloc(MIB + 1).unwrap();
    let (pa, pb) = (
        a.info().unwrap().physical_bytes,
        b.info().unwrap().physical_bytes,
    );
    b.pause().unwrap();
    ctx.swap("sw-a", "sw-b").unwrap();
    let (sa, sb) = (a.stats().unwrap(), b.stats().unwrap());
    assert_eq!((sa.pauses, sa.resumes, sa.swaps), (1, 0, 1));
    assert_eq!((sb.pauses, sb.resumes, sb.swaps), (1, 1, 1));
    assert_eq!((sa.state, sb.state), (State::Paused, State::Active));
    assert_eq!((sa.bytes_released, sa.bytes_backed), (pa, 0));
    assert_eq!((sb.bytes_released, sb.bytes_backed), (pb, pb));
    no_failures(&sa);
    no_failures(&sb);
}

#[test]
fn regions_lists_every_live_region_with_its_tag() {
    let _g = serial();
    let ctx = ctx();
    assert!(ctx.regions().unwrap().is_empty());
    let specs = [
        ("l-kv", Policy::Discard),
        ("l-weights", Policy::Host),
        ("l-scratch", Policy::Zero),
    ];
    let regions: Vec<_> = specs
        .iter()
        .map(|(t, p)| {
            ctx.create_region(t, &RegionOptions::with_policy(*p))
                .unwrap()
        })
        .collect();
    for r in &regions {
        r.alloc(MIB).unwrap();
    }
    regions[1].pause().unwrap();

    let list = ctx.regions().unwrap();
    assert_eq!(list.len(), specs.len());
    for (i, e) in list.iter().enumerate() {
        assert_eq!(
            (e.tag.as_str(), e.policy, e.device),
            (specs[i].0, specs[i].1, 0)
        );
        // Each entry is the region's own snapshot.
        assert_eq!(*e, regions[i].stats().unwrap());
        if i > 0 {
            assert!(e.region_id > list[i - 1].region_id, "{:?}", list);
        }
    }
    assert_eq!(list[1].state, State::Paused);
    assert_eq!((list[1].pauses, list[0].pauses, list[2].pauses), (1, 0, 0));

    // A destroyed region leaves the list; a new one comes last.
    let mut regions = regions;
    regions.remove(1).destroy().map_err(|e| e.1).unwrap();
    let n = ctx
        .create_region("l-new", &RegionOptions::default())
        .unwrap();
    let tags: Vec<String> = ctx.regions().unwrap().into_iter().map(|e| e.tag).collect();
    assert_eq!(tags, ["l-kv", "l-scratch", "l-new"]);
    drop(n);
}

#[test]
fn a_guarded_region_reads_zeros_while_paused() {
    let _g = serial();
    let ctx = ctx();
    let r = ctx
        .create_region(
            "guarded",
            &RegionOptions::with_policy(Policy::Host).flags(REGION_GUARD),
        )
        .unwrap();
    assert_ne!(r.info().unwrap().flags & REGION_GUARD, 0);
    let size = 3 * MIB;
    let p = r.alloc(size).unwrap();
    fill(p, size, 5);
    r.pause().unwrap();
    assert_eq!(r.info().unwrap().backed_bytes, 0);
    assert!(zeros(p, size), "a paused guarded range reads zeros");
    r.resume().unwrap();
    assert!(same(p, size, 5));
    let s = r.stats().unwrap();
    assert_eq!((s.pauses, s.resumes), (1, 1));
}

/// Backups readable (`Context::backup`, `backup_read`), retention changed between cycles
/// (`Region::set_flags`) and a default hook region (`HookContext::set_default_region`).
#[test]
fn backups_flags_and_default_hook_region() {
    let _g = serial();
    let ctx = ctx();
    let w = ctx
        .create_region("bk-w", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let a = w.alloc(MIB).unwrap();
    fill(a, MIB, 5);
    assert_eq!(ctx.backup(a).unwrap_err().kind(), ErrorKind::NotPaused);
    w.pause().unwrap();
    let b = ctx.backup(a + 10).unwrap();
    assert_eq!(
        (b.base, b.size, b.policy, b.current),
        (a, MIB, Policy::Host, true)
    );
    assert!(same(b.host as u64, MIB, 5));
    let mut buf = [0u8; 64];
    ctx.backup_read(a, &mut buf).unwrap();
    assert!(same(buf.as_ptr() as u64, 64, 5));
    w.resume().unwrap();
    assert!(!ctx.backup(a).unwrap().current);
    w.set_flags(REGION_RELEASE_HOST, REGION_RELEASE_HOST)
        .unwrap();
    assert_eq!(w.info().unwrap().host_bytes, 0);
    assert_eq!(
        w.set_flags(REGION_GUARD, 0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    let hooks = ctx.hook_context().unwrap();
    assert!(!hooks.has_default_region(0));
    hooks.set_default_region(0, Some(&w)).unwrap();
    assert!(hooks.is_default_region(0, &w));
    let p = hook_alloc(MIB, 0).unwrap();
    assert_eq!(ctx.pointer_info(p).unwrap().region, w.id());
    hook_free(p).unwrap();
    hooks.set_default_region(0, None).unwrap();
    assert_eq!(hook_alloc(MIB, 0).unwrap_err().kind(), ErrorKind::NotFound);
}

/// 1.2: content-free ranges (`Context::range_discard` / `range_keep`), default regions
/// made on demand (`HookContext::set_default_template`) and the memory margin.
#[test]
fn ranges_template_and_margin() {
    let _g = serial();
    let ctx = ctx();
    let w = ctx
        .create_region("rg-w", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let a = w.alloc(4 * MIB).unwrap();
    ctx.range_discard(a + MIB, MIB).unwrap();
    ctx.range_keep(a + MIB, MIB / 2).unwrap();
    assert_eq!(
        ctx.range_discard(a, 8 * MIB).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let r = w.pause().unwrap();
    assert_eq!(r.bytes_backed_up, 4 * MIB - MIB / 2);
    w.resume().unwrap();

    let hooks = ctx.hook_context().unwrap();
    hooks
        .set_default_template(Some((
            "rg-auto",
            &RegionOptions::with_policy(Policy::Discard),
        )))
        .unwrap();
    let p = hook_alloc(MIB, 0).unwrap();
    let auto = ctx.find_region("rg-auto", 0).unwrap();
    assert_eq!(ctx.pointer_info(p).unwrap().region, auto);
    hook_free(p).unwrap();
    hooks.set_memory_margin(u64::MAX).unwrap();
    assert_eq!(
        hook_alloc(MIB, 0).unwrap_err().kind(),
        ErrorKind::OutOfDeviceMemory
    );
    hooks.set_memory_margin(0).unwrap();
    hooks.set_default_template(None).unwrap();
    hooks.set_default_region(0, None).unwrap();

    // a DISK template with a directory: its region pauses from its first allocation on
    let dir = std::env::temp_dir().join(format!("cms-rs-{}-tpl", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut disk = RegionOptions::with_policy(Policy::Disk);
    disk.disk_dir = Some(dir.clone());
    hooks
        .set_default_template(Some(("rg-disk", &disk)))
        .unwrap();
    let p = hook_alloc(MIB, 0).unwrap();
    assert_eq!(ctx.pause("rg-disk").unwrap().bytes_backed_up, MIB);
    ctx.resume("rg-disk").unwrap();
    hook_free(p).unwrap();
    disk.policy = Policy::Host; // a directory needs Policy::Disk
    assert_eq!(
        hooks
            .set_default_template(Some(("rg-disk", &disk)))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    hooks.set_default_template(None).unwrap();
    hooks.set_default_region(0, None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
