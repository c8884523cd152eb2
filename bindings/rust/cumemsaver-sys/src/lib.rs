// SPDX-License-Identifier: MIT
//! Raw declarations of the C ABI of `libcumemsaver.so.1` (`include/cumemsaver.h`).
//!
//! Everything here is generated from the ABI description (`abi/cumemsaver.json`, by
//! `tools/abigen`) into `src/ffi.rs`: C names kept exactly, one `extern "C"` block,
//! `#[repr(C)]` structs whose `Default` is zeroed with `struct_size` set. Do not edit
//! `ffi.rs` by hand; regenerate it. The safe API is the `cumemsaver` crate.
//!
//! Linking: `build.rs` asks `pkg-config cumemsaver` for the library directory, or takes
//! it from the environment variable `CUMEMSAVER_LIB_DIR`.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

mod ffi;
pub use ffi::*;
