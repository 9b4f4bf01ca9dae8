//! The trace being captured on this thread, and the calls ops make to append to it.

use super::cell::CellCapture;
use super::journal::{Journal, Transaction};
use super::plan::Plan;
use crate::debug::{self, Topic};
use crate::error::Result;
use crate::scalar::Scalar;
use crate::tensor::{StorageCell, Tensor};
use kiln_codegen::ir::{draw_words, Graph, Node, NodeId, NodeKind, Origin, Phase, RandDist, Use};
use kiln_runtime::cpu::philox::Philox;
use kiln_runtime::op_kind::ReduceOp;
use kiln_runtime::{DType, Device, Layout};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// An opaque op's eager implementation, run on the realized inputs when the trace is realized,
/// on whichever of kiln's threads runs the plan (two independent products of a step run at
/// once on two threads; see `exec::run`).
pub(crate) type OpaqueFn = Box<dyn FnOnce(&[Tensor]) -> Result<Tensor> + Send>;

/// One step's DAG under construction, with what realizing it needs.
pub(crate) struct Trace {
    /// Unique across the process (storages name the trace that refers to them by this id).
    pub(crate) id: u64,
    /// The nodes so far, once they differ from [`Trace::expected`]'s (empty until then).
    graph: Graph,
    /// The plan that ran at this point of the compiled step's previous call. While this
    /// trace records the nodes of that plan's captured graph, one by one and in order, each
    /// is checked against it instead of stored, and a trace that ends as that graph ends runs
    /// the plan without hashing; at the first difference the matched nodes are copied into
    /// [`Trace::graph`] and the trace goes on as any other (see [`Trace::push`]).
    expected: Option<Arc<Plan>>,
    /// How many of the expected graph's nodes this trace has recorded.
    matched: usize,
    /// The realized storages read, by input slot.
    pub(crate) inputs: Vec<Arc<StorageCell>>,
    /// The values of the `Scalar` nodes, by slot.
    pub(crate) scalars: Vec<Scalar>,
    /// The eager implementations of the opaque nodes, by index.
    pub(crate) closures: Vec<Option<OpaqueFn>>,
    /// Storages this trace computes or writes (those still alive when it is realized are its
    /// outputs).
    pub(crate) cells: Vec<Weak<StorageCell>>,
    /// Where new nodes go: forward, backward or update.
    pub(crate) phase: Phase,
    /// The grad fn whose backward rule is running (see [`backward_of`]): the origin of the
    /// nodes it records.
    backward_of: Option<Arc<crate::autograd::Node>>,
    /// The user's line of the optimizer step running (see [`optimizer_step_at`]): the origin
    /// of the update nodes it records.
    update_at: Option<&'static Location<'static>>,
    /// When the trace began (for the step's tracing time).
    pub(crate) started: Instant,
    /// The device the graph is planned for when it is not the tensors' own (see
    /// [`set_target`]): every node the tensors would put on the CPU goes on it, 0-dim values
    /// made of CPU scalars aside.
    pub(crate) target: Option<Device>,
}

static NEXT_TRACE: AtomicU64 = AtomicU64::new(1);

impl Trace {
    /// A trace planned for `target` (see [`set_target`]), expecting the graph of `expected`
    /// (a trace planned for a target expects nothing: its plan is not the one that runs).
    fn new(target: Option<Device>, expected: Option<Arc<Plan>>) -> Trace {
        Trace {
            id: NEXT_TRACE.fetch_add(1, Ordering::Relaxed),
            graph: Graph::default(),
            expected: expected.filter(|_| target.is_none()),
            matched: 0,
            inputs: Vec::new(),
            scalars: Vec::new(),
            closures: Vec::new(),
            cells: Vec::new(),
            phase: Phase::Forward,
            backward_of: None,
            update_at: None,
            started: Instant::now(),
            target,
        }
    }

