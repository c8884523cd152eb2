// SPDX-License-Identifier: MIT
//! The switch to the host simulation: `SIMULATION` as the driver path loads the
//! `libcumemsaver-sim.so` installed with the library the test links (tools/scripts/test-bindings.sh:
//! `<libdir>/cumemsaver/` of the staged install; with the `bundled` feature: the build tree
//! in `OUT_DIR`). sim.rs checks that a driver that cannot be loaded names the switch.

mod common;
use common::*;
use cumemsaver::{Context, ContextOptions, Policy, RegionOptions, SIMULATION};

fn mapped_simulation() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libcumemsaver-sim.so"))
        .map(|p| p.to_string())
}

#[test]
fn simulation_constant_loads_the_installed_simulation() {
    let _g = serial();
    assert_eq!(SIMULATION, "sim");
    let ctx = Context::with_options(ContextOptions::new().driver_path(SIMULATION)).unwrap();
    let r = ctx
        .create_region("sim-switch", &RegionOptions::with_policy(Policy::Host))
        .unwrap();
    let p = r.alloc(MIB).unwrap();
    fill(p, MIB, 7);
    ctx.pause("sim-switch").unwrap();
    ctx.resume("sim-switch").unwrap();
    assert!(
        same(p, MIB, 7),
        "HOST content across a cycle on the simulation"
    );
    let sim = mapped_simulation().expect("a libcumemsaver-sim.so is mapped");
    println!("SIMULATION loaded {}", sim);
}
