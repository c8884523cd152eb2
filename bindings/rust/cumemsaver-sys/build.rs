// SPDX-License-Identifier: MIT
//! Build script of cumemsaver-sys (standard library only): linking.
//!
//! With the `bundled` feature, builds the library from the repository this crate is in
//! (or `$CUMEMSAVER_SOURCE_DIR`) with CMake in `OUT_DIR`, as `pip install` does for Python:
//! the targets `cumemsaver` and `cumemsaver-sim` (so that the driver path "sim" finds the
//! simulation in that build tree), no tests, no tools; `$CUMEMSAVER_CMAKE_ARGS` adds
//! configure arguments, `$NUM_JOBS` (set by cargo) the build jobs. Needs `cmake` and a C
//! compiler (Ninja when present).
//!
//! Otherwise, with `CUMEMSAVER_LIB_DIR` set, links `-lcumemsaver` from that directory, else
//! runs the `pkg-config` binary (or `$PKG_CONFIG`) with `--libs-only-L` and `--libs-only-l
//! cumemsaver`. Without either, links the libcumemsaver.so of the linker's default search
//! path (with a warning) when the C compiler finds one there (`cc -print-file-name`), else
//! fails with what to do: the feature `bundled`, pkg-config or `CUMEMSAVER_LIB_DIR`.
//! Dependents see `DEP_CUMEMSAVER_INCLUDE` and `DEP_CUMEMSAVER_LIBDIR` (the
//! `links` metadata).
//!
//! The layout probe (tests/layout.rs) needs nothing from here: tools/abigen generates its
//! two sides, tests/generated/layout.rs and tests/generated/probe.c, from the ABI
//! description.

use std::env;
use std::path::{Path, PathBuf};
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
    if env::var_os("CARGO_FEATURE_BUNDLED").is_some() {
        bundled();
    } else {
        link();
    }
}

/// The repository root to build: `$CUMEMSAVER_SOURCE_DIR`, else three levels above this
/// crate (`bindings/rust/cumemsaver-sys`).
fn source_dir() -> PathBuf {
    println!("cargo:rerun-if-env-changed=CUMEMSAVER_SOURCE_DIR");
    let src = match env_nonempty("CUMEMSAVER_SOURCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../.."),
    };
    if !src.join("CMakeLists.txt").is_file() || !src.join("include/cumemsaver.h").is_file() {
        fail(&format!(
            "feature `bundled`: no cumemsaver source tree at {} (CMakeLists.txt and \
             include/cumemsaver.h); set CUMEMSAVER_SOURCE_DIR to the repository root",
            src.display()
        ));
    }
    src
}

fn fail(msg: &str) -> ! {
    eprintln!("cumemsaver-sys: {}", msg);
    std::process::exit(1);
}

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run {:?}: {}", cmd, e)));
    if !status.success() {
        fail(&format!("{:?} failed ({})", cmd, status));
    }
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .map_or(false, |o| o.status.success())
}

/// Feature `bundled`: configures and builds the library with CMake in OUT_DIR and links it.
fn bundled() {
    println!("cargo:rerun-if-env-changed=CUMEMSAVER_CMAKE_ARGS");
    let src = source_dir();
    for part in ["CMakeLists.txt", "cmake", "include", "src", "abi"] {
        println!("cargo:rerun-if-changed={}", src.join(part).display());
    }
    if !have("cmake") {
        fail("feature `bundled` needs cmake and a C compiler (Debian: apt install cmake gcc)");
    }
    let build = PathBuf::from(env::var("OUT_DIR").unwrap()).join("cmake-build");
    if !build.join("CMakeCache.txt").is_file() {
        let mut configure = Command::new("cmake");
        configure.arg("-S").arg(&src).arg("-B").arg(&build).args([
            "-DCMAKE_BUILD_TYPE=Release",
            "-DCMS_BUILD_TESTS=OFF",
            "-DCMS_BUILD_TOOLS=OFF",
        ]);
        if have("ninja") {
            configure.args(["-G", "Ninja"]);
        }
        if let Some(extra) = env_nonempty("CUMEMSAVER_CMAKE_ARGS") {
            configure.args(extra.split_whitespace());
        }
        run(&mut configure);
    }
    let mut compile = Command::new("cmake");
    compile
        .arg("--build")
        .arg(&build)
        .args(["--target", "cumemsaver", "cumemsaver-sim"]);
    if let Some(jobs) = env_nonempty("NUM_JOBS") {
        compile.args(["--parallel", &jobs]);
    }
    run(&mut compile);
    emit_bundled(&build, &src.join("include"));
}

fn emit_bundled(build: &Path, include: &Path) {
    if !build.join("libcumemsaver.so.1").exists() {
        fail(&format!(
            "the build made no {}",
            build.join("libcumemsaver.so.1").display()
        ));
    }
    // cargo run / cargo test put this directory (inside the target directory) on
    // LD_LIBRARY_PATH; a program run otherwise needs an rpath or LD_LIBRARY_PATH to it
    println!("cargo:rustc-link-search=native={}", build.display());
    println!("cargo:rustc-link-lib=dylib=cumemsaver");
    println!("cargo:libdir={}", build.display());
    println!("cargo:include={}", include.display());
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
        _ => match default_path_library() {
            Some(file) => {
                println!(
                    "cargo:warning=cumemsaver not found with pkg-config; linking {} from the \
                     linker's default search path",
                    file
                );
                println!("cargo:rustc-link-lib=dylib=cumemsaver");
            }
            None => fail(
                "libcumemsaver not found: pkg-config knows no `cumemsaver` (see the warning \
                 above), CUMEMSAVER_LIB_DIR is not set and the linker's default search path \
                 has no libcumemsaver.so. Either build the library with the crate: \
                 `cargo build --features bundled` (needs cmake and a C compiler; docs/rust.md); \
                 or install it (the libcumemsaver-dev package, or `cmake --install`) and point \
                 pkg-config at its cumemsaver.pc (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig); or \
                 set CUMEMSAVER_LIB_DIR to the directory holding libcumemsaver.so",
            ),
        },
    }
}

/// libcumemsaver.so in the C compiler's (so the linker's) default search path: the path
/// `$CC -print-file-name` (default `cc`) answers, or None when it knows no such file. When
/// no compiler answers, assumes there is one (the link then says).
fn default_path_library() -> Option<String> {
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=LIBRARY_PATH");
    let cc = env_nonempty("CC").unwrap_or_else(|| "cc".to_string());
    let out = match Command::new(&cc)
        .arg("-print-file-name=libcumemsaver.so")
        .output()
    {
        Ok(out) if out.status.success() => out,
        _ => return Some("-lcumemsaver".to_string()),
    };
    let file = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if file.contains('/') && Path::new(&file).exists() {
        Some(file)
    } else {
        None
    }
}