    /// How `t`'s elements at `layout` are read: its storage's current node (an `Input` node the
    /// first time a realized storage is read).
    fn use_of(&mut self, t: &Tensor, layout: Layout) -> Use {
        let cell = t.cell();
        if let Some(node) = cell.capture.node_in(self.id) {
            return Use { node, layout };
        }
        let len = cell.len();
        let slot = self.inputs.len() as u32;
        self.inputs.push(cell.clone());
        let device = self.target.unwrap_or(t.device());
        let node = self.push(NodeKind::Input { slot, len }, &[len], t.dtype(), SmallVec::new(), device);
        cell.capture.set(self.id, node, false, len);
        Use { node, layout }
    }

    /// Records a node: the next node of the expected graph when it is that node (same kind,
    /// shape, dtype, reads, phase and device), else a new node of [`Trace::graph`].
    fn push(
        &mut self,
        kind: NodeKind,
        shape: &[usize],
        dtype: DType,
        reads: SmallVec<[Use; 3]>,
        device: Device,
    ) -> NodeId {
        if let Some(plan) = &self.expected {
            let (g, i) = (&plan.captured, self.matched);
            let same =
                g.nodes.get(i).is_some_and(|n| {
                    n.kind == kind && n.shape.as_slice() == shape && n.dtype == dtype && n.reads == reads
                }) && g.phases[i] == self.phase
                    && g.devices[i] == device;
            if same {
                self.matched += 1;
                return i as NodeId;
            }
            self.diverge(|g, n| {
                let was = g.nodes.get(n).map_or("none: the graph ended there".to_string(), |e| e.kind.name());
                format!("node {n} ({}) differs from the previous call's ({was})", kind.name())
            });
        }
        self.graph.push_on(Node { kind, shape: shape.into(), dtype, reads }, self.phase, device)
    }

    /// Stops expecting: the matched nodes become the start of [`Trace::graph`]. `why` says
    /// what differed from the expected graph, given it and the count of matched nodes (for
    /// `KILN_DEBUG=cache`).
    fn diverge(&mut self, why: impl FnOnce(&Graph, usize) -> String) {
        let Some(plan) = self.expected.take() else { return };
        let (g, n) = (&plan.captured, self.matched);
        if debug::enabled(Topic::Cache) {
            debug::log(Topic::Cache, format!("{}: hashing the graph", why(g, n)));
        }
        let mut graph = Graph::default();
        graph.nodes.reserve(g.nodes.len());
        graph.nodes.extend_from_slice(&g.nodes[..n]);
        graph.phases.extend_from_slice(&g.phases[..n]);
        graph.devices.extend_from_slice(&g.devices[..n]);
        graph.origins.extend_from_slice(&g.origins[..n]);
        self.graph = graph;
    }

    /// The device of node `id`.
    fn device(&self, id: NodeId) -> Device {
        match &self.expected {
            Some(plan) => plan.captured.device(id),
            None => self.graph.device(id),
        }
    }

    /// How many nodes the trace has recorded.
    pub(crate) fn node_count(&self) -> usize {
        if self.expected.is_some() {
            self.matched
        } else {
            self.graph.nodes.len()
        }
    }

    /// What realizing the trace with these `outputs` (sorted, without repeats) runs.
    pub(crate) fn finish(&mut self, outputs: Vec<NodeId>) -> Finished {
        if let Some(plan) = &self.expected {
            if self.matched == plan.captured.nodes.len() && outputs == plan.captured.outputs {
                return Finished::Expected(plan.clone());
            }
        }
        self.diverge(|g, n| match g.nodes.len() == n {
            true => "the previous call's graph had other outputs".to_string(),
            false => format!("the trace ended after {n} of the previous call's {} nodes", g.nodes.len()),
        });
        let mut graph = std::mem::take(&mut self.graph);
        graph.outputs = outputs;
        Finished::Recorded(graph)
    }

