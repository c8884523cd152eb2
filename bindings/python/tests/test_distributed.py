# SPDX-License-Identifier: MIT
"""Tests of cumemsaver.distributed without torch: ranks are threads of this process, a fake
torch.distributed (barrier, all_reduce SUM, new_group) joins them, and fake contexts record
what each rank did. With CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY set (the host simulation),
the ranks also drive real cumemsaver contexts. Standard library only.
"""

import os
import subprocess
import sys
import threading
import unittest

from cumemsaver import distributed as D

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, os.pardir)


# ---- fakes --------------------------------------------------------------------------


class FakeTensor(list):
    pass


class FakeTorch:
    int32 = "int32"

    @staticmethod
    def zeros(n, dtype=None):
        assert dtype == FakeTorch.int32
        return FakeTensor([0] * n)


class World:
    """What the ranks share: a barrier and an all_reduce, with a log of the collectives."""

    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=20)
        self.lock = threading.Lock()
        self.slots = [None] * size
        self.collectives = [[] for _ in range(size)]
        self.groups_made = [0] * size

    def dist(self, rank):
        return FakeDist(self, rank)


class FakeDist:
    """torch.distributed as one rank sees it."""

    class ReduceOp:
        SUM = "sum"
        MAX = "max"

    def __init__(self, world, rank):
        self.world = world
        self.my_rank = rank

    def is_initialized(self):
        return True

    def new_group(self, backend=None):
        assert backend == "gloo"
        self.world.groups_made[self.my_rank] += 1
        self.world.barrier.wait()  # a collective
        return "gloo-group"

    def get_rank(self, group=None):
        return self.my_rank

    def get_world_size(self, group=None):
        return self.world.size

    def barrier(self, group=None):
        self.world.collectives[self.my_rank].append(("barrier", group))
        self.world.barrier.wait()

    def all_reduce(self, tensor, op=None, group=None):
        assert op == FakeDist.ReduceOp.SUM
        w = self.world
        w.collectives[self.my_rank].append(("all_reduce", group))
        w.slots[self.my_rank] = list(tensor)
        w.barrier.wait()
        total = [sum(v[i] for v in w.slots) for i in range(len(tensor))]
        w.barrier.wait()  # everyone has read the slots
        tensor[:] = total


class FakeError(Exception):
    pass


class FakeContext:
    """Records pause/resume; fails the calls named in fail."""

    def __init__(self, log, fail=()):
        self.log = log
        self.fail = set(fail)
        self.paused = set()

    def pause(self, tag=None, **kw):
        self.log.append(("pause", tag, kw))
        if "pause" in self.fail:
            raise FakeError("pause refused")
        self.paused.add(tag)
        return ("paused", tag)

    def resume(self, tag=None, **kw):
        self.log.append(("resume", tag, kw))
        if "resume" in self.fail:
            raise FakeError("resume refused")
        self.paused.discard(tag)
        return ("resumed", tag)


