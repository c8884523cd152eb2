// SPDX-License-Identifier: MIT
//! The 1.3 API on the host simulation: verified backups (`REGION_VERIFY`): a changed host
//! backup fails the resume with `ErrorKind::VerifyFailed`, rolled back, until the flag is
//! cleared. On the simulation a device pointer is a host address.

mod common;
use common::*;
use cumemsaver::{ErrorKind, Policy, RegionOptions, State, REGION_VERIFY};

#[test]
fn verified_backup_catches_a_changed_backup() {
    let _g = serial();
    let ctx = ctx();
    let r = ctx
        .create_region(
            "vf",
            &RegionOptions::with_policy(Policy::Host).flags(REGION_VERIFY),
        )
        .unwrap();
    let a = r.alloc(MIB).unwrap();
    fill(a, MIB, 7);
    r.pause().unwrap();
    r.resume().unwrap();
    let s = r.stats().unwrap();
    assert_eq!(s.bytes_verified, MIB, "{:?}", s);
    assert!(s.verify_ns > 0, "{:?}", s);
    r.pause().unwrap();
    let b = ctx.backup(a).unwrap();
    unsafe { *((b.host + 100) as *mut u8) ^= 0xff };
    let e = r.resume().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::VerifyFailed, "{}", e);
    assert_eq!(r.info().unwrap().state, State::Paused);
    r.set_flags(REGION_VERIFY, 0).unwrap();
    r.resume().unwrap();
    let got = unsafe { *((a + 100) as *const u8) };
    assert_eq!(got, (100u8.wrapping_mul(13).wrapping_add(7)) ^ 0xff); // taken back as it was
    let zero = ctx.create_region(
        "vz",
        &RegionOptions::with_policy(Policy::Zero).flags(REGION_VERIFY),
    );
    assert_eq!(zero.unwrap_err().kind(), ErrorKind::InvalidArgument);
}