    /// The device of an op node reading `reads`: the first CUDA device among the nodes read
    /// (an op on CUDA tensors may read 0-dim CPU scalars), else the CPU.
    fn device_of(&self, reads: &[Use]) -> Device {
        reads.iter().map(|u| self.device(u.node)).find(Device::is_cuda).unwrap_or(Device::Cpu)
    }

    /// A new tensor whose storage `node` computes, on the node's device (on the CPU when the
    /// trace only plans for another device: its tensors are the CPU's).
    fn lazy_tensor(&mut self, node: NodeId, shape: &[usize], dtype: DType) -> Tensor {
        let len = kiln_runtime::layout::numel(shape);
        let cell = StorageCell::lazy(dtype, CellCapture::lazy(self.id, node, len));
        self.cells.push(Arc::downgrade(&cell));
        let device = if self.target.is_some() { Device::Cpu } else { self.device(node) };
        Tensor::over_cell(cell, Layout::contiguous(shape), dtype, device)
    }

    /// Appends an op node on the device its reads give, recorded at `at` (or by the backward
    /// rule of [`Trace::backward_of`]), and returns it.
    fn push_op(
        &mut self,
        kind: NodeKind,
        shape: &[usize],
        dtype: DType,
        reads: SmallVec<[Use; 3]>,
        at: &'static Location<'static>,
    ) -> NodeId {
        let device = self.device_of(&reads);
        let node = self.push(kind, shape, dtype, reads, device);
        if self.expected.is_none() {
            // A new node of the graph (a node matched against the expected graph keeps the
            // origin the plan's first call recorded).
            self.graph.origins[node as usize] = match (&self.backward_of, self.update_at) {
                (Some(grad_fn), _) => Origin { at: Some(grad_fn.origin), grad_of: Some(grad_fn.name.clone()) },
                (None, Some(step)) => Origin { at: Some(step), grad_of: None },
                (None, None) => Origin { at: Some(at), grad_of: None },
            };
        }
        node
    }
}

/// What a finished trace runs ([`Trace::finish`]).
pub(crate) enum Finished {
    /// The expected plan: the trace recorded exactly its captured graph and outputs.
    Expected(Arc<Plan>),
    /// The graph recorded (outputs set), to hash and look up.
    Recorded(Graph),
}

/// This thread's capture state.
#[derive(Default)]
struct State {
    /// The trace being captured (none outside `kiln::compile`).
    trace: Option<Trace>,
    /// Nonzero while a trace is being realized: ops run eagerly then.
    suspended: u32,
    /// The device new traces plan for instead of their tensors' (see [`set_target`]).
    target: Option<Device>,
    /// The undo journal of the compiled call running on this thread (see [`super::journal`]).
    journal: Option<Journal>,
    /// The plans the compiled step's previous call ran, in order, for the traces still to
    /// begin in this call to expect (see [`Trace::expected`]).
    expected: VecDeque<Arc<Plan>>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// True when ops on this thread append to a trace instead of running.
pub(crate) fn is_active() -> bool {
    STATE.with(|s| {
        let s = s.borrow();
        s.trace.is_some() && s.suspended == 0
    })
}

/// Runs `f` on the active trace (the caller checked [`is_active`]).
fn with_trace<R>(f: impl FnOnce(&mut Trace) -> R) -> R {
    STATE.with(|s| f(s.borrow_mut().trace.as_mut().expect("called only while capturing")))
}

impl Trace {
    /// Forgets this trace after a failure: the storages it read or was to write no longer
    /// refer to it; those that had data keep it (nothing was installed), those it was to
    /// compute are abandoned.
    pub(crate) fn roll_back(&self) {
        let written = self.cells.iter().filter_map(Weak::upgrade);
        for cell in self.inputs.iter().cloned().chain(written) {
            if cell.capture.trace() == self.id {
                cell.capture.roll_back();
            }
        }
    }
}

/// Starts a compiled call on this thread: capturing, with a fresh undo journal; false when a
/// call is running already (a nested `compile` joins the outer one). `expected`: the plans
/// the step's previous call ran, which its graphs are likely to repeat.
pub(crate) fn begin(expected: impl IntoIterator<Item = Arc<Plan>>) -> bool {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.trace.is_some() {
            return false;
        }
        s.expected = expected.into_iter().collect();
        let first = s.expected.pop_front();
        s.trace = Some(Trace::new(s.target, first));
        s.journal = Some(Journal::new());
        true
    })
}