def run_ranks(size, body):
    """Runs body(rank, dist) on one thread per rank; returns [(value, exception)] by rank."""
    world = World(size)
    out = [None] * size

    def main(rank):
        try:
            out[rank] = (body(rank, world.dist(rank)), None)
        except BaseException as e:  # noqa: B902 - reported to the test
            out[rank] = (None, e)

    threads = [threading.Thread(target=main, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a rank hung"
    return out, world


def hooks(log):
    return {
        name: (lambda tag, name=name: log.append((name, tag)))
        for name in ("pre_pause", "post_pause", "pre_resume", "post_resume")
    }


# ---- the logic ----------------------------------------------------------------------


class TestCoordinator(unittest.TestCase):
    def test_module_imports_without_torch(self):
        code = (
            "import sys; sys.modules['torch'] = None; sys.path.insert(0, %r)\n"
            "import cumemsaver.distributed as d\n"
            "try:\n"
            "    d.Coordinator(object())\n"
            "except ImportError:\n"
            "    print('no torch: ImportError at Coordinator()')\n" % PKG
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("ImportError at Coordinator()", out.stdout)

    def test_all_ranks_succeed_hooks_in_order(self):
        logs = [[] for _ in range(3)]

        def body(rank, dist):
            ctx = FakeContext(logs[rank])
            c = D.Coordinator(ctx, dist=dist, torch=FakeTorch, **hooks(logs[rank]))
            p = c.pause("weights", no_sync=True)
            r = c.resume("weights")
            return p, r, ctx.paused

        out, world = run_ranks(3, body)
        for rank in range(3):
            value, err = out[rank]
            self.assertIsNone(err)
            self.assertEqual(value[0], ("paused", "weights"))
            self.assertEqual(value[1], ("resumed", "weights"))
            self.assertEqual(value[2], set())
            self.assertEqual(
                logs[rank],
                [
                    ("pre_pause", "weights"),
                    ("pause", "weights", {"no_sync": True}),
                    ("post_pause", "weights"),
                    ("pre_resume", "weights"),
                    ("resume", "weights", {}),
                    ("post_resume", "weights"),
                ],
            )
            # one gloo group, then per call a barrier and one agreement on it
            self.assertEqual(world.groups_made[rank], 1)
            self.assertEqual(
                world.collectives[rank],
                [("barrier", "gloo-group"), ("all_reduce", "gloo-group")] * 2,
            )

    def test_pause_failing_on_one_rank_rolls_back_every_rank(self):
        logs = [[] for _ in range(3)]
        ctxs = [FakeContext(logs[r], fail=("pause",) if r == 1 else ()) for r in range(3)]

        def body(rank, dist):
            c = D.Coordinator(ctxs[rank], dist=dist, torch=FakeTorch, **hooks(logs[rank]))
            c.pause("weights")

        out, _ = run_ranks(3, body)
        for rank in range(3):
            err = out[rank][1]
            self.assertIsInstance(err, D.DistributedError)
            self.assertEqual(err.failed_ranks, [1])
            self.assertEqual(err.op, "pause")
            self.assertEqual(err.rank, rank)
            self.assertTrue(err.rolled_back)
            self.assertIsNone(err.rollback_error)
            self.assertIn("failed on rank 1", str(err))
            self.assertEqual(ctxs[rank].paused, set(), f"rank {rank} still paused")
        self.assertIsInstance(out[1][1].local_error, FakeError)
        self.assertIsNone(out[0][1].local_error)
        # rank 0: paused, then undone: resumed, and the hook that undoes pre_pause
        self.assertEqual(
            logs[0],
            [
                ("pre_pause", "weights"),
                ("pause", "weights", {}),
                ("post_pause", "weights"),
                ("resume", "weights", {}),
                ("post_resume", "weights"),
            ],
        )
        # rank 1: its pause failed: nothing to resume, only pre_pause to undo
        self.assertEqual(
            logs[1],
            [("pre_pause", "weights"), ("pause", "weights", {}), ("post_resume", "weights")],
        )

    def test_failing_hook_counts_as_a_failure(self):
        logs = [[] for _ in range(2)]
        ctxs = [FakeContext(logs[r]) for r in range(2)]

        def body(rank, dist):
            h = hooks(logs[rank])
            if rank == 0:
                def refuse(tag):
                    raise FakeError("communicator busy")

                h["pre_pause"] = refuse
            D.Coordinator(ctxs[rank], dist=dist, torch=FakeTorch, **h).pause(None)

        out, _ = run_ranks(2, body)
        for rank in range(2):
            self.assertIsInstance(out[rank][1], D.DistributedError)
            self.assertEqual(out[rank][1].failed_ranks, [0])
        self.assertEqual(logs[0], [])  # nothing ran after the hook failed
        self.assertEqual(ctxs[1].paused, set())
        self.assertIn(("resume", None, {}), logs[1])

    def test_resume_failing_on_one_rank_pauses_the_others_again(self):
        logs = [[] for _ in range(2)]
        ctxs = [FakeContext(logs[r], fail=("resume",) if r == 0 else ()) for r in range(2)]

        def body(rank, dist):
            c = D.Coordinator(ctxs[rank], dist=dist, torch=FakeTorch, **hooks(logs[rank]))
            c.pause("kv")
            del logs[rank][:]
            c.resume("kv")

        out, _ = run_ranks(2, body)
        for rank in range(2):
            self.assertIsInstance(out[rank][1], D.DistributedError)
            self.assertEqual(out[rank][1].failed_ranks, [0])
            self.assertEqual(ctxs[rank].paused, {"kv"}, f"rank {rank} not paused")
        self.assertEqual(
            logs[1],
            [
                ("pre_resume", "kv"),
                ("resume", "kv", {}),
                ("post_resume", "kv"),
                ("pre_pause", "kv"),  # undoes post_resume (NCCL suspended again)
                ("pause", "kv", {}),
            ],
        )

    def test_several_failed_ranks_and_a_failed_undo(self):
        logs = [[] for _ in range(4)]
        fails = {1: ("pause",), 2: ("pause",), 3: ("resume",)}
        ctxs = [FakeContext(logs[r], fail=fails.get(r, ())) for r in range(4)]

        def body(rank, dist):
            D.Coordinator(ctxs[rank], dist=dist, torch=FakeTorch).pause("w")

        out, _ = run_ranks(4, body)
        for rank in range(4):
            self.assertEqual(out[rank][1].failed_ranks, [1, 2])
            self.assertIn("failed on ranks 1, 2", str(out[rank][1]))
        self.assertIsInstance(out[3][1].rollback_error, FakeError)  # its resume failed
        self.assertIsNone(out[0][1].rollback_error)

    def test_no_rollback_and_paused_context_manager(self):
        logs = [[] for _ in range(2)]
        ctxs = [FakeContext(logs[r], fail=("pause",) if r == 1 else ()) for r in range(2)]

        def body(rank, dist):
            c = D.Coordinator(ctxs[rank], dist=dist, torch=FakeTorch, rollback=False)
            c.pause("w")

        out, _ = run_ranks(2, body)
        self.assertFalse(out[0][1].rolled_back)
        self.assertEqual(ctxs[0].paused, {"w"})  # left as it was

        logs = [[] for _ in range(2)]
        ctxs = [FakeContext(logs[r]) for r in range(2)]

        def body2(rank, dist):
            with D.Coordinator(ctxs[rank], dist=dist, torch=FakeTorch).paused("w"):
                inside = set(ctxs[rank].paused)
            return inside

        out, _ = run_ranks(2, body2)
        for rank in range(2):
            self.assertEqual(out[rank], ({"w"}, None))
            self.assertEqual(ctxs[rank].paused, set())

    def test_given_group_and_uninitialized(self):
        class NotInit(FakeDist):
            def is_initialized(self):
                return False

        with self.assertRaises(RuntimeError):
            D.Coordinator(FakeContext([]), dist=NotInit(World(1), 0), torch=FakeTorch).pause()
        world = World(1)
        c = D.Coordinator(FakeContext([]), group="mine", dist=world.dist(0), torch=FakeTorch)
        c.pause("w")
        self.assertEqual(world.groups_made[0], 0)
        self.assertEqual(world.collectives[0], [("barrier", "mine"), ("all_reduce", "mine")])
        self.assertEqual((c.rank, c.world_size), (0, 1))


# ---- real contexts on the host simulation ----------------------------------------------

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")


@unittest.skipUnless(LIB and SIM, "set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY")
class TestWithLibrary(unittest.TestCase):
    def test_ranks_pause_and_resume_real_regions(self):
        import ctypes

        import cumemsaver as cms

        def body(rank, dist):
            with cms.Context(driver_path=SIM) as ctx:
                w = ctx.region("w", policy=cms.Policy.HOST)
                ptr = w.alloc(2 << 20)
                data = bytes([rank + 1]) * 4096
                ctypes.memmove(ptr, data, len(data))
                if rank == 0:
                    kv = ctx.region("kv")  # only rank 0 has it
                    kv.alloc(2 << 20)
                c = D.Coordinator(ctx, dist=dist, torch=FakeTorch)
                c.pause("w")
                assert w.info().paused
                c.resume("w")
                assert ctypes.string_at(ptr, len(data)) == data
                assert w.info().epoch == 1
                try:
                    c.pause("kv")  # rank 1: NotFound; rank 0 must resume it again
                except D.DistributedError as e:
                    err = e
                else:
                    raise AssertionError("pause of kv succeeded")
                state = kv.info().paused if rank == 0 else None
                return err, state

        out, _ = run_ranks(2, body)
        for rank in range(2):
            value, exc = out[rank]
            self.assertIsNone(exc, repr(exc))
            self.assertEqual(value[0].failed_ranks, [1])
        self.assertIsInstance(out[1][0][0].local_error, cms.NotFound)
        self.assertFalse(out[0][0][1], "rank 0's kv region was left paused")

    def test_devices_in_results_and_peer_devices(self):
        # a process of its own: the simulation reads CMS_SIM_DEVICES when it is loaded
        code = (
            "import sys; sys.path.insert(0, %r)\n"
            "import cumemsaver as cms\n"
            "with cms.Context(driver_path=%r) as ctx:\n"
            "    r = [ctx.region('w', device=d, policy=cms.Policy.HOST) for d in (0, 1)]\n"
            "    r[0].set_peer_devices([1])\n"
            "    assert r[0].info().peer_device_mask == 2\n"
            "    for x in r: x.alloc(2 << 20)\n"
            "    p = ctx.pause('w')\n"
            "    assert (p.devices, p.failed_device) == (2, -1), p\n"
            "    assert [d.device for d in p.device_results] == [0, 1]\n"
            "    assert all(d.bytes == 2 << 20 and d.status == 0 for d in p.device_results)\n"
            "    q = ctx.resume('w')\n"
            "    assert q.devices == 2 and q.bytes_backed == 4 << 20, q\n"
            "    try:\n"
            "        r[1].set_peer_devices(1 << 1)\n"
            "    except cms.InvalidArgument:\n"
            "        print('ok')\n" % (PKG, SIM)
        )
        env = dict(os.environ, CMS_SIM_DEVICES="2")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "ok")


if __name__ == "__main__":
    unittest.main()
