// SPDX-License-Identifier: MIT

// Command cycle runs one pause/resume cycle: a HOST region keeps its content, a DISCARD
// region its address.
//
//	CMS_DRIVER_LIBRARY=sim go run ./examples/cycle   # the simulation installed with the library
//
// On the host simulation a device pointer is a host address, so the example writes and
// checks the content directly; on a GPU it only checks addresses.
package main

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/cumemsaver/cumemsaver/bindings/go/cumemsaver"
)

const size = 8 << 20

func hostBytes(ptr uint64) []byte {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&ptr))
	return unsafe.Slice((*byte)(p), size)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cycle:", err)
		os.Exit(1)
	}
}

func run() error {
	lib := os.Getenv("CMS_DRIVER_LIBRARY")
	onSim := lib == cumemsaver.Simulation || strings.Contains(lib, "cumemsaver-sim")
	where := "driver"
	if onSim {
		where = "host simulation"
	}
	fmt.Printf("cumemsaver %s (%s)\n", cumemsaver.VersionString(), where)
	ctx, err := cumemsaver.NewContext(nil)
	if err != nil {
		return err
	}
	defer ctx.Close()
	weights, err := ctx.NewRegion("weights", &cumemsaver.RegionOptions{Policy: cumemsaver.PolicyHost})
	if err != nil {
		return err
	}
	kv, err := ctx.NewRegion("kv_cache", &cumemsaver.RegionOptions{Policy: cumemsaver.PolicyDiscard})
	if err != nil {
		return err
	}
	w, err := weights.Alloc(size)
	if err != nil {
		return err
	}
	k, err := kv.Alloc(size)
	if err != nil {
		return err
	}
	if onSim {
		for i, b := 0, hostBytes(w); i < len(b); i++ {
			b[i] = byte(i % 251)
		}
	}
	fmt.Printf("weights 0x%x, kv_cache 0x%x, %d bytes each\n", w, k, size)
	free, total, err := ctx.DeviceMemoryInfo(0)
	if err != nil {
		return err
	}
	fmt.Printf("driver free before pause: %d MiB of %d MiB\n", free>>20, total>>20)

	p, err := ctx.PauseAll()
	if err != nil {
		return err
	}
	fmt.Printf("pause:  %d regions, %d allocations, released %d MiB, backed up %d MiB, driver free +%d MiB, %v\n",
		p.Regions, p.Allocations, p.BytesReleased>>20, p.BytesBackedUp>>20,
		(p.DriverFreeAfter-p.DriverFreeBefore)>>20, p.Elapsed)
	info, err := weights.Info()
	if err != nil {
		return err
	}
	fmt.Printf("weights: %s (%s), backed %d bytes, backup %d bytes\n",
		info.State, info.Policy, info.BackedBytes, info.BackupBytes)

	r, err := ctx.ResumeAll()
	if err != nil {
		return err
	}
	fmt.Printf("resume: %d regions, %d allocations, backed %d MiB, restored %d MiB, %v\n",
		r.Regions, r.Allocations, r.BytesBacked>>20, r.BytesRestored>>20, r.Elapsed)
	pw, err := ctx.PointerInfo(w)
	if err != nil {
		return err
	}
	pk, err := ctx.PointerInfo(k)
	if err != nil {
		return err
	}
	if info, err = weights.Info(); err != nil {
		return err
	}
	same := pw.Base == w && pk.Base == k && pw.In(weights) && pk.In(kv)
	fmt.Printf("weights: %s, epoch %d, same addresses: %v\n", info.State, info.Epoch, same)
	ok := same && info.Epoch == 1
	if onSim {
		kept := true
		for i, b := range hostBytes(w) {
			if b != byte(i%251) {
				kept = false
				break
			}
		}
		fmt.Printf("weights content kept: %v\n", kept)
		ok = ok && kept
	}
	if !ok {
		return fmt.Errorf("FAIL")
	}
	fmt.Println("cycle: PASS")
	return nil
}