/// Ends the compiled call begun by [`begin`]: its changes stand (`ok`) or are undone.
pub(crate) fn end_call(ok: bool) {
    let journal = STATE.with(|s| s.borrow_mut().journal.take());
    match journal {
        Some(j) if ok => j.commit(),
        Some(j) => j.abort(),
        None => {}
    }
}

/// The outcome handle of the compiled call running on this thread, if any: state that a call
/// changes outside tensors (an optimizer's step counts) keeps a copy until it is known.
pub(crate) fn transaction() -> Option<Transaction> {
    STATE.with(|s| s.borrow().journal.as_ref().map(|j| j.transaction().clone()))
}

/// Journals `old`, the `.grad` of `tensor` before this thread's compiled call changes it (the
/// first change only; nothing outside a compiled call).
pub(crate) fn journal_grad(tensor: &Tensor, old: &Option<Tensor>) {
    STATE.with(|s| {
        if let Some(j) = s.borrow_mut().journal.as_mut() {
            j.save_grad(tensor, old.clone());
        }
    })
}

/// Journals `old`, the data `cell` held before a realization of this thread's compiled call
/// replaced it (storages made during the call, and later changes, are not journaled).
pub(crate) fn journal_installed(cell: &Arc<StorageCell>, old: kiln_runtime::Storage) {
    STATE.with(|s| {
        if let Some(j) = s.borrow_mut().journal.as_mut() {
            j.save_storage(cell, old);
        }
    })
}

/// Journals a copy of `cell`'s data before an eager op inside this thread's compiled call
/// writes it (only for storages older than the call, once each).
fn journal_before_write(cell: &Arc<StorageCell>) {
    let wanted = STATE.with(|s| {
        let s = s.borrow();
        s.suspended == 0 && s.journal.as_ref().is_some_and(|j| j.wants_storage(cell))
    });
    if wanted {
        let copy = as_realizing(|| cell.copy_data());
        journal_installed(cell, copy);
    }
}

/// Takes the trace out for realizing, putting a fresh one in its place when `resume`; ops
/// run eagerly until [`finish_realize`].
pub(crate) fn take_for_realize(resume: bool) -> Option<Trace> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let t = s.trace.take();
        if resume {
            let next = s.expected.pop_front();
            s.trace = Some(Trace::new(s.target, next));
        } else {
            s.expected.clear();
        }
        s.suspended += 1;
        t
    })
}

/// Ends a realization begun by [`take_for_realize`].
pub(crate) fn finish_realize() {
    STATE.with(|s| s.borrow_mut().suspended -= 1);
}

/// Runs `f` on this thread as the realizing thread runs a plan's steps: eager, storages read
/// as they are now (a step of a plan run on another of kiln's threads reads what the plan's own
/// thread would read; the trace's writes take effect only when the plan has run).
pub(crate) fn as_realizing<R>(f: impl FnOnce() -> R) -> R {
    /// Ends the suspension even when `f` panics.
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            finish_realize();
        }
    }
    STATE.with(|s| s.borrow_mut().suspended += 1);
    let _end = End;
    f()
}

/// Plans this thread's traces for `target` (`None`: for their tensors' devices) from the next
/// trace on: ops are captured as they would be on that device and nodes the CPU tensors would
/// put on the CPU go on it, so the plan built for it is the one a step on that device builds,
/// while the tensors, and the plan that runs, stay the CPU's.
pub(crate) fn set_target(target: Option<Device>) {
    STATE.with(|s| s.borrow_mut().target = target);
}

