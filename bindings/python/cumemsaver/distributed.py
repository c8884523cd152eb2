# SPDX-License-Identifier: MIT
"""Pause and resume across the ranks of a torch.distributed job.

In a tensor-parallel job every rank (process) holds its own ``cumemsaver.Context`` with the
regions of its GPU. Pausing "weights" must happen on every rank or on none: a rank that keeps
its memory while the others released theirs wastes it, and a rank that resumes alone runs
collectives against peers that are still paused. ``Coordinator`` makes ``pause`` and
``resume`` collective calls, agreed through ``torch.distributed`` (an existing engine: no
home-made sockets)::

    import torch.distributed as dist
    from cumemsaver.distributed import Coordinator

    coord = Coordinator(ctx,
                        pre_pause=lambda tag: suspend_nccl(),   # e.g. ncclCommSuspend
                        post_resume=lambda tag: resume_nccl())  # e.g. ncclCommResume
    coord.pause("weights")      # every rank, like all_reduce
    ...
    coord.resume("weights")

Every rank calls the same method with the same tag at the same point of its program. Each
call:

1. waits for every rank (``dist.barrier``);
2. runs the rank's own part: ``pause``: ``pre_pause(tag)`` then ``context.pause(tag)`` then
   ``post_pause(tag)``; ``resume``: ``pre_resume(tag)``, ``context.resume(tag)``,
   ``post_resume(tag)``. An exception in any of them is this rank's failure (the later steps
   are skipped);
3. agrees with the other ranks: ``dist.all_reduce`` (SUM) of a vector with one entry per
   rank, 1 where the rank failed. Every rank learns the same list of failed ranks;
4. if any rank failed, every rank undoes what its own step 2 did (``rollback=True``), in
   reverse order: a pause is undone by ``context.resume(tag)`` then ``post_resume(tag)``
   (which undoes ``pre_pause``), a resume by ``pre_pause(tag)`` (undoing ``post_resume``)
   then ``context.pause(tag)``; then every rank raises ``DistributedError`` naming the failed
   ranks. So after a failed call every rank is back where it was, or, if an undo step failed
   too, says so in ``DistributedError.rollback_error``.

Hooks bracket external state that must follow the memory. NCCL 2.29.7+ can release a
communicator's buffers with ``ncclCommSuspend(comm, NCCL_SUSPEND_MEM)`` and take them back
with ``ncclCommResume(comm)``: pass the suspend as ``pre_pause`` (before the memory goes) and
the resume as ``post_resume`` (after the memory is back), so that NCCL never touches memory
that is not there. Communicators that registered cumemsaver memory (user buffer registration,
``ncclMemAlloc``-style windows) must register it again after a resume: compare
``Region.info().epoch`` in ``post_resume``. ``post_pause`` and ``pre_resume`` are for anything
else (logging, freeing caches).

The agreement itself must not use a communicator the hooks suspend: by default the
coordinator makes its own gloo (CPU) process group with ``dist.new_group(backend="gloo")`` at
its first call (a collective: every rank makes its first call at the same time anyway), so it
works while the NCCL communicators are suspended. Pass ``group=`` to use another group
(its backend must take CPU tensors).

``torch`` is imported only when a ``Coordinator`` is made without ``dist``; this module itself
imports without it. Tests pass a stand-in for ``torch.distributed`` (``dist=``) and for
``torch`` (``torch=``, for ``torch.zeros(n, dtype=torch.int32)``).
"""

from typing import Any, Callable, List, Optional

from .api import _bool

Hook = Optional[Callable[[Optional[str]], Any]]

__all__ = ["Coordinator", "DistributedError"]


class DistributedError(RuntimeError):
    """A coordinated pause or resume failed on at least one rank; raised on every rank.

    op             -- "pause" or "resume"
    tag            -- the tag (None: every tag)
    failed_ranks   -- ranks whose own part failed (the same list on every rank)
    rank           -- this rank
    local_error    -- this rank's exception, or None when it did its part
    rolled_back    -- whether this rank undid its part (False when rollback=False)
    rollback_error -- the exception of a failed undo step on this rank, or None
    """

    def __init__(self, op, tag, failed_ranks, rank, local_error, rolled_back, rollback_error):
        self.op = op
        self.tag = tag
        self.failed_ranks = list(failed_ranks)
        self.rank = rank
        self.local_error = local_error
        self.rolled_back = rolled_back
        self.rollback_error = rollback_error
        ranks = ", ".join(str(r) for r in self.failed_ranks)
        plural = "s" if len(self.failed_ranks) > 1 else ""
        what = f"{op} of {'every tag' if tag is None else repr(tag)} failed on rank{plural} {ranks}"
        if local_error is not None:
            what += f" (here, rank {rank}: {local_error})"
        if rollback_error is not None:
            what += f"; undoing it on rank {rank} failed too: {rollback_error}"
        elif rolled_back:
            what += f"; rank {rank} is back as before"
        super().__init__(what)


