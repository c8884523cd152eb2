// SPDX-License-Identifier: MIT
//! The Rust declarations agree with the installed C header: a C probe (written by build.rs
//! from src/ffi.rs, so it covers every struct, field and constant there) is compiled with
//! the `cc` binary against `pkg-config --cflags cumemsaver` (or `CUMEMSAVER_INCLUDE_DIR`)
//! and its sizeof/_Alignof/offsetof/values are compared with the Rust ones.

#![allow(
    clippy::assertions_on_constants,
    clippy::field_reassign_with_default,
    clippy::unnecessary_cast
)]

use cumemsaver_sys::*;
use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// offsetof without core::mem::offset_of! (Rust 1.77): pointer arithmetic on an
/// uninitialised value, never reading it.
macro_rules! field_offset {
    ($t:ty, $f:ident) => {{
        let u = ::core::mem::MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        let field = unsafe { ::core::ptr::addr_of!((*base).$f) };
        (field as *const u8 as usize) - (base as *const u8 as usize)
    }};
}

fn size_of_pointee<T>(_: *const T) -> usize {
    ::core::mem::size_of::<T>()
}

macro_rules! field_size {
    ($t:ty, $f:ident) => {{
        let u = ::core::mem::MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        size_of_pointee(unsafe { ::core::ptr::addr_of!((*base).$f) })
    }};
}

include!(concat!(env!("OUT_DIR"), "/layout_checks.rs"));

fn cflags() -> Vec<String> {
    if let Ok(dir) = env::var("CUMEMSAVER_INCLUDE_DIR") {
        if !dir.is_empty() {
            return vec![format!("-I{}", dir)];
        }
    }
    let bin = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&bin)
        .args(["--cflags", "cumemsaver"])
        .output()
        .expect("cannot run pkg-config");
    assert!(
        out.status.success(),
        "pkg-config --cflags cumemsaver failed (set PKG_CONFIG_PATH): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn c_values() -> BTreeMap<String, i128> {
    let dir: PathBuf =
        env::temp_dir().join(format!("cumemsaver-sys-layout-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    fs::write(&src, C_PROBE).unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-Werror")
        .args(cflags())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("cannot run the C compiler (cc)");
    assert!(
        out.status.success(),
        "the C probe ({}, kept) does not compile against the installed header:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("cannot run the probe");
    assert!(run.status.success());
    let _ = fs::remove_dir_all(&dir);
    let mut map = BTreeMap::new();
    for line in String::from_utf8(run.stdout).unwrap().lines() {
        let (key, value) = line.rsplit_once(' ').expect("probe line");
        map.insert(key.to_string(), value.parse::<i128>().expect("probe value"));
    }
    map
}

#[test]
fn structs_and_constants_match_the_c_header() {
    let c = c_values();
    let rust = rust_values();
    assert_eq!(
        c.len(),
        rust.len(),
        "the probe printed a different set of keys"
    );
    let mut bad = Vec::new();
    for (key, value) in &rust {
        match c.get(*key) {
            Some(cv) if cv == value => {}
            Some(cv) => bad.push(format!("{}: C {} Rust {}", key, cv, value)),
            None => bad.push(format!("{}: missing in the probe's output", key)),
        }
    }
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
    // The checks cover what the header has (not a vacuous pass on an unparsed ffi.rs).
    assert!(STRUCT_COUNT >= 8, "only {} structs checked", STRUCT_COUNT);
    assert!(CONST_COUNT >= 30, "only {} constants checked", CONST_COUNT);
    for key in [
        "sizeof cms_region_info",
        "offsetof cms_region_info.restore_pending",
        "offsetof cms_context_options.log_fn",
        "const CMS_ERR_FORKED",
        "const CMS_POLICY_HOST",
    ] {
        assert!(c.contains_key(key), "{} not checked", key);
    }
}

#[test]
fn every_declared_function_links() {
    let fns = function_addresses();
    assert!(fns.len() >= 24, "only {} functions declared", fns.len());
    for (name, addr) in fns {
        assert_ne!(addr, 0, "{} has no address", name);
    }
}

#[test]
fn default_structs_carry_their_size() {
    let o = cms_region_options::default();
    assert_eq!(o.struct_size, ::core::mem::size_of::<cms_region_options>());
    assert_eq!((o.device, o.policy, o.flags), (0, 0, 0));
    // The library's own initialiser agrees with Default.
    let mut lib = cms_region_options::default();
    lib.struct_size = 0;
    lib.device = 7;
    lib.policy = 9;
    lib.flags = 3;
    assert_eq!(unsafe { cms_region_options_init(&mut lib) }, CMS_OK);
    assert_eq!(lib.struct_size, o.struct_size);
    assert_eq!(
        (lib.device, lib.policy as u64, lib.flags as u64),
        (0, CMS_POLICY_DISCARD as u64, 0)
    );
    let mut p = cms_pause_options::default();
    assert_eq!(unsafe { cms_pause_options_init(&mut p) }, CMS_OK);
    assert_eq!(p.struct_size, ::core::mem::size_of::<cms_pause_options>());
    let r = cms_region_info::default();
    assert_eq!(r.struct_size, ::core::mem::size_of::<cms_region_info>());
    assert_eq!(r.tag.len() as i128, CMS_TAG_MAX as i128 + 1);
}

#[test]
fn runtime_version_matches_the_declarations() {
    assert_eq!(unsafe { cms_version() } as i128, CMS_VERSION_NUMBER as i128);
    let name = unsafe { ::std::ffi::CStr::from_ptr(cms_status_name(CMS_ERR_NOT_FOUND)) };
    assert_eq!(name.to_str().unwrap(), "CMS_ERR_NOT_FOUND");
}
