// SPDX-License-Identifier: MIT
//! The 1.1 API on the host simulation: shared ownership across threads, error kinds,
//! swap, DISK, progress, async resume, IPC export/import, the control socket (driven by
//! the `cmsctl` binary: `$CMS_CMSCTL`, else `cmsctl` on PATH, as the test command sets)
//! and the allocator hooks. On the simulation a device pointer is a host address.

mod common;
use common::*;
use cumemsaver::{
    Access, Context, ControlOp, ControlOptions, ControlPhase, ErrorKind, ExporterOptions,
    ImportEvent, ImportOptions, ImportState, Policy, Region, RegionOptions, ResumeOptions, State,
    REGION_COALESCE, REGION_SHAREABLE,
};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

fn sock(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("cms-rs-{}-{}.sock", std::process::id(), name));
    let _ = std::fs::remove_file(&p);
    p
}

fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cms-rs-{}-{}", std::process::id(), name));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An engine owning its context and regions in one struct, moved to another thread.
struct Engine {
    ctx: Context,
    weights: Region,
    kv: Region,
}

#[test]
fn an_engine_owns_context_and_regions_and_moves_across_threads() {
    let _g = serial();
    let ctx = ctx();
    let observer = ctx.clone();
    let e = Engine {
        weights: ctx
            .create_region("e-weights", &RegionOptions::with_policy(Policy::Host))
            .unwrap(),
        kv: ctx
            .create_region("e-kv", &RegionOptions::default())
            .unwrap(),
        ctx,
    };
    let w = e.weights.alloc(2 * MIB).unwrap();
    e.kv.alloc(MIB).unwrap();
    fill(w, 2 * MIB, 5);
    let e = std::thread::spawn(move || {
        e.ctx.pause_all().unwrap();
        e.ctx.resume_all().unwrap();
        assert!(same(w, 2 * MIB, 5));
        e
    })
    .join()
    .unwrap();
    // A region outlives every Context handle and keeps working.
    let Engine { ctx, weights, kv } = e;
    drop(ctx);
    drop(kv);
    assert_eq!(weights.info().unwrap().epoch, 1);
    weights.pause().unwrap();
    assert_eq!(observer.pointer_info(w).unwrap().state, State::Paused);
    weights.resume().unwrap();
    assert!(same(w, 2 * MIB, 5));
    drop(weights);
    assert_eq!(
        observer.pointer_info(w).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn errors_have_a_kind_and_the_message() {
    let ctx = ctx();
    let e = ctx.pause("no-such-tag").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(e.status(), cumemsaver::status::NOT_FOUND);
    assert_eq!(e.name(), "CMS_ERR_NOT_FOUND");
    assert!(!e.message().is_empty());
    assert_eq!(e.to_string(), format!("CMS_ERR_NOT_FOUND: {}", e.message()));
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().contains("no-such-tag"), "{}", boxed);
    for s in -30..0 {
        let k = ErrorKind::from_status(s);
        assert_eq!(k.status(), s);
        assert_eq!(
            matches!(k, ErrorKind::Other(_)),
            cumemsaver::status_name(s) == "CMS_ERR_UNKNOWN_STATUS",
            "status {}",
            s
        );
    }
    assert_eq!(
        ctx.find_region("nope", 0).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let r = ctx
        .create_region("found", &RegionOptions::default())
        .unwrap();
    assert_eq!(ctx.find_region("found", 0).unwrap(), r.id());
}

#[test]
fn swap_exchanges_two_tags_and_reports_progress() {
    let _g = serial();
    let ctx = ctx();
    let a = ctx
        .create_region("swap-a", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let b = ctx
        .create_region("swap-b", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let pa = a.alloc(4 * MIB).unwrap();
    let pb = b.alloc(2 * MIB).unwrap();
    fill(pa, 4 * MIB, 1);
    fill(pb, 2 * MIB, 2);
    b.pause().unwrap();
    let calls: Arc<Mutex<Vec<(String, u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let c = calls.clone();
    ctx.set_progress(Some(move |op: &str, done, total| {
        c.lock().unwrap().push((op.to_string(), done, total));
    }))
    .unwrap();
    let (p, r) = ctx.swap("swap-a", "swap-b").unwrap();
    assert_eq!((p.regions, r.regions), (1, 1));
    assert_eq!(p.bytes_backed_up, 4 * MIB);
    assert_eq!(r.bytes_restored, 2 * MIB);
    assert_eq!(p.devices.len(), 1);
    assert_eq!(a.info().unwrap().state, State::Paused);
    assert!(same(pb, 2 * MIB, 2));
    {
        let v = calls.lock().unwrap();
        assert!(!v.is_empty());
        assert!(v
            .iter()
            .all(|(op, _, total)| op == "swap" && *total == 6 * MIB));
        assert_eq!(v.last().unwrap().1, 6 * MIB);
        assert!(v.windows(2).all(|w| w[0].1 <= w[1].1));
    }
    // Back again; errors come with their kind.
    ctx.swap("swap-b", "swap-a").unwrap();
    assert!(same(pa, 4 * MIB, 1));
    assert_eq!(
        ctx.swap("swap-a", "swap-a").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        ctx.swap("swap-b", "swap-x").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // Pause and resume report "pause" / "resume"; a cleared callback is not called.
    calls.lock().unwrap().clear();
    ctx.pause("swap-a").unwrap();
    ctx.resume("swap-a").unwrap();
    {
        let v = calls.lock().unwrap();
        assert_eq!(v.first().unwrap().0, "pause");
        assert_eq!(v.last().unwrap(), &("resume".to_string(), 4 * MIB, 4 * MIB));
    }
    ctx.clear_progress().unwrap();
    calls.lock().unwrap().clear();
    ctx.pause("swap-a").unwrap();
    assert!(calls.lock().unwrap().is_empty());
    // A panicking callback does not unwind into C.
    ctx.set_progress(Some(|_: &str, _, _| panic!("progress panics")))
        .unwrap();
    ctx.resume("swap-a").unwrap();
    assert!(same(pa, 4 * MIB, 1));
}

#[test]
fn disk_regions_keep_their_content_in_a_directory() {
    let _g = serial();
    let ctx = ctx();
    let dir = scratch_dir("disk");
    // Without a directory a DISK region refuses to pause.
    let nodir = ctx
        .create_region("disk-nodir", &RegionOptions::with_policy(Policy::Disk))
        .unwrap();
    nodir.alloc(MIB).unwrap();
    assert_eq!(
        nodir.pause().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    nodir.set_disk_dir(Some(&dir)).unwrap();
    nodir.pause().unwrap();
    nodir.resume().unwrap();

    let r = ctx
        .create_region("disk", &RegionOptions::disk(&dir).flags(REGION_COALESCE))
        .unwrap();
    assert_eq!(r.policy(), Policy::Disk);
    let p = r.alloc(3 * MIB).unwrap();
    fill(p, 3 * MIB, 9);
    let paused = r.pause().unwrap();
    assert_eq!(paused.bytes_backed_up, 3 * MIB);
    let info = r.info().unwrap();
    assert_eq!(
        (info.state, info.policy, info.host_bytes),
        (State::Paused, Policy::Disk, 0)
    );
    assert_eq!(info.flags & REGION_COALESCE, REGION_COALESCE);
    assert_eq!(
        r.set_disk_dir(Some(&dir)).unwrap_err().kind(),
        ErrorKind::Paused
    );
    r.resume().unwrap();
    assert!(same(p, 3 * MIB, 9));
    // The file leaves no name in the directory.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert_eq!(
        r.set_disk_dir(Some(&dir.join("missing")))
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        ctx.create_region("disk-bad", &RegionOptions::disk(dir.join("missing")))
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        ctx.find_region("disk-bad", 0).unwrap_err().kind(),
        ErrorKind::NotFound,
        "a region whose directory failed is destroyed again"
    );
    let host = ctx
        .create_region("not-disk", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    assert_eq!(
        host.set_disk_dir(Some(&dir)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    drop((r, nodir));
    let _ = std::fs::remove_dir(&dir);
}

#[test]
fn async_resume_keeps_the_content() {
    let _g = serial();
    let ctx = ctx();
    let r = ctx
        .create_region("async", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let p = r.alloc(2 * MIB).unwrap();
    fill(p, 2 * MIB, 3);
    r.pause().unwrap();
    let res = r.resume_with(&ResumeOptions::asynchronous(0)).unwrap();
    assert_eq!(res.bytes_backed, 2 * MIB);
    // Any later call that needs the content waits for the restore: a pause does.
    r.pause().unwrap();
    ctx.resume_with(Some("async"), &ResumeOptions::default())
        .unwrap();
    assert!(same(p, 2 * MIB, 3));
    assert_eq!(
        ctx.swap_with(
            "async",
            "other",
            &Default::default(),
            &ResumeOptions::asynchronous(0)
        )
        .unwrap_err()
        .kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn export_and_import_share_memory_across_pauses() {
    let _g = serial();
    let ctx = ctx();
    let shared = ctx
        .create_region(
            "ipc-w",
            &RegionOptions::with_policy(Policy::Host).flags(REGION_SHAREABLE),
        )
        .unwrap();
    let p = shared.alloc(2 * MIB).unwrap();
    fill(p, 2 * MIB, 7);
    let path = sock("exp");
    let exp = ctx.exporter(&path, &ExporterOptions::default()).unwrap();
    assert_eq!(
        ctx.exporter(&path, &ExporterOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::Exists
    );
    exp.publish(&shared, Access::ReadWrite).unwrap();
    assert_eq!(
        exp.publish(&shared, Access::ReadWrite).unwrap_err().kind(),
        ErrorKind::Exists
    );

    // The importer: another context of this process (the same uid).
    let ictx = Context::new().unwrap();
    let quiesced = Arc::new(AtomicU64::new(0));
    let events: Arc<Mutex<Vec<ImportEvent>>> = Arc::new(Mutex::new(Vec::new()));
    let (q, ev) = (quiesced.clone(), events.clone());
    let imp = ictx
        .import(
            &path,
            "ipc-w",
            ImportOptions::new()
                .name("rust-test")
                .on_quiesce(move |_epoch| {
                    q.fetch_add(1, Ordering::SeqCst);
                    true
                })
                .on_event(move |e, _epoch| ev.lock().unwrap().push(e)),
        )
        .unwrap();
    assert_eq!(exp.importers().unwrap(), 1);
    let info = imp.info().unwrap();
    assert_eq!(
        (info.tag.as_str(), info.state, info.access, info.allocations),
        ("ipc-w", ImportState::Mapped, Access::ReadWrite, 1)
    );
    assert_eq!(info.exporter_pid, std::process::id() as i32);
    let (local, size) = imp.alloc(0).unwrap();
    assert_eq!(size, 2 * MIB);
    assert_eq!(imp.allocs().unwrap(), vec![(local, size)]);
    assert_eq!(imp.translate(p + 100).unwrap(), local + 100);
    assert_eq!(
        imp.translate(p + 4 * MIB).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert!(same(local, 2 * MIB, 7));
    // A pause revokes the importer's mapping first; the resume maps it again.
    shared.pause().unwrap();
    assert_eq!(quiesced.load(Ordering::SeqCst), 1);
    assert_eq!(imp.info().unwrap().state, ImportState::Revoked);
    shared.resume().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while imp.info().unwrap().state != ImportState::Mapped {
        assert!(std::time::Instant::now() < deadline, "not remapped");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(imp.alloc(0).unwrap().0, local, "same local address");
    assert!(same(local, 2 * MIB, 7));
    fill(local, MIB, 8); // read-write: the exporter sees it
    assert!(same(p, MIB, 8));
    {
        let e = events.lock().unwrap();
        assert!(e.contains(&ImportEvent::Revoked), "{:?}", e);
    }
    // The importer refuses: the exporter's pause fails and nothing changes.
    drop(imp);
    let refusing = ictx
        .import(
            &path,
            "ipc-w",
            ImportOptions::new().on_quiesce(|_| panic!("a panic refuses")),
        )
        .unwrap();
    assert_eq!(shared.pause().unwrap_err().kind(), ErrorKind::Refused);
    assert_eq!(shared.info().unwrap().state, State::Active);
    refusing.close().unwrap();
    assert_eq!(
        ictx.import(&path, "nope", ImportOptions::new())
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    // A context with an open exporter is not destroyed under it.
    let (ctx, e) = ctx.close().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    drop(exp);
    assert!(!path.exists());
    drop((shared, ctx));
}

#[test]
fn the_control_socket_serves_cmsctl() {
    let _g = serial();
    let ctx = ctx();
    let r = ctx
        .create_region("ctl-w", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let p = r.alloc(2 * MIB).unwrap();
    fill(p, 2 * MIB, 4);
    let path = sock("ctl");
    type Seen = Vec<(ControlOp, ControlPhase, String, bool)>;
    let seen: Arc<Mutex<Seen>> = Arc::new(Mutex::new(Vec::new()));
    let refuse = Arc::new(AtomicUsize::new(0));
    let (s, no) = (seen.clone(), refuse.clone());
    let ctl = ctx
        .control_socket(
            &path,
            ControlOptions::new().handler(move |req| {
                s.lock()
                    .unwrap()
                    .push((req.op, req.phase, req.tag.clone(), req.result.is_ok()));
                if req.phase == ControlPhase::Before && no.load(Ordering::SeqCst) != 0 {
                    Err(ErrorKind::Refused)
                } else {
                    Ok(())
                }
            }),
        )
        .unwrap();
    let cmsctl = std::env::var("CMS_CMSCTL").unwrap_or_else(|_| "cmsctl".to_string());
    let run = |args: &[&str]| {
        let out = Command::new(&cmsctl)
            .arg("--socket")
            .arg(&path)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} (set CMS_CMSCTL): {}", cmsctl, e));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, out) = run(&["status"]);
    assert!(
        ok && out.contains("ctl-w") && out.contains("active"),
        "{}",
        out
    );
    let (ok, out) = run(&["--json", "pause", "ctl-w"]);
    assert!(ok && out.contains("\"status\": \"CMS_OK\""), "{}", out);
    assert_eq!(r.info().unwrap().state, State::Paused);
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![
            (ControlOp::Pause, ControlPhase::Before, "ctl-w".into(), true),
            (ControlOp::Pause, ControlPhase::After, "ctl-w".into(), true),
        ]
    );
    let (ok, _) = run(&["resume", "ctl-w"]);
    assert!(ok);
    assert!(same(p, 2 * MIB, 4));
    refuse.store(1, Ordering::SeqCst);
    let (ok, out) = run(&["--json", "pause", "ctl-w"]);
    assert!(!ok && out.contains("CMS_ERR_REFUSED"), "{}", out);
    assert_eq!(r.info().unwrap().state, State::Active);
    drop(ctl);
    assert!(!path.exists());
    // Without a handler: status only, unless allow_all.
    let ctl = ctx.control_socket(&path, ControlOptions::new()).unwrap();
    assert!(!run(&["pause", "ctl-w"]).0);
    drop(ctl);
    let ctl = ctx
        .control_socket(&path, ControlOptions::new().allow_all())
        .unwrap();
    assert!(run(&["pause", "ctl-w"]).0);
    assert_eq!(r.info().unwrap().state, State::Paused);
    drop(ctl);
}

#[test]
fn hooks_route_allocations_to_the_pushed_region() {
    let _g = serial();
    let ctx = ctx();
    let r = ctx
        .create_region("hooked", &RegionOptions::default())
        .unwrap();
    assert_eq!(
        r.push_hook().unwrap_err().kind(),
        ErrorKind::InvalidArgument,
        "no hook context yet"
    );
    let hook = ctx.hook_context().unwrap();
    {
        let _g = r.push_hook().unwrap();
        assert!(cumemsaver::HookRegionGuard::is_current(&r));
        let p = cumemsaver::hook_alloc(MIB, -1).unwrap();
        assert_eq!(ctx.pointer_info(p).unwrap().region, r.id());
        cumemsaver::hook_free(p).unwrap();
        let t = cumemsaver::torch_alloc(MIB as isize, 0);
        assert_ne!(t, 0);
        assert_eq!(r.info().unwrap().allocations, 1);
        cumemsaver::torch_free(t, MIB as isize, 0);
        assert_eq!(r.info().unwrap().allocations, 0);
    }
    assert!(!cumemsaver::HookRegionGuard::is_current(&r));
    assert_eq!(
        cumemsaver::hook_alloc(MIB, -1).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(cumemsaver::torch_alloc(MIB as isize, 0), 0);
    drop(hook);
    assert_eq!(
        cumemsaver::hook_free(0x1000).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}