class Coordinator:
    """Collective pause/resume of one cumemsaver context per rank (see the module doc).

    context     -- this rank's cumemsaver.Context (anything with pause(tag, **kw) and
                   resume(tag, **kw))
    group       -- process group for the barrier and the agreement; None: a gloo group made
                   by the first call
    pre_pause, post_pause, pre_resume, post_resume -- callables taking the tag (or None)
    rollback    -- undo this rank's part when another rank failed (default True)
    barrier     -- wait for every rank before starting (default True)
    dist, torch -- stand-ins for torch.distributed and torch (tests); None: import them
    """

    def __init__(
        self,
        context,
        group=None,
        pre_pause: Hook = None,
        post_pause: Hook = None,
        pre_resume: Hook = None,
        post_resume: Hook = None,
        rollback: bool = True,
        barrier: bool = True,
        dist=None,
        torch=None,
    ):
        if dist is None or torch is None:
            import torch as _torch  # noqa: F811  (lazy: the module imports without torch)
            import torch.distributed as _dist

            dist = dist if dist is not None else _dist
            torch = torch if torch is not None else _torch
        self.context = context
        self.pre_pause = pre_pause
        self.post_pause = post_pause
        self.pre_resume = pre_resume
        self.post_resume = post_resume
        self.rollback = _bool(rollback, "rollback")
        self.barrier = _bool(barrier, "barrier")
        self._dist = dist
        self._torch = torch
        self._group = group

    # ---- the agreement ----

    def group(self):
        """The process group used (made on first use when none was given)."""
        if self._group is None:
            if not self._dist.is_initialized():
                raise RuntimeError("torch.distributed is not initialized (init_process_group)")
            self._group = self._dist.new_group(backend="gloo")
        return self._group

    @property
    def rank(self) -> int:
        return self._dist.get_rank(group=self.group())

    @property
    def world_size(self) -> int:
        return self._dist.get_world_size(group=self.group())

    def _failed_ranks(self, ok: bool) -> List[int]:
        g = self.group()
        world = self._dist.get_world_size(group=g)
        flags = self._torch.zeros(world, dtype=self._torch.int32)
        if not ok:
            flags[self._dist.get_rank(group=g)] = 1
        self._dist.all_reduce(flags, op=self._dist.ReduceOp.SUM, group=g)
        return [r for r in range(world) if int(flags[r])]

    @staticmethod
    def _call(hook: Hook, tag):
        if hook is not None:
            hook(tag)

    def _run(self, op, tag, steps, undo):
        """steps: [(name, fn)] run in order; undo: {name: fn} for the steps done, reversed."""
        if self.barrier:
            self._dist.barrier(group=self.group())
        done, result, local_error = [], None, None
        for name, fn in steps:
            try:
                value = fn()
            except Exception as e:  # this rank's failure: the others must hear of it
                local_error = e
                break
            if name == "library":
                result = value
            done.append(name)
        failed = self._failed_ranks(local_error is None)
        if not failed:
            return result
        rollback_error = None
        if self.rollback:
            for name in reversed(done):
                if name not in undo:
                    continue
                try:
                    undo[name]()
                except Exception as e:
                    rollback_error = rollback_error or e
        raise DistributedError(op, tag, failed, self.rank, local_error, self.rollback,
                               rollback_error) from local_error

    # ---- the calls ----

    def pause(self, tag: Optional[str] = None, **kwargs):
        """Collective pause of tag (every tag when None) on every rank; returns this rank's
        PauseResult. kwargs go to context.pause (stream, event, no_sync). Raises
        DistributedError on every rank if any rank failed."""
        steps = [
            ("pre", lambda: self._call(self.pre_pause, tag)),
            ("library", lambda: self.context.pause(tag, **kwargs)),
            ("post", lambda: self._call(self.post_pause, tag)),
        ]
        undo = {
            "pre": lambda: self._call(self.post_resume, tag),
            "library": lambda: self.context.resume(tag),
        }
        return self._run("pause", tag, steps, undo)

    def resume(self, tag: Optional[str] = None, **kwargs):
        """Collective resume of tag (every tag when None) on every rank; returns this rank's
        ResumeResult. kwargs go to context.resume (async_stream). Raises DistributedError on
        every rank if any rank failed."""
        steps = [
            ("pre", lambda: self._call(self.pre_resume, tag)),
            ("library", lambda: self.context.resume(tag, **kwargs)),
            ("post", lambda: self._call(self.post_resume, tag)),
        ]
        undo = {
            "library": lambda: self.context.pause(tag),
            "post": lambda: self._call(self.pre_pause, tag),
        }
        return self._run("resume", tag, steps, undo)

    def paused(self, tag: Optional[str] = None):
        """Context manager: collective pause on entry, collective resume on exit."""
        return _Paused(self, tag)


class _Paused:
    def __init__(self, coord, tag):
        self._coord = coord
        self._tag = tag

    def __enter__(self):
        return self._coord.pause(self._tag)

    def __exit__(self, *exc):
        self._coord.resume(self._tag)
        return False