/// The device this thread's traces plan for instead of their tensors', if any.
pub(crate) fn target() -> Option<Device> {
    STATE.with(|s| s.borrow().target)
}

/// True when an op on `device` is captured as on CUDA: `device` is a CUDA device, or the
/// trace plans for one. Ops whose capture differs on CUDA ask this: f16/bf16 softmax is
/// captured as the f32 softmax between two casts (the CUDA eager kernel computes it so; the
/// CPU's eager kernel stays an opaque node, its exact routines one rounding from the f32
/// result).
pub(crate) fn captures_as_cuda(device: Device) -> bool {
    device.is_cuda() || target().is_some_and(|t| t.is_cuda())
}

/// An error unless the operands of a captured op can meet on one device (as eager ops
/// require: one device, 0-dim CPU scalars joining a CUDA op); `op` names it.
#[track_caller]
pub(crate) fn check_devices(op: &'static str, operands: &[&Tensor]) -> Result<()> {
    if crate::cuda::any_on_cuda(operands) {
        let devices: Vec<(Device, bool)> = operands.iter().map(|t| (t.device(), t.dim() == 0)).collect();
        crate::cuda::elementwise::common_device(op, &devices)?;
    }
    Ok(())
}

/// While the returned guard lives, the nodes this thread's trace records are labelled as
/// recorded by `grad_fn`'s backward rule (the autograd engine calls this around each rule).
pub(crate) fn backward_of(grad_fn: &Arc<crate::autograd::Node>) -> BackwardOf {
    BackwardOf(swap_backward_of(Some(grad_fn.clone())))
}

/// Puts back the grad fn that [`backward_of`] replaced (a rule running a backward pass of its
/// own nests them) when dropped.
pub(crate) struct BackwardOf(Option<Arc<crate::autograd::Node>>);

impl Drop for BackwardOf {
    fn drop(&mut self) {
        swap_backward_of(self.0.take());
    }
}

/// Sets the trace's [`Trace::backward_of`] to `grad_fn`, returning the one it replaces (none
/// outside `kiln::compile`).
fn swap_backward_of(grad_fn: Option<Arc<crate::autograd::Node>>) -> Option<Arc<crate::autograd::Node>> {
    STATE.with(|s| s.borrow_mut().trace.as_mut().and_then(|t| std::mem::replace(&mut t.backward_of, grad_fn)))
}

/// Labels the nodes recorded until the guard drops with `at`, the user's line of an optimizer's
/// `step()` (its update rule is kiln's code, which `#[track_caller]` would otherwise name).
pub(crate) fn optimizer_step_at(at: &'static Location<'static>) -> OptimizerStepAt {
    OptimizerStepAt(swap_update_at(Some(at)))
}

/// Puts back the line that [`optimizer_step_at`] replaced when dropped.
pub(crate) struct OptimizerStepAt(Option<&'static Location<'static>>);

impl Drop for OptimizerStepAt {
    fn drop(&mut self) {
        swap_update_at(self.0.take());
    }
}

/// Sets the trace's [`Trace::update_at`], returning the one it replaces (none outside
/// `kiln::compile`).
fn swap_update_at(at: Option<&'static Location<'static>>) -> Option<&'static Location<'static>> {
    STATE.with(|s| s.borrow_mut().trace.as_mut().and_then(|t| std::mem::replace(&mut t.update_at, at)))
}

/// Sets the phase new nodes are labelled with (the autograd engine calls this).
pub(crate) fn set_phase(phase: Phase) {
    STATE.with(|s| {
        if let Some(t) = s.borrow_mut().trace.as_mut() {
            t.phase = phase;
        }
    })
}

