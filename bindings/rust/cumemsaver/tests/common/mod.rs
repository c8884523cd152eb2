// SPDX-License-Identifier: MIT
//! Helpers shared by the integration tests (each test file is its own crate and uses what it
//! needs). On the simulation a device pointer is a host address.
#![allow(dead_code)]

use cumemsaver::Context;
use std::sync::{Mutex, MutexGuard};

pub const MIB: u64 = 1 << 20;
static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of one file that share the simulated device.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A context on the simulation (refuses to run against a real driver).
pub fn ctx() -> Context {
    let lib = std::env::var("CMS_DRIVER_LIBRARY").unwrap_or_default();
    assert!(
        lib.contains("sim"),
        "run these tests with CMS_DRIVER_LIBRARY=<build>/src/sim/libcumemsaver-sim.so"
    );
    Context::new().expect("context")
}

/// Writes the pattern of seed over len bytes at ptr.
pub fn fill(ptr: u64, len: u64, seed: u8) {
    let s = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len as usize) };
    for (i, b) in s.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(13).wrapping_add(seed);
    }
}

/// Whether len bytes at ptr hold the pattern of seed.
pub fn same(ptr: u64, len: u64, seed: u8) -> bool {
    let s = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
    s.iter()
        .enumerate()
        .all(|(i, b)| *b == (i as u8).wrapping_mul(13).wrapping_add(seed))
}
