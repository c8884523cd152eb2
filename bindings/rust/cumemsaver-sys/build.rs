// SPDX-License-Identifier: MIT
//! Build script of cumemsaver-sys (standard library only): linking.
//!
//! With `CUMEMSAVER_LIB_DIR` set, links `-lcumemsaver` from that directory. Otherwise runs
//! the `pkg-config` binary (or `$PKG_CONFIG`) with `--libs-only-L` and `--libs-only-l
//! cumemsaver`. Without either, falls back to the linker's default search path (with a
//! warning). Dependents see `DEP_CUMEMSAVER_INCLUDE` and `DEP_CUMEMSAVER_LIBDIR` (the
//! `links` metadata).
//!
//! The layout probe (tests/layout.rs) needs nothing from here: tools/abigen generates its
//! two sides, tests/generated/layout.rs and tests/generated/probe.c, from the ABI
//! description.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "CUMEMSAVER_LIB_DIR",
        "CUMEMSAVER_INCLUDE_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    link();
}

fn env_nonempty(name: &str) -> Option<String> {
    match env::var(name) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => None,
    }
}

fn pkg_config(args: &[&str]) -> Option<String> {
    let bin = env_nonempty("PKG_CONFIG").unwrap_or_else(|| "pkg-config".to_string());
    let out = Command::new(&bin)
        .args(args)
        .arg("cumemsaver")
        .output()
        .ok()?;
    if !out.status.success() {
        println!(
            "cargo:warning=`{} {} cumemsaver` failed: {}",
            bin,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn link() {
    if let Some(dir) = env_nonempty("CUMEMSAVER_LIB_DIR") {
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-lib=dylib=cumemsaver");
        println!("cargo:libdir={}", dir);
        if let Some(inc) = env_nonempty("CUMEMSAVER_INCLUDE_DIR") {
            println!("cargo:include={}", inc);
        }
        return;
    }
    let dirs = pkg_config(&["--libs-only-L"]);
    let libs = pkg_config(&["--libs-only-l"]);
    match (dirs, libs) {
        (Some(dirs), Some(libs)) => {
            for d in dirs.split_whitespace() {
                if let Some(d) = d.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={}", d);
                    println!("cargo:libdir={}", d);
                }
            }
            for l in libs.split_whitespace() {
                if let Some(l) = l.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib={}", l);
                }
            }
            if let Some(inc) = pkg_config(&["--cflags-only-I"]) {
                for i in inc.split_whitespace() {
                    if let Some(i) = i.strip_prefix("-I") {
                        println!("cargo:include={}", i);
                    }
                }
            }
        }
        _ => {
            println!(
                "cargo:warning=cumemsaver not found with pkg-config (set PKG_CONFIG_PATH or \
                 CUMEMSAVER_LIB_DIR); linking -lcumemsaver from the default search path"
            );
            println!("cargo:rustc-link-lib=dylib=cumemsaver");
        }
    }
}
