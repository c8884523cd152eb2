// SPDX-License-Identifier: MIT

package cumemsaver

import (
	"os"
	"strings"
	"testing"
)

// mappedSimulation is the libcumemsaver-sim.so mapped in this process, or "".
func mappedSimulation(t *testing.T) string {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(line); len(f) == 6 && strings.HasSuffix(f[5], "/libcumemsaver-sim.so") {
			return f[5]
		}
	}
	return ""
}

// Simulation as the driver path loads the libcumemsaver-sim.so installed with the library
// the test links (tools/scripts/test-bindings.sh: <libdir>/cumemsaver/ of the staged install).
func TestSimulationConstantLoadsInstalledSimulation(t *testing.T) {
	if Simulation != "sim" {
		t.Fatalf("Simulation = %q", Simulation)
	}
	ctx, err := NewContext(&ContextOptions{DriverPath: Simulation})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	r := must(ctx.NewRegion("sim-switch", &RegionOptions{Policy: PolicyHost}))
	p := must(r.Alloc(mib))
	b := hostBytes(p, 3)
	copy(b, "abc")
	must(ctx.Pause("sim-switch"))
	must(ctx.Resume("sim-switch"))
	if string(b) != "abc" {
		t.Fatalf("HOST content after a cycle: %q", b)
	}
	sim := mappedSimulation(t)
	if sim == "" {
		t.Fatal("no libcumemsaver-sim.so mapped")
	}
	t.Logf("Simulation loaded %s", sim)
}
