//! Grad nodes (`grad_fn`): what an op records so that backward can run its rule later, and the
//! tensors the rule saved.
//!
//! Every node has exactly one output (the tensor it computed); ops with several results (`max`
//! with indices, `sort`) have one differentiable result, and `split`/`chunk` record one node per
//! piece. Slicing views (`narrow`, `split`, `chunk`, `select`) record a [`NodeKind::Slice`]
//! without a rule: the engine keeps their gradients apart until their input's node runs, so
//! that pieces which tile it become one `cat` (`arrived.rs`). A node holds, per input, the edge to the node that receives that input's gradient
//! (the input's own `grad_fn`, or the `AccumulateGrad` of a leaf) and the input's shape and
//! dtype, so the engine can check and fix up what a rule returns (summing a broadcast gradient
//! down to the input's shape and casting it to the input's dtype, as PyTorch's engine does).

use super::hooks::Hook;
use super::meta::MetaInner;
use crate::error::{Error, ErrorKind, Result};
use crate::tensor::{Tensor, WeakTensor};
use kiln_runtime::{DType, Shape};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The gradients a rule returns, one per input (`None`: no gradient, i.e. zero).
pub(crate) type Grads = SmallVec<[Option<Tensor>; 2]>;

/// A backward rule: `(ctx, grad of the output, saved tensors) -> gradient of each input`, written
/// with ordinary tensor ops so it records history itself under `create_graph`.
pub(crate) type Rule = dyn Fn(&BackwardCtx, &Tensor, &[Tensor]) -> Grads + Send + Sync;

/// What a rule may ask about the call it differentiates.
pub struct BackwardCtx {
    needs: SmallVec<[bool; 2]>,
}

impl BackwardCtx {
    /// Whether input `i` needs a gradient (it, or something before it, requires grad); a rule may
    /// skip the work for inputs that don't (`ctx.needs_input_grad[i]`).
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false)
    }
}

/// One input of a node: where its gradient goes, and what that gradient must look like.
pub(crate) struct InputInfo {
    pub edge: Option<Arc<Node>>,
    pub shape: Shape,
    pub dtype: DType,
}

/// A tensor a rule saved, with the storage version it had then.
struct SavedTensor {
    data: Tensor,
    version: u64,
    /// The node's own output, saved without its `grad_fn` (which is this node: keeping it would be
    /// a reference cycle); unpacking puts the node back.
    is_output: bool,
}

/// The saved tensors of a node, dropped after backward unless the graph is retained.
#[derive(Default)]
pub(crate) struct SavedSlot {
    items: SmallVec<[SavedTensor; 2]>,
    released: bool,
}

/// What kind of node: a backward rule, a slice of the input, or the accumulation into a leaf's
/// `.grad`.
pub(crate) enum NodeKind {
    Rule {
        rule: Box<Rule>,
        saved: Mutex<SavedSlot>,
    },
    /// The output is a slice of the one input; its gradient goes to that slice of the input's.
    Slice(SliceOf),
    AccumulateGrad {
        leaf: Tensor,
    },
}

/// Where a slicing view's output sits in its input: `input.narrow(dim, start, len)`, and for
/// `select` (`squeezed`) that slice of length 1 with `dim` removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SliceOf {
    /// The sliced dim of the input.
    pub dim: usize,
    /// The slice's first index along `dim`.
    pub start: usize,
    /// `select`: the output lacks `dim`.
    pub squeezed: bool,
}

/// Hooks on the gradient of a non-leaf tensor (run before the node's rule).
#[derive(Default)]
pub(crate) struct NodeHooks {
    pub hooks: Vec<(u64, Hook)>,
    /// `retain_grad()`: the tensor whose `.grad` receives this node's incoming gradient.
    pub retain: Option<WeakTensor>,
}

/// A grad node. Users see it as [`GradFn`].
pub struct Node {
    pub(crate) name: Cow<'static, str>,
    /// Creation order: the engine runs ready nodes newest first, as PyTorch does.
    pub(crate) seq: u64,
    pub(crate) inputs: SmallVec<[InputInfo; 2]>,
    pub(crate) kind: NodeKind,
    pub(crate) hooks: Mutex<NodeHooks>,
    /// The line that recorded the forward op (the user's, where `#[track_caller]` reaches it):
    /// what a compiled step's listing shows for the backward nodes its rule records.
    pub(crate) origin: &'static Location<'static>,
}

static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

impl Node {
    #[track_caller]
    fn new(name: Cow<'static, str>, inputs: SmallVec<[InputInfo; 2]>, kind: NodeKind) -> Node {
        let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
        Node { name, seq, inputs, kind, hooks: Mutex::default(), origin: Location::caller() }
    }

