//! The reducer behind [`DistributedDataParallel`](super::DistributedDataParallel): told by
//! post-accumulate-grad hooks which gradients are ready, it starts each bucket's all-reduce
//! (non-blocking) as soon as the bucket is complete, in bucket order, and at the end of
//! backward waits for all of them and writes the averaged gradients back.

use super::bucket::Bucket;
use crate::distributed::{finish_average, fresh, on_group_device, Call, ReduceOp, SendBuf, Wire, Work};
use crate::error::{Error, ErrorKind, Result};
use crate::tensor::Tensor;
use kiln_runtime::Storage;
use std::sync::{Arc, Mutex, Weak};

/// The name in errors of a bucket's collective.
const OP: &str = "all_reduce (DistributedDataParallel gradient bucket)";

/// What the hooks share.
pub(crate) struct Reducer {
    params: Vec<Tensor>,
    buckets: Vec<Bucket>,
    /// Per parameter: its bucket.
    bucket_of: Vec<usize>,
    /// Per parameter: its gradient arrived in this backward.
    ready: Vec<bool>,
    /// Per bucket: gradients still to arrive.
    pending: Vec<usize>,
    /// Buckets launch in order: the next one to launch.
    next_launch: usize,
    /// Per bucket: its all-reduce, once launched.
    in_flight: Vec<Option<Work>>,
    world_size: usize,
    /// Per parameter: its name in the wrapped module (for errors).
    names: Vec<String>,
    /// Per parameter: its gradient arrived since the last averaging backward (no_sync passes
    /// included): this rank used it.
    used: Vec<bool>,
    /// `find_unused_parameters`: unused parameters are marked ready after forward, and ones no
    /// rank used keep their `.grad`.
    find_unused: bool,
    /// Gradients are averaged (false under `no_sync`).
    pub(crate) sync: bool,
    /// A synchronizing backward is running (its finishing callback is queued).
    active: bool,
    /// The first failure of a launch, reported when backward finishes.
    error: Option<Error>,
    /// A misuse seen during backward (a gradient for a parameter marked unused), reported
    /// when backward finishes, after the averaging (so the ranks stay in step).
    misuse: Option<Error>,
}

/// The reducer as the hooks hold it.
pub(crate) type Shared = Arc<Mutex<Reducer>>;

/// Locks the reducer (a panic elsewhere does not poison it).
pub(crate) fn lock(r: &Mutex<Reducer>) -> std::sync::MutexGuard<'_, Reducer> {
    r.lock().unwrap_or_else(|e| e.into_inner())
}

impl Reducer {
    /// A reducer over `params` (named `names`) in `buckets`.
    pub(crate) fn new(
        params: Vec<Tensor>,
        names: Vec<String>,
        buckets: Vec<Bucket>,
        world_size: usize,
        find_unused: bool,
    ) -> Reducer {
        let mut bucket_of = vec![0; params.len()];
        for (b, bucket) in buckets.iter().enumerate() {
            bucket.params.iter().for_each(|&p| bucket_of[p] = b);
        }
        let in_flight = buckets.iter().map(|_| None).collect();
        let used = vec![false; params.len()];
        let mut r = Reducer {
            ready: Vec::new(),
            params,
            names,
            used,
            find_unused,
            bucket_of,
            pending: Vec::new(),
            next_launch: 0,
            in_flight,
            buckets,
            world_size,
            sync: true,
            active: false,
            error: None,
            misuse: None,
        };
        r.reset();
        r
    }

    /// After a forward with `find_unused_parameters` (gradients on, averaging on): the
    /// parameters `output` does not reach count as ready now, so their buckets launch as soon
    /// as the rest of their gradients are in instead of waiting for the end of backward.
    pub(crate) fn mark_unused(&mut self, output: &Tensor) {
        if !self.find_unused || !self.sync || self.active {
            return;
        }
        self.reset();
        let reached = super::graph::reached(output, &self.params);
        for (p, reached) in reached.into_iter().enumerate() {
            if !reached {
                self.ready[p] = true;
                self.pending[self.bucket_of[p]] -= 1;
            }
        }
    }

    /// The state before a backward: no gradient ready, every bucket waiting for all of its
    /// parameters, none launched.
    fn reset(&mut self) {
        self.ready = vec![false; self.params.len()];
        self.pending = self.buckets.iter().map(|b| b.params.len()).collect();
        self.next_launch = 0;
    }

