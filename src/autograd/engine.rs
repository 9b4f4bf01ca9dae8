//! The backward engine: walks the graph from the roots in dependency order, without recursion,
//! running each node's rule once all the gradients flowing into it have been summed.

use super::arrived::{Arrived, Piece};
use super::node::{gradient_edge, Grads, Node, NodeKind};
use crate::error::{Error, ErrorKind, Result};
use crate::tensor::Tensor;
use ahash::AHashMap;
use smallvec::SmallVec;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Options of [`Tensor::backward_opts`] (`loss.backward(retain_graph=…, create_graph=…)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackwardOpts {
    /// Keep the saved tensors so the graph can be differentiated again. `create_graph` implies it
    /// (PyTorch's default `retain_graph=None` means "same as `create_graph`").
    pub retain_graph: bool,
    /// Record the backward pass itself, so gradients carry history (higher-order derivatives).
    pub create_graph: bool,
}

/// The state of one node during a backward run.
struct Task {
    node: Arc<Node>,
    /// Gradients still to arrive (edges from nodes not yet run).
    deps: usize,
    /// The gradients arrived so far.
    arrived: Arrived,
}

/// What a node passes to one input: a gradient of the input's whole shape, or (from a
/// slicing view) the gradient of one slice of it.
enum Flow {
    Dense(Tensor),
    Slice(Piece),
}

/// What a node passes to its inputs, in order (inline for up to two inputs, as [`Grads`]:
/// the engine makes one per node it runs).
type Flows = SmallVec<[Option<Flow>; 2]>;

type Key = *const Node;

/// Runs backward from `roots` (each with the gradient of its output). With `capture`, the
/// gradients arriving at those nodes are returned instead of being accumulated into leaves
/// (`autograd.grad`); otherwise leaves accumulate into `.grad`.
#[track_caller]
pub(crate) fn run(
    roots: Vec<(Arc<Node>, Tensor)>,
    opts: BackwardOpts,
    capture: Option<&[Arc<Node>]>,
) -> Result<Vec<Option<Tensor>>> {
    let retain = opts.retain_graph || opts.create_graph;
    let _mode = super::grad_mode(opts.create_graph);
    // Backward rules run in the dtypes forward chose: no autocast inside them.
    let _autocast_off = crate::amp::autocast::suspend();
    // Under kiln::compile, label what this pass records as backward, what follows as update.
    struct Phase;
    impl Drop for Phase {
        fn drop(&mut self) {
            crate::capture::set_phase(kiln_codegen::ir::Phase::Update);
        }
    }
    crate::capture::set_phase(kiln_codegen::ir::Phase::Backward);
    let _phase = Phase;
    let mut tasks: AHashMap<Key, Task> = AHashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    for (node, _) in &roots {
        tasks.entry(Arc::as_ptr(node)).or_insert_with(|| {
            stack.push(node.clone());
            Task { node: node.clone(), deps: 0, arrived: Arrived::default() }
        });
    }
    // Count the edges into every reachable node (iteratively: graphs can be very deep).
    while let Some(n) = stack.pop() {
        for input in &n.inputs {
            if let Some(e) = &input.edge {
                let t = tasks.entry(Arc::as_ptr(e)).or_insert_with(|| {
                    stack.push(e.clone());
                    Task { node: e.clone(), deps: 0, arrived: Arrived::default() }
                });
                t.deps += 1;
            }
        }
    }
    for (node, g) in roots {
        let t = tasks.get_mut(&Arc::as_ptr(&node)).expect("root registered");
        t.arrived.add(g);
    }
    let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    for (k, t) in &tasks {
        if t.deps == 0 {
            ready.push((t.node.seq, *k as usize));
        }
    }
    let mut captured: Vec<Option<Tensor>> = vec![None; capture.map_or(0, |c| c.len())];
    while let Some((_, key)) = ready.pop() {
        let task = tasks.get_mut(&(key as Key)).expect("ready node registered");
        let node = task.node.clone();
        let grad = std::mem::take(&mut task.arrived).total();
        if let Some(targets) = capture {
            for (i, target) in targets.iter().enumerate() {
                if Arc::ptr_eq(target, &node) {
                    captured[i] = grad.clone();
                }
            }
        }
        let flows = match grad {
            None => Flows::new(),
            Some(g) => run_node(&node, g, opts.create_graph, retain, capture.is_some())
                .inspect_err(|_| super::callbacks::clear())?,
        };
        let mut flows = flows.into_iter();
        for info in &node.inputs {
            let flow = flows.next().flatten();
            let Some(edge) = &info.edge else { continue };
            let t = tasks.get_mut(&Arc::as_ptr(edge)).expect("edge target registered");
            match flow {
                Some(Flow::Dense(g)) => t.arrived.add(g),
                Some(Flow::Slice(piece)) => t.arrived.add_piece(piece, &info.shape),
                None => {}
            }
            t.deps -= 1;
            if t.deps == 0 {
                ready.push((edge.seq, Arc::as_ptr(edge) as usize));
            }
        }
    }
    super::callbacks::run_queued(std::panic::Location::caller())?;
    Ok(captured)
}

/// Runs one node on its summed incoming gradient: hooks, then the rule (or the accumulation into
/// a leaf, or the placing of a slice's gradient), then the checks on what the rule returned.
/// Returns what flows to each input, in order (fewer entries than inputs: nothing to the rest).
#[track_caller]
fn run_node(node: &Arc<Node>, g: Tensor, create_graph: bool, retain: bool, capturing: bool) -> Result<Flows> {
    match &node.kind {
        NodeKind::AccumulateGrad { leaf } => {
            if !capturing {
                let hooks: Vec<_> = leaf.autograd().lock().hooks.iter().map(|(_, h)| h.clone()).collect();
                let g = hooks.iter().fold(g, |g, h| h(&g).unwrap_or(g));
                accumulate_grad(leaf, g, create_graph);
                let post: Vec<_> =
                    leaf.autograd().lock().post_accumulate_hooks.iter().map(|(_, h)| h.clone()).collect();
                post.iter().for_each(|h| h(leaf));
            }
            Ok(Flows::new())
        }
        NodeKind::Slice(slice) => {
            Ok(smallvec::smallvec![Some(Flow::Slice(Piece::new(*slice, node_hooks(node, g, create_graph))))])
        }
        NodeKind::Rule { rule, .. } => {
            // Inside kiln::compile, what the rule records is labelled as this node's backward.
            let _origin = crate::capture::backward_of(node);
            let g = node_hooks(node, g, create_graph);
            let saved = node.unpack_saved()?;
            let grads = rule(&node.ctx(), &g, &saved);
            drop(saved);
            if !retain {
                node.release_saved();
            }
            Ok(check_grads(node, grads)?.into_iter().map(|g| g.map(Flow::Dense)).collect())
        }
    }
}

/// Runs the hooks on a non-leaf node's incoming gradient `g` and stores it in the tensor that
/// retains it (`retain_grad`); returns the gradient the hooks leave.
fn node_hooks(node: &Node, g: Tensor, create_graph: bool) -> Tensor {
    let (hooks, retain_target) = {
        let h = node.lock_hooks();
        (h.hooks.iter().map(|(_, h)| h.clone()).collect::<Vec<_>>(), h.retain.clone())
    };
    let g = hooks.iter().fold(g, |g, h| h(&g).unwrap_or(g));
    if let Some(t) = retain_target.and_then(|w| w.upgrade()) {
        accumulate_grad(&t, g.clone(), create_graph);
    }
    g
}

/// Checks the gradients a rule returned against its inputs: sums a broadcast gradient down to the
/// input's shape, casts it to the input's dtype, and fails for any other shape.
#[track_caller]
fn check_grads(node: &Node, grads: Grads) -> Result<Grads> {
    if grads.len() != node.inputs.len() {
        return Err(Error::new(
            "backward",
            ErrorKind::Value,
            format!(
                "function {} returned {} gradients, but it has {} inputs",
                node.name,
                grads.len(),
                node.inputs.len()
            ),
        ));
    }
    let mut out = Grads::with_capacity(grads.len());
    for (i, (info, g)) in node.inputs.iter().zip(grads).enumerate() {
        let g = match g {
            Some(g) if info.edge.is_some() => g,
            _ => {
                out.push(None);
                continue;
            }
        };
        let g = if g.shape() == info.shape.as_slice() {
            g
        } else if kiln_runtime::layout::broadcast_shapes(&info.shape, g.shape()).as_deref() == Some(g.shape()) {
            sum_to_size(&g, &info.shape)
        } else {
            return Err(Error::new(
                "backward",
                ErrorKind::Shape,
                format!("function {} returned an invalid gradient at index {i}: got shape {:?} but expected a shape compatible with {:?}", node.name, g.shape(), info.shape),
            ));
        };
        out.push(Some(g.to_dtype(info.dtype)));
    }
    Ok(out)
}

/// Sums `g` over the dims that broadcasting added or expanded, down to `shape`.
pub(crate) fn sum_to_size(g: &Tensor, shape: &[usize]) -> Tensor {
    let lead = g.dim() - shape.len();
    let dims: Vec<i64> =
        (0..g.dim()).filter(|&d| d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)).map(|d| d as i64).collect();
    let summed = if dims.is_empty() { g.clone() } else { g.sum_dim_keepdim(dims) };
    let target: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
    summed.reshape(&target)
}

/// Adds `g` into `leaf.grad`: the first gradient is stored (copied when it may be shared with
/// other tensors, so later in-place accumulation cannot reach them), later ones are summed.
/// Without `create_graph` the stored gradient has no history.
///
/// Atomic per tensor: the sum is computed outside the lock (it may record autograd history or
/// append to a capture) and stored only if `.grad` is still the value it was computed from;
/// otherwise (another thread's backward stored first) it is computed again from the new value.
pub(crate) fn accumulate_grad(leaf: &Tensor, g: Tensor, create_graph: bool) {
    let meta = leaf.autograd();
    let mut g = Some(g);
    loop {
        let old = meta.lock().grad.clone();
        let new = match (&old, g.take()) {
            (None, Some(g)) if create_graph => g,
            (None, Some(g)) => g.detached_owned(),
            (Some(old), Some(mine)) => {
                let _off = (!create_graph).then(super::no_grad_guard);
                let sum = old + &mine;
                g = Some(mine);
                if create_graph {
                    sum
                } else {
                    sum.detach()
                }
            }
            (_, None) => unreachable!("the gradient is put back after every attempt"),
        };
        let mut inner = meta.lock();
        let unchanged = match (&inner.grad, &old) {
            (None, None) => true,
            (Some(now), Some(then)) => now.is_same(then),
            _ => false,
        };
        if unchanged {
            crate::capture::journal_grad(leaf, &inner.grad);
            inner.grad = Some(new);
            return;
        }
        if old.is_none() {
            g = Some(new); // the (detached) gradient: add it to the one stored meanwhile
        }
    }
}

/// The edges of `roots` (tensors that must require grad), for [`run`].
#[track_caller]
pub(crate) fn root_edges(op: &'static str, roots: &[&Tensor]) -> Result<Vec<Arc<Node>>> {
    let at = std::panic::Location::caller();
    roots
        .iter()
        .enumerate()
        .map(|(i, t)| {
            gradient_edge(t).ok_or_else(|| {
                Error::at(op, ErrorKind::Value, format!("element {i} of tensors does not require grad and does not have a grad_fn (shape {:?}, dtype {})", t.shape(), t.dtype()), at)
            })
        })
        .collect::<Result<Vec<_>>>()
}