/// Called before an eager op reads (`write`: writes) `cell`'s data: realizes the trace first
/// when the data is stale, or when an eager write would change what the trace reads; inside
/// a compiled call, journals the data an eager write is about to change.
///
/// A storage that another thread's trace assigns keeps its data until that trace installs the
/// new value, so it reads as it was before that step; a storage another thread's trace is
/// still to compute, or that a failed call was to compute, has no data: reading it is an
/// error naming the caller's line.
#[track_caller]
pub(crate) fn before_eager_access(cell: &Arc<StorageCell>, write: bool) {
    let id = cell.capture.trace();
    if id != 0 {
        let location = std::panic::Location::caller();
        let must_realize = STATE.with(|s| {
            let s = s.borrow();
            if s.suspended > 0 {
                return false;
            }
            match &s.trace {
                Some(t) if t.id == id => write || cell.capture.is_lazy(),
                _ if cell.capture.is_abandoned() => {
                    panic!("{}", crate::Error::at("kiln::compile", crate::ErrorKind::Value, "a tensor that a compiled call was computing when it failed was read: that call's results do not exist (the tensors it would have updated kept their values; call the step again)", location));
                }
                _ if cell.capture.is_lazy() && cell.capture.is_unwritten() => {
                    panic!("{}", crate::Error::at("kiln::compile", crate::ErrorKind::Value, "a tensor computed inside a compiled call on another thread was read before that call ended; read it on the thread that runs the step, or after the call returns", location));
                }
                _ => false,
            }
        });
        if must_realize {
            super::realize::realize(Some(location));
        }
    }
    if write {
        journal_before_write(cell);
    }
}

/// Appends an elementwise node reading `reads` (tensor, layout broadcast to `shape`) and
/// returns its lazy result.
#[track_caller]
pub(crate) fn elementwise(kind: NodeKind, reads: &[(&Tensor, Layout)], shape: &[usize], dtype: DType) -> Tensor {
    let at = Location::caller();
    with_trace(|t| {
        let uses: SmallVec<[Use; 3]> = reads.iter().map(|(x, l)| t.use_of(x, l.clone())).collect();
        let node = t.push_op(kind, shape, dtype, uses, at);
        t.lazy_tensor(node, shape, dtype)
    })
}

/// A lazy 0-dim tensor holding a Rust number given to the plan at run time.
pub(crate) fn scalar(value: Scalar, dtype: DType) -> Tensor {
    with_trace(|t| {
        let slot = t.scalars.len() as u32;
        t.scalars.push(value);
        let node = t.push(NodeKind::Scalar { slot }, &[], dtype, SmallVec::new(), Device::Cpu);
        t.lazy_tensor(node, &[], dtype)
    })
}

/// A lazy tensor of `dist` samples (F32 or F64) on `device` whose elements are those of `draw`
/// (already reserved from its generator): four `Scalar` nodes carry the draw's seed and offset
/// (run-time arguments, so the plan is reused while every call draws fresh numbers) and a
/// `Rand` node reads them, so the numbers are generated inside the kernel that consumes them
/// (a Cranelift or a CUDA kernel: both give the CPU generator's numbers).
pub(crate) fn rand(dist: RandDist, draw: &Philox, shape: &[usize], dtype: DType, device: Device) -> Tensor {
    with_trace(|t| {
        let reads = draw_words(draw)
            .into_iter()
            .map(|word| {
                let slot = t.scalars.len() as u32;
                t.scalars.push(Scalar::Int(word as i64));
                let node = t.push(NodeKind::Scalar { slot }, &[], DType::I64, SmallVec::new(), Device::Cpu);
                Use { node, layout: Layout::contiguous(&[]) }
            })
            .collect();
        let device = t.target.unwrap_or(device);
        let node = t.push(NodeKind::Rand(dist), shape, dtype, reads, device);
        t.lazy_tensor(node, shape, dtype)
    })
}

