// SPDX-License-Identifier: MIT
//! The 1.3 API on the host simulation: frozen regions (`Region::freeze`, `Region::thaw`,
//! `RegionInfo::frozen`, `RegionStats::bytes_unchanged`, `ErrorKind::Frozen`). On the
//! simulation a device pointer is a host address (read-only while frozen: only read).

mod common;
use common::*;
use cumemsaver::{ErrorKind, Policy, RegionOptions};

#[test]
fn frozen_region_pauses_copy_nothing_after_the_first() {
    let _g = serial();
    let ctx = ctx();
    let r = ctx
        .create_region("fr-w", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let p = r.alloc(MIB).unwrap();
    fill(p, MIB, 5);
    r.freeze().unwrap();
    r.freeze().unwrap(); // frozen already: nothing
    assert!(r.info().unwrap().frozen);
    assert_eq!(r.alloc(MIB).unwrap_err().kind(), ErrorKind::Frozen);
    r.pause().unwrap(); // the first pause after the freeze copies
    r.resume().unwrap();
    for _ in 0..2 {
        r.pause().unwrap();
        r.resume().unwrap();
    }
    let s = r.stats().unwrap();
    assert_eq!((s.bytes_to_store, s.bytes_unchanged), (MIB, 2 * MIB));
    assert!(same(p, MIB, 5));
    r.thaw().unwrap();
    assert!(!r.info().unwrap().frozen);
    fill(p, MIB, 6); // writable again
    r.pause().unwrap();
    r.resume().unwrap();
    assert_eq!(r.stats().unwrap().bytes_to_store, 2 * MIB);
    assert!(same(p, MIB, 6));
}
