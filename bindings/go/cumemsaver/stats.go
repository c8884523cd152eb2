// SPDX-License-Identifier: MIT

package cumemsaver

// Observability (1.2): a region's cumulative counters and the list of a context's regions.

/*
#include <cumemsaver.h>
*/
import "C"

import "unsafe"

// RegionStats are the identity and cumulative counters of a region since its creation
// (cms_region_stats, since 1.2): Region.Stats, Context.Regions. A pause (resume) is a
// committed transition of the region to paused (active); a call that skips the region,
// already in the target state, counts nothing.
type RegionStats struct {
	Tag      string
	Device   int32
	Policy   Policy
	State    State  // when read
	RegionID uint64 // creation number, unique in its context, ascending (not a RegionID)
	Pauses   uint64 // committed pauses (Pause, Region.Pause, the pause side of Swap)
	Resumes  uint64 // committed resumes
	Swaps    uint64 // of Pauses + Resumes, those made by Swap
	// Failures counts the failed pause, resume and swap calls that were to change this
	// region (every region of such a call counts its status once).
	Failures uint64
	// FailuresByStatus: entry k counts status -k; entry 0 the statuses below
	// -(StatsStatusSlots-1). See FailuresOf.
	FailuresByStatus [StatsStatusSlots]uint64
	BytesReleased    uint64 // physical bytes released by its pauses (cuMemRelease)
	BytesBacked      uint64 // physical bytes created and mapped by its resumes
	BytesToStore     uint64 // content bytes its pauses copied to its store (HOST, DISK)
	BytesFromStore   uint64 // content bytes its resumes copied back from its store
	// PauseNs and ResumeNs are nanoseconds of its device's work in the calls that paused
	// / resumed it (not divided among the regions of a call).
	PauseNs  uint64
	ResumeNs uint64
	// Since 1.3 (RegionPrepare): BytesPrepared are host backup bytes made ahead by the
	// background preparation that became backups; PrepareNs the nanoseconds the background
	// thread spent making host backups for the region.
	BytesPrepared uint64
	PrepareNs     uint64
	// BytesVerified (1.3, RegionVerify): content bytes its resumes checked against the
	// checksum of the pause before; VerifyNs: nanoseconds its device spent checksumming in
	// the calls that paused or resumed it.
	BytesVerified uint64
	VerifyNs      uint64
	// BytesUnchanged: content bytes its pauses did not copy because the region was frozen
	// and its backup still held them (since 1.3; not in BytesToStore).
	BytesUnchanged uint64
}

// FailuresOf is the number of failed calls that ended with status s (negative, e.g.
// ErrOutOfDeviceMemory); the statuses below -(StatsStatusSlots-1) share one count; 0 for
// OK.
func (s *RegionStats) FailuresOf(st Status) uint64 {
	switch {
	case st >= 0:
		return 0
	case st <= -Status(StatsStatusSlots):
		return s.FailuresByStatus[0]
	default:
		return s.FailuresByStatus[-st]
	}
}

func regionStats(c *C.cms_region_stats) RegionStats {
	s := RegionStats{
		Tag:            C.GoString(&c.tag[0]),
		Device:         int32(c.device),
		Policy:         Policy(c.policy),
		State:          State(c.state),
		RegionID:       uint64(c.region_id),
		Pauses:         uint64(c.pauses),
		Resumes:        uint64(c.resumes),
		Swaps:          uint64(c.swaps),
		Failures:       uint64(c.failures),
		BytesReleased:  uint64(c.bytes_released),
		BytesBacked:    uint64(c.bytes_backed),
		BytesToStore:   uint64(c.bytes_to_store),
		BytesFromStore: uint64(c.bytes_from_store),
		PauseNs:        uint64(c.pause_ns),
		ResumeNs:       uint64(c.resume_ns),
		BytesPrepared:  uint64(c.bytes_prepared),
		PrepareNs:      uint64(c.prepare_ns),
		BytesVerified:  uint64(c.bytes_verified),
		VerifyNs:       uint64(c.verify_ns),
		BytesUnchanged: uint64(c.bytes_unchanged),
	}
	for k := range s.FailuresByStatus {
		s.FailuresByStatus[k] = uint64(c.failures_by_status[k])
	}
	return s
}

// Stats is the region's identity and cumulative counters (cms_region_stats_get, since
// 1.2), a consistent snapshot taken under the region's lock (it waits for a pause or
// resume of the region in progress).
func (r *Region) Stats() (RegionStats, error) {
	var s C.cms_region_stats
	s.struct_size = C.size_t(unsafe.Sizeof(s))
	err := r.with(func(raw *C.cms_region) error {
		return call("cms_region_stats_get", func() C.cms_status { return c_cms_region_stats_get(raw, &s) })
	})
	if err != nil {
		return RegionStats{}, err
	}
	return regionStats(&s), nil
}

// Regions lists every live region of the context in creation order: a copy of each one's
// identity and counters, as Region.Stats (cms_region_list, since 1.2). Safe while other
// goroutines create or close regions (a region closed meanwhile is left out); use
// FindRegion(tag, device) to name one. Not to be called from a progress or control
// callback.
func (c *Context) Regions() ([]RegionStats, error) {
	var out []RegionStats
	err := c.with(func(raw *C.cms_context) error {
		for {
			var total, written C.size_t
			if err := call("cms_region_list", func() C.cms_status {
				return c_cms_region_list(raw, nil, 0, nil, &total)
			}); err != nil {
				return err
			}
			capacity := total + 4 // room for regions created meanwhile
			// The entries hold no Go pointers, so C may write them in Go memory.
			entries := make([]C.cms_region_stats, int(capacity))
			for i := range entries {
				entries[i].struct_size = C.size_t(unsafe.Sizeof(entries[i]))
			}
			err := call("cms_region_list", func() C.cms_status {
				return c_cms_region_list(raw, &entries[0], capacity, &written, &total)
			})
			if err == nil && total <= capacity {
				out = make([]RegionStats, 0, int(written))
				for i := 0; i < int(written); i++ {
					out = append(out, regionStats(&entries[i]))
				}
			}
			if err != nil || out != nil {
				return err
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