    /// The number of buckets.
    pub(crate) fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// A hook's report: parameter `p`'s gradient is in `.grad`. Launches every complete bucket
    /// whose predecessors have launched, and drives the ones in flight.
    pub(crate) fn mark_ready(&mut self, p: usize, me: &Weak<Mutex<Reducer>>) {
        self.used[p] = true;
        if !self.sync {
            return;
        }
        if self.ready[p] {
            // Only a parameter marked unused after forward is ready before its hook runs.
            let name = &self.names[p];
            let why = format!("parameter {name} got a gradient, but the output of the last forward does not reach it, so find_unused_parameters marked it unused: DDP needs one forward per backward, and parameters used only inside forward");
            self.misuse.get_or_insert_with(|| Error::new("DistributedDataParallel", ErrorKind::Distributed, why));
            return;
        }
        if !self.active {
            self.active = true;
            let me = me.clone();
            crate::autograd::queue_callback(move || {
                let Some(r) = me.upgrade() else { return Ok(()) };
                let result = lock(&r).finish();
                result
            });
        }
        self.ready[p] = true;
        self.pending[self.bucket_of[p]] -= 1;
        // Inside `kiln::compile` the gradients are lazy: launching a bucket now would realize
        // the trace (a graph break) once per bucket. There every bucket launches in `finish`,
        // right after backward, at one break.
        if !crate::capture::is_active() {
            self.launch_ready();
            self.poke();
        }
    }

