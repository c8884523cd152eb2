// SPDX-License-Identifier: MIT
//! Build script of cumemsaver-sys (standard library only).
//!
//! 1. Linking. With `CUMEMSAVER_LIB_DIR` set, links `-lcumemsaver` from that directory.
//!    Otherwise runs the `pkg-config` binary (or `$PKG_CONFIG`) with `--libs-only-L` and
//!    `--libs-only-l cumemsaver`. Without either, falls back to the linker's default
//!    search path (with a warning). Dependents see `DEP_CUMEMSAVER_INCLUDE` and
//!    `DEP_CUMEMSAVER_LIBDIR` (the `links` metadata).
//! 2. Layout checks. Reads `src/ffi.rs` and writes `$OUT_DIR/layout_checks.rs`: the source
//!    of a C probe that prints sizeof/_Alignof/offsetof of every struct and field and
//!    the value of every constant, and the same figures computed on the Rust side.
//!    `tests/layout.rs` compiles the probe against the installed header and compares.

use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/ffi.rs");
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
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let ffi = fs::read_to_string(manifest.join("src").join("ffi.rs"))
        .expect("src/ffi.rs is missing: run tools/abigen to generate it");
    fs::write(out.join("layout_checks.rs"), layout_checks(&ffi))
        .expect("cannot write layout_checks.rs");
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

struct Item {
    name: String,
    fields: Vec<String>,
}

/// A line-oriented reader of the generated ffi.rs: `pub struct NAME {` ... `pub FIELD: T,`
/// ... `}`, `pub const NAME: T = V;` and `pub fn NAME(` inside the extern block.
fn parse(ffi: &str) -> (Vec<Item>, Vec<String>, Vec<String>) {
    let mut structs = Vec::new();
    let mut consts = Vec::new();
    let mut fns = Vec::new();
    let mut cur: Option<Item> = None;
    for raw in ffi.lines() {
        let line = raw.trim();
        if line.starts_with("//") || line.starts_with("#") {
            continue;
        }
        if let Some(item) = cur.as_mut() {
            if line.starts_with('}') {
                let item = cur.take().unwrap();
                if !item.fields.is_empty() {
                    structs.push(item);
                }
            } else if let Some(rest) = line.strip_prefix("pub ") {
                if let Some(colon) = rest.find(':') {
                    item.fields.push(rest[..colon].trim().to_string());
                }
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub struct ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `pub struct cms_context { _opaque: [u8; 0] }` on one line: opaque, no layout.
            if rest.contains('{') && !rest.contains('}') {
                cur = Some(Item {
                    name,
                    fields: Vec::new(),
                });
            }
        } else if let Some(rest) = line.strip_prefix("pub const ") {
            if let Some(colon) = rest.find(':') {
                let ty = rest[colon + 1..].split('=').next().unwrap_or("").trim();
                let integer = !(ty.starts_with('&')
                    || ty.starts_with('[')
                    || ty.starts_with('*')
                    || ty == "f32"
                    || ty == "f64"
                    || ty == "bool");
                if integer {
                    consts.push(rest[..colon].trim().to_string());
                }
            }
        } else if let Some(pos) = line.find("fn ") {
            let head = &line[..pos];
            if head.trim_end().ends_with("pub") || head.contains("pub ") {
                let name: String = line[pos + 3..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.starts_with("cms_") && line.contains('(') && !line.contains("extern") {
                    fns.push(name);
                }
            }
        }
    }
    (structs, consts, fns)
}

fn c_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn layout_checks(ffi: &str) -> String {
    let (structs, consts, fns) = parse(ffi);
    let mut c = String::new();
    let mut r = String::new();
    c.push_str("#include <cumemsaver.h>\n#include <stddef.h>\n#include <stdio.h>\n\n");
    c.push_str("#define P(key, v) printf(\"%s %lld\\n\", key, (long long)(v))\n");
    c.push_str("int main(void)\n{\n");
    r.push_str("#[allow(unused_unsafe, clippy::all)]\npub fn rust_values() -> Vec<(&'static str, i128)> {\n");
    r.push_str("    let mut v: Vec<(&'static str, i128)> = Vec::new();\n");
    for s in &structs {
        let n = &s.name;
        let key = format!("sizeof {}", n);
        c.push_str(&format!("\tP({}, sizeof({}));\n", c_string(&key), n));
        r.push_str(&format!(
            "    v.push(({:?}, ::core::mem::size_of::<{}>() as i128));\n",
            key, n
        ));
        let key = format!("alignof {}", n);
        c.push_str(&format!("\tP({}, _Alignof({}));\n", c_string(&key), n));
        r.push_str(&format!(
            "    v.push(({:?}, ::core::mem::align_of::<{}>() as i128));\n",
            key, n
        ));
        for f in &s.fields {
            // A Rust keyword is a raw identifier (`r#fn`) in Rust, plain in C.
            let cf = f.strip_prefix("r#").unwrap_or(f);
            let key = format!("offsetof {}.{}", n, cf);
            c.push_str(&format!(
                "\tP({}, offsetof({}, {}));\n",
                c_string(&key),
                n,
                cf
            ));
            r.push_str(&format!(
                "    v.push(({:?}, field_offset!({}, {}) as i128));\n",
                key, n, f
            ));
            let key = format!("sizeof {}.{}", n, cf);
            c.push_str(&format!(
                "\tP({}, sizeof(((const {} *)0)->{}));\n",
                c_string(&key),
                n,
                cf
            ));
            r.push_str(&format!(
                "    v.push(({:?}, field_size!({}, {}) as i128));\n",
                key, n, f
            ));
        }
    }
    for k in &consts {
        let key = format!("const {}", k);
        c.push_str(&format!("\tP({}, {});\n", c_string(&key), k));
        r.push_str(&format!("    v.push(({:?}, {} as i128));\n", key, k));
    }
    c.push_str("\treturn 0;\n}\n");
    r.push_str("    v\n}\n\n");
    r.push_str(
        "/// Every function of the extern block with its address (forces each symbol to link).\n",
    );
    r.push_str("pub fn function_addresses() -> Vec<(&'static str, usize)> {\n    vec![\n");
    for f in &fns {
        r.push_str(&format!(
            "        ({:?}, {} as *const () as usize),\n",
            f, f
        ));
    }
    r.push_str("    ]\n}\n\n");
    r.push_str(&format!(
        "pub const STRUCT_COUNT: usize = {};\npub const CONST_COUNT: usize = {};\n",
        structs.len(),
        consts.len()
    ));
    r.push_str(&format!("pub const C_PROBE: &str = {:?};\n", c));
    r
}