    /// The hooks on this node's output gradient.
    pub(crate) fn lock_hooks(&self) -> MutexGuard<'_, NodeHooks> {
        self.hooks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Which inputs need a gradient.
    pub(crate) fn ctx(&self) -> BackwardCtx {
        BackwardCtx { needs: self.inputs.iter().map(|i| i.edge.is_some()).collect() }
    }

    /// The saved tensors, checked against in-place writes made since they were saved; the node's
    /// own output comes back with this node as its `grad_fn` when grad mode is on (so a
    /// `create_graph` backward differentiates through it).
    pub(crate) fn unpack_saved(self: &Arc<Self>) -> Result<SmallVec<[Tensor; 2]>> {
        let NodeKind::Rule { saved, .. } = &self.kind else { return Ok(SmallVec::new()) };
        let slot = saved.lock().unwrap_or_else(|e| e.into_inner());
        if slot.released {
            return Err(Error::new(
                "backward",
                ErrorKind::Value,
                format!(
                    "trying to backward through the graph a second time (or directly access saved tensors after they have already been freed): the saved tensors of {} were freed when backward ran; pass `retain_graph: true` (BackwardOpts) to the first backward if you need to backward through the graph again",
                    self.name
                ),
            ));
        }
        let mut out = SmallVec::new();
        for (i, s) in slot.items.iter().enumerate() {
            let now = s.data.version();
            if now != s.version {
                return Err(Error::new(
                    "backward",
                    ErrorKind::Value,
                    format!(
                        "one of the variables needed for gradient computation has been modified by an inplace operation: [{}, shape {:?}], saved tensor {i} of {}, is at version {now}; expected version {} instead",
                        s.data.dtype(),
                        s.data.shape(),
                        self.name,
                        s.version
                    ),
                ));
            }
            let t = if s.is_output && super::is_grad_enabled() {
                let t = s.data.detach();
                t.autograd().set_grad_fn(Some(self.clone()));
                t
            } else {
                s.data.clone()
            };
            out.push(t);
        }
        Ok(out)
    }

    /// Drops the saved tensors (after a backward that does not retain the graph).
    pub(crate) fn release_saved(&self) {
        if let NodeKind::Rule { saved, .. } = &self.kind {
            let mut slot = saved.lock().unwrap_or_else(|e| e.into_inner());
            if !slot.items.is_empty() {
                slot.items.clear();
                slot.released = true;
            }
        }
    }
}

impl Drop for Node {
    /// Drops the graph behind this node without recursion (a chain of 100,000 ops would
    /// otherwise overflow the stack): edges and saved tensors this node was the last owner of
    /// are unlinked onto an explicit stack first.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Node>> = Vec::new();
        unlink(self, &mut stack);
        while let Some(mut n) = stack.pop() {
            // Unlink in place when this is the only handle (no move of the node out of its
            // Arc); a node that weak handles still point at is moved out and unlinked.
            if let Some(node) = Arc::get_mut(&mut n) {
                unlink(node, &mut stack);
            } else if let Ok(mut node) = Arc::try_unwrap(n) {
                unlink(&mut node, &mut stack);
            }
        }
    }
}

/// Moves the nodes `node` links to (its edges, and the `grad_fn`s of saved tensors it alone
/// holds) onto `stack`.
fn unlink(node: &mut Node, stack: &mut Vec<Arc<Node>>) {
    stack.extend(node.inputs.iter_mut().filter_map(|i| i.edge.take()));
    if let NodeKind::Rule { saved, .. } = &mut node.kind {
        let slot = saved.get_mut().unwrap_or_else(|e| e.into_inner());
        for s in slot.items.drain(..) {
            if let Some(f) = s.data.take_grad_fn_if_last() {
                stack.push(f);
            }
        }
    }
}

/// A tensor to save for backward, given to [`record`].
pub(crate) enum Saved {
    /// This tensor as it is now (an input, or a helper such as indices or a mask).
    Tensor(Tensor),
    /// The op's output.
    Output,
}

impl Saved {
    /// Saves `t` (a handle: no copy).
    pub(crate) fn of(t: &Tensor) -> Saved {
        Saved::Tensor(t.clone())
    }
}

/// True when an op with these inputs must record a node: grad mode is on and some input
/// requires grad.
#[inline]
pub(crate) fn is_recording(inputs: &[&Tensor]) -> bool {
    super::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
}

/// Where the gradient of `t` goes: its `grad_fn`, its leaf accumulator, or nowhere.
pub(crate) fn gradient_edge(t: &Tensor) -> Option<Arc<Node>> {
    let meta = t.autograd();
    if !meta.requires_grad() {
        return None;
    }
    let mut inner = meta.lock();
    if let Some(f) = &inner.grad_fn {
        return Some(f.clone());
    }
    Some(accumulator(t, &mut inner))
}