/// Appends an op without an expression: `run` computes it from the realized `inputs` (seen
/// through their layouts) when the trace is realized; its result has `shape` and `dtype`.
/// Errors `run` returns then name the caller's line (`run` is a closure, which
/// `#[track_caller]` can't reach).
#[track_caller]
pub(crate) fn opaque(
    name: &'static str,
    inputs: &[&Tensor],
    shape: &[usize],
    dtype: DType,
    run: impl FnOnce(&[Tensor]) -> Result<Tensor> + Send + 'static,
) -> Tensor {
    let run = at_caller_when_run(run);
    let at = Location::caller();
    with_trace(|t| {
        let uses: SmallVec<[Use; 3]> = inputs.iter().map(|x| t.use_of(x, x.layout().clone())).collect();
        let index = t.closures.len() as u32;
        t.closures.push(Some(run));
        let mut h = kiln_codegen::kernel::ahash_hasher();
        std::hash::Hash::hash(name, &mut h);
        let key = std::hash::Hasher::finish(&h);
        let node = t.push_op(NodeKind::Opaque { name, key, index }, shape, dtype, uses, at);
        t.lazy_tensor(node, shape, dtype)
    })
}

/// Appends a reduction of `input` (seen through its layout) over the dims `mask` marks, with
/// result `shape` and `dtype`, a sum divided as `divide` says (see `NodeKind::Reduce`); `eager` computes it from the realized input when no kernel is
/// generated for it (its errors name the caller's line, as [`opaque`]'s do).
#[track_caller]
pub(crate) fn reduce(
    op: ReduceOp,
    divide: Option<i64>,
    input: &Tensor,
    mask: &[bool],
    shape: &[usize],
    dtype: DType,
    eager: impl FnOnce(&[Tensor]) -> Result<Tensor> + Send + 'static,
) -> Tensor {
    let eager = at_caller_when_run(eager);
    let at = Location::caller();
    with_trace(|t| {
        let read = t.use_of(input, input.layout().clone());
        let index = t.closures.len() as u32;
        t.closures.push(Some(eager));
        let dims = mask.iter().enumerate().filter(|(_, &r)| r).fold(0u64, |m, (d, _)| m | 1 << d);
        let node =
            t.push_op(NodeKind::Reduce { op, dims, divide, index }, shape, dtype, SmallVec::from_iter([read]), at);
        t.lazy_tensor(node, shape, dtype)
    })
}

/// `run` boxed for a trace, its errors moved to the caller's line: the line that recorded the
/// op, which is the user's through `#[track_caller]` chains (an error surfaces when the step
/// runs, far from that line).
#[track_caller]
fn at_caller_when_run(run: impl FnOnce(&[Tensor]) -> Result<Tensor> + Send + 'static) -> OpaqueFn {
    let at = std::panic::Location::caller();
    Box::new(move |ins: &[Tensor]| run(ins).map_err(|e| crate::Error { location: at, ..e }))
}

/// Records `dst = value` in place (value broadcast to `dst`'s shape, of `dst`'s dtype): the
/// storage's current value becomes a new node, written back when the trace is realized.
#[track_caller]
pub(crate) fn assign(dst: &Tensor, value: &Tensor) {
    debug_assert_eq!(dst.dtype(), value.dtype());
    let at = Location::caller();
    with_trace(|t| {
        let cell = dst.cell().clone();
        let len = cell.len();
        let whole = dst.is_contiguous() && dst.storage_offset() == 0 && dst.numel() == len;
        let value_is_flat = value.is_contiguous()
            && value.storage_offset() == 0
            && value.numel() == len
            && value.shape() == dst.shape();
        let node = if whole && value_is_flat && value.cell().capture.node_in(t.id).is_some() {
            // The new storage is exactly the value's: no copy, no node.
            value.cell().capture.node_in(t.id).expect("checked")
        } else {
            let base = t.use_of(dst, Layout::contiguous(&[len]));
            let region = dst.layout().clone();
            let v = t.use_of(value, value.layout().broadcast_to(dst.shape()).expect("the caller checked the shapes"));
            t.push_op(NodeKind::Assign { len, region }, &[len], dst.dtype(), SmallVec::from_iter([base, v]), at)
        };
        cell.capture.set(t.id, node, true, len);
        t.cells.push(Arc::downgrade(&cell));
    });
    dst.bump_version();
}