    /// Launches buckets in order while the next one is complete. Every such bucket is flattened
    /// before any is read, so inside `kiln::compile` (where `finish` launches them all) the
    /// trace is realized at one graph break.
    fn launch_ready(&mut self) {
        let first = self.next_launch;
        while self.next_launch < self.buckets.len() && self.pending[self.next_launch] == 0 {
            self.next_launch += 1;
        }
        if self.error.is_some() {
            return;
        }
        let flats: Vec<Tensor> = (first..self.next_launch).map(|b| self.flatten(b)).collect();
        for (b, flat) in (first..self.next_launch).zip(flats) {
            match self.start(b, flat) {
                Ok(work) => self.in_flight[b] = Some(work),
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
    }

    /// Bucket `b`'s gradients (zeros for a parameter with none) in one flat tensor of the wire
    /// dtype.
    fn flatten(&self, b: usize) -> Tensor {
        let bucket = &self.buckets[b];
        let wire = Wire::of(bucket.dtype, self.params[bucket.params[0]].device());
        let flat: Vec<Tensor> = bucket
            .params
            .iter()
            .map(|&i| {
                let p = &self.params[i];
                p.grad().unwrap_or_else(|| p.detach().zeros_like()).detach().to_dtype(wire.dtype()).reshape([-1])
            })
            .collect();
        let _off = crate::no_grad_guard();
        Tensor::cat(&flat, 0).contiguous()
    }

    /// Starts bucket `b`'s all-reduce (average) of its flattened gradients, on their device.
    fn start(&self, b: usize, flat: Tensor) -> Result<Work> {
        let bucket = &self.buckets[b];
        let wire = Wire::of(bucket.dtype, flat.device());
        let recv = fresh(OP, flat.device(), wire.dtype(), bucket.numel)?;
        let send = owned_storage(flat);
        // SAFETY: the send and receive buffers are owned by the work.
        unsafe { Work::start(OP, Call::AllReduce(ReduceOp::Avg), wire, bucket.numel, SendBuf::Owned(send), Some(recv)) }
    }

    /// Drives the library's progress on the buckets in flight (MPI progresses inside its calls).
    fn poke(&mut self) {
        for work in self.in_flight.iter_mut().flatten() {
            if let Err(e) = work.test() {
                self.error.get_or_insert(e);
                return;
            }
        }
    }

    /// The end of backward: launches what is left (a parameter that got no gradient counts as
    /// zeros, so every rank runs the same collectives), waits for every bucket within the
    /// group's timeout, and sets each gradient to its average over the ranks. With
    /// `find_unused_parameters` the ranks also share which parameters they used (a max-reduction
    /// of one byte per parameter): one that no rank used keeps its `.grad` as it was. Without
    /// it, a parameter that got no gradient on this rank fails the backward, after the
    /// averaging (so the ranks stay in step).
    fn finish(&mut self) -> Result<()> {
        self.active = false;
        let misuse = self.misuse.take();
        let missing: Vec<usize> = (0..self.params.len()).filter(|&p| !self.ready[p]).collect();
        for &p in &missing {
            self.ready[p] = true;
            self.pending[self.bucket_of[p]] -= 1;
        }
        self.launch_ready();
        let used = std::mem::replace(&mut self.used, vec![false; self.params.len()]);
        let used_map = match (self.find_unused, &self.error) {
            (true, None) => Some(start_used_map(&used)),
            _ => None,
        };
        let works: Vec<Option<Work>> = self.in_flight.iter_mut().map(Option::take).collect();
        self.reset();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let used_anywhere = match used_map {
            Some(work) => wait_used_map(work?)?,
            None => vec![true; self.params.len()],
        };
        for (bucket, work) in self.buckets.iter().zip(works) {
            let work =
                work.ok_or_else(|| Error::new(OP, ErrorKind::Distributed, "a gradient bucket was never launched"))?;
            let mut summed = work.wait()?.expect("an all-reduce receives");
            finish_average(&mut summed, self.world_size);
            let flat = Tensor::from_storage(summed, &[bucket.numel]);
            for (&i, &off) in bucket.params.iter().zip(&bucket.offsets) {
                if !used_anywhere[i] {
                    continue;
                }
                let p = &self.params[i];
                let shape: Vec<i64> = p.shape().iter().map(|&d| d as i64).collect();
                let g = flat.narrow(0, off as i64, p.numel()).view(&shape).to_dtype(p.dtype());
                p.set_grad(Some(g));
            }
        }
        if let Some(e) = misuse {
            return Err(e);
        }
        if !self.find_unused && !missing.is_empty() {
            return Err(self.unused_error(&missing));
        }
        Ok(())
    }

    /// PyTorch's error for parameters that got no gradient without `find_unused_parameters`.
    fn unused_error(&self, missing: &[usize]) -> Error {
        let rank = crate::distributed::rank().unwrap_or(0);
        let names: Vec<&str> = missing.iter().map(|&p| self.names[p].as_str()).collect();
        let indices: Vec<String> = missing.iter().map(|p| p.to_string()).collect();
        Error::new(
            "DistributedDataParallel",
            ErrorKind::Distributed,
            format!(
                "this backward finished without a gradient for some parameters: your module has parameters that were not used in producing the loss. \
                 Enable unused parameter detection with `DdpOptions {{ find_unused_parameters: true, .. }}`, and make sure all of forward's outputs take part in computing the loss.\n\
                 Parameters which did not receive grad for rank {rank}: {}\n\
                 Parameter indices which did not receive grad for rank {rank}: {}",
                names.join(", "),
                indices.join(" ")
            ),
        )
    }
}

/// Starts the max-reduction of the used map (one byte per parameter: 1 when this rank used it).
fn start_used_map(used: &[bool]) -> Result<Work> {
    const USED: &str = "all_reduce (DistributedDataParallel used parameters)";
    let bytes: Vec<u8> = used.iter().map(|&u| u as u8).collect();
    let map = on_group_device(USED, Tensor::from_vec(bytes, [used.len()]))?;
    let recv = fresh(USED, map.device(), Wire::U8.dtype(), used.len())?;
    let send = owned_storage(map);
    // SAFETY: the send and receive buffers are owned by the work.
    unsafe { Work::start(USED, Call::AllReduce(ReduceOp::Max), Wire::U8, used.len(), SendBuf::Owned(send), Some(recv)) }
}

/// Waits for the used map: per parameter, whether any rank used it.
fn wait_used_map(work: Work) -> Result<Vec<bool>> {
    let any = work.wait()?.expect("an all-reduce receives");
    let n = any.len();
    Ok(Tensor::from_storage(any, &[n]).to_vec::<u8>().into_iter().map(|u| u != 0).collect())
}

/// The storage of a fresh contiguous tensor nothing else references, taken out of it.
fn owned_storage(t: Tensor) -> Storage {
    drop(t.read_storage()); // realizes a pending capture, if any
    t.cell().take()
}