/// The leaf's `AccumulateGrad` node, made on first use and shared while any graph holds it.
fn accumulator(leaf: &Tensor, inner: &mut MetaInner) -> Arc<Node> {
    if let Some(n) = inner.accumulator.upgrade() {
        return n;
    }
    let n = Arc::new(Node::new(
        Cow::Borrowed("AccumulateGrad"),
        SmallVec::new(),
        NodeKind::AccumulateGrad { leaf: leaf.clone() },
    ));
    inner.accumulator = Arc::downgrade(&n);
    n
}

/// Records that `out` was computed from `inputs` by an op whose backward is `rule`, saving
/// `saved` for it; returns `out` with its new `grad_fn`. Call only when
/// [`is_recording`]`(inputs)` (build the saved list and the rule only then).
#[track_caller]
pub(crate) fn record(
    out: Tensor,
    name: impl Into<Cow<'static, str>>,
    inputs: &[&Tensor],
    saved: impl IntoIterator<Item = Saved>,
    rule: impl Fn(&BackwardCtx, &Tensor, &[Tensor]) -> Grads + Send + Sync + 'static,
) -> Tensor {
    debug_assert!(out.dtype().is_float(), "only floating-point outputs record history");
    let infos = inputs
        .iter()
        .map(|t| InputInfo { edge: gradient_edge(t), shape: t.shape().into(), dtype: t.dtype() })
        .collect();
    let items = saved
        .into_iter()
        .map(|s| match s {
            Saved::Tensor(t) => SavedTensor { version: t.version(), data: t, is_output: false },
            Saved::Output => SavedTensor { version: out.version(), data: out.detach(), is_output: true },
        })
        .collect();
    let kind = NodeKind::Rule { rule: Box::new(rule), saved: Mutex::new(SavedSlot { items, released: false }) };
    let node = Arc::new(Node::new(name.into(), infos, kind));
    out.autograd().set_grad_fn(Some(node));
    out
}

/// Records `out`, the slice `slice` of `input` (a view sharing its storage), as
/// [`record_view`] does for other views. Call only when [`is_recording`]`(&[input])`.
#[track_caller]
pub(crate) fn record_slice(out: Tensor, name: &'static str, input: &Tensor, slice: SliceOf) -> Tensor {
    let info = InputInfo { edge: gradient_edge(input), shape: input.shape().into(), dtype: input.dtype() };
    let node = Arc::new(Node::new(Cow::Borrowed(name), smallvec::smallvec![info], NodeKind::Slice(slice)));
    out.autograd().set_grad_fn(Some(node));
    marked_view(out)
}

/// Marks `out` (a view with a `grad_fn`) and its storage, so that in-place writes that would
/// make the view's history stale are refused.
fn marked_view(out: Tensor) -> Tensor {
    out.autograd().lock().is_tracked_view = true;
    out.mark_tracked_views();
    out
}

/// [`record`] for a view op (one input, output sharing its storage): also marks the output and
/// the storage, so that in-place writes that would make the view's history stale are refused.
#[track_caller]
pub(crate) fn record_view(
    out: Tensor,
    name: &'static str,
    input: &Tensor,
    rule: impl Fn(&BackwardCtx, &Tensor, &[Tensor]) -> Grads + Send + Sync + 'static,
) -> Tensor {
    marked_view(record(out, name, &[input], [], rule))
}

/// `grads![a, b]`: a [`Grads`] from expressions of type `Option<Tensor>`.
macro_rules! grads {
    ($($g:expr),* $(,)?) => {{
        let g: $crate::autograd::Grads = smallvec::smallvec![$($g),*];
        g
    }};
}
pub(crate) use grads;

/// A tensor's `grad_fn`: the node of the op that computed it (`y.grad_fn()`), or the
/// `AccumulateGrad` of a leaf reached through [`GradFn::next_functions`].
#[derive(Clone)]
pub struct GradFn(pub(crate) Arc<Node>);

impl GradFn {
    /// PyTorch's name of the node: `AddBackward0`, `MmBackward0`, `AccumulateGrad`, ….
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The nodes that receive this node's input gradients, one per input in call order
    /// (`None` for an input that does not require grad), as `grad_fn.next_functions` (whose
    /// second tuple element, the output index, is always 0 here: every node has one output).
    pub fn next_functions(&self) -> Vec<Option<GradFn>> {
        self.0.inputs.iter().map(|i| i.edge.clone().map(GradFn)).collect()
    }

    /// The leaf an `AccumulateGrad` node accumulates into (`grad_fn.variable`).
    pub fn variable(&self) -> Option<Tensor> {
        match &self.0.kind {
            NodeKind::AccumulateGrad { leaf } => Some(leaf.clone()),
            NodeKind::Rule { .. } | NodeKind::Slice(_) => None,
        }
    }
}

impl PartialEq for GradFn {
    fn eq(&self, other: &GradFn) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for GradFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.0.name)
    }
}

impl fmt::Display for GradFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.0.name)
    }
}
