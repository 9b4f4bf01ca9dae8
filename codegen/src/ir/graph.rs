//! The captured step as a DAG: nodes in trace order (which is a topological order), each
//! producing one value, each reading earlier values through a view.

use kiln_runtime::cpu::philox::{self, Philox};
use kiln_runtime::dtype::FloatElement;
use kiln_runtime::op_kind::{BinaryOp, CmpOp, LogicalOp, ReduceOp, UnaryOp};
use kiln_runtime::{DType, Device, Layout, Shape};
use smallvec::SmallVec;

/// A node's index in [`Graph::nodes`].
pub type NodeId = u32;

/// A read of a node's value through a view: `layout` addresses the node's flat storage (an op
/// node's value is contiguous over its shape; an input's is the whole realized storage), so
/// transposes, narrows and broadcasts are index maps, never copies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Use {
    /// The node read.
    pub node: NodeId,
    /// Where the elements sit in its storage.
    pub layout: Layout,
}

/// What a node computes.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// A realized storage of `len` elements that the step reads (a parameter, a batch, a
    /// tensor made eagerly inside the step); `slot` is its place in the step's input list.
    Input {
        /// Place in the list of the step's realized inputs.
        slot: u32,
        /// Elements in the storage.
        len: usize,
    },
    /// A Rust number given at run time (0-dim), so a new learning rate reuses the plan.
    Scalar {
        /// Place in the step's list of scalar arguments.
        slot: u32,
    },
    /// `op(x)` elementwise.
    Unary(UnaryOp),
    /// `op(a, b)` elementwise; both reads are broadcast to the node's shape.
    Binary(BinaryOp),
    /// A comparison (Bool result).
    Cmp(CmpOp),
    /// A logical op (Bool result).
    Logical(LogicalOp),
    /// Logical not (Bool result).
    Not,
    /// `where(cond, a, b)`.
    Where,
    /// A dtype conversion (the node's dtype) with the eager cast rules.
    Cast,
    /// A new storage written by an in-place op: the old storage (read 0, flat) with the
    /// elements at `region` replaced by read 1 (broadcast to `region`'s shape). `len` is the
    /// storage's length. When `region` covers the whole storage in order, the value is read 1.
    Assign {
        /// Elements in the storage.
        len: usize,
        /// The written elements.
        region: Layout,
    },
    /// A reduction of read 0 (whose layout's shape is the iteration space) over the dims set
    /// in `dims` (bit `d` for dim `d` of that shape); the node's shape is the result's (kept
    /// dims, with or without the reduced ones as size 1: the same elements). `divide: Some(c)`
    /// divides each sum by `max(count - c, 0)`, `count` being the elements it reduced (`c = 0`:
    /// a mean; `c = 1`: a variance's Bessel correction). `index` is the eager implementation's
    /// place in the trace's closures, run when no kernel is generated for it.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// Bit `d` set: dim `d` of the read's shape is reduced.
        dims: u64,
        /// A `Sum` divided by the count less this correction (`Some(0)`: `mean`).
        divide: Option<i64>,
        /// Which closure of the trace runs it eagerly.
        index: u32,
    },
    /// Random numbers generated in place: element `i` (row-major over the node's shape) is
    /// element `i` of the Philox draw whose seed and offset the node's four reads give (see
    /// [`RandDist`] and [`draw_words`]). The dtype is F32 or F64.
    Rand(RandDist),
    /// An op without an expression (matmul, conv, …): run by its eager
    /// implementation on realized inputs. `key` hashes its name and attributes; `index` is
    /// its place in the trace's list of eager closures.
    Opaque {
        /// The op's name (for messages and dumps).
        name: &'static str,
        /// Hash of the name and every attribute that changes the result.
        key: u64,
        /// Which closure of the trace runs it.
        index: u32,
    },
}

impl NodeKind {
    /// True for the ops a fused elementwise kernel can compute.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            NodeKind::Unary(_)
                | NodeKind::Binary(_)
                | NodeKind::Cmp(_)
                | NodeKind::Logical(_)
                | NodeKind::Not
                | NodeKind::Where
                | NodeKind::Cast
                | NodeKind::Rand(_)
        )
    }

    /// A short name for messages and dumps.
    pub fn name(&self) -> String {
        match self {
            NodeKind::Input { slot, .. } => format!("input{slot}"),
            NodeKind::Scalar { slot } => format!("scalar{slot}"),
            NodeKind::Unary(op) => op.name().to_string(),
            NodeKind::Binary(op) => op.name().to_string(),
            NodeKind::Cmp(op) => op.name().to_string(),
            NodeKind::Logical(op) => op.name().to_string(),
            NodeKind::Not => "logical_not".into(),
            NodeKind::Where => "where".into(),
            NodeKind::Cast => "to".into(),
            NodeKind::Rand(dist) => dist.name().into(),
            NodeKind::Assign { .. } => "assign".into(),
            NodeKind::Reduce { divide: Some(0), .. } => "mean".into(),
            NodeKind::Reduce { divide: Some(c), .. } => format!("sum/(n-{c})"),
            NodeKind::Reduce { op, .. } => op.name().to_string(),
            NodeKind::Opaque { name, .. } => (*name).to_string(),
        }
    }
}

/// The distribution of a [`NodeKind::Rand`] node or an [`InstOp::Rand`] instruction: the
/// numbers of `kiln_runtime::cpu::philox`'s uniform and normal rules, bit for bit.
///
/// [`InstOp::Rand`]: crate::kernel::InstOp::Rand
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RandDist {
    /// Uniform on `[0, 1)` (`rand`).
    Uniform,
    /// Standard normal (`randn`).
    Normal,
}

impl RandDist {
    /// The eager op's name (`rand` or `randn`).
    pub fn name(self) -> &'static str {
        match self {
            RandDist::Uniform => "rand",
            RandDist::Normal => "randn",
        }
    }

    /// Element `i` of `draw` in this distribution, as eager `rand`/`randn` of `T` make it.
    pub fn at<T: FloatElement>(self, draw: &Philox, i: u64) -> T {
        match self {
            RandDist::Uniform => philox::uniform_at(draw, i, 0.0, 1.0),
            RandDist::Normal => philox::normal_at(draw, i, 0.0, 1.0),
        }
    }

    /// Elements `start..start + out.len()` of `draw` in this distribution, as eager
    /// `rand`/`randn` of `T` make them (each equal to [`RandDist::at`]).
    pub fn fill_from<T: FloatElement>(self, out: &mut [T], draw: &Philox, start: u64) {
        match self {
            RandDist::Uniform => philox::uniform_from(out, draw, start, 0.0, 1.0),
            RandDist::Normal => philox::normal_from(out, draw, start, 0.0, 1.0),
        }
    }
}

/// The four run-time scalars of a draw, in the order a [`NodeKind::Rand`] node reads them (and
/// an `InstOp::Rand` finds them): the seed's low and high 32 bits, then the offset's. Each is
/// exact as the f64 a kernel scalar is.
pub fn draw_words(draw: &Philox) -> [u32; 4] {
    let (seed, offset) = (draw.seed(), draw.offset());
    [seed as u32, (seed >> 32) as u32, offset as u32, (offset >> 32) as u32]
}

/// The draw whose [`draw_words`] are `scalars` (as f64 kernel scalars).
pub fn draw_of_scalars(scalars: [f64; 4]) -> Philox {
    let [seed_lo, seed_hi, off_lo, off_hi] = scalars.map(|w| w as u64);
    Philox::new((seed_hi << 32) | seed_lo, (off_hi << 32) | off_lo)
}

/// One node: its kind, the value's shape and dtype, and what it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What it computes.
    pub kind: NodeKind,
    /// The value's shape (for `Input` and `Assign`: `[len]`, the flat storage).
    pub shape: Shape,
    /// The value's dtype.
    pub dtype: DType,
    /// The values read, in the op's operand order.
    pub reads: SmallVec<[Use; 3]>,
}

impl Node {
    /// Elements in the value.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// For a reduction: true when its reduced dims come after its kept ones in the input shape
    /// (size-1 dims aside), so a kernel walks each output's elements contiguously in the
    /// input's row-major order. False for every other node.
    pub fn reduces_trailing_dims(&self) -> bool {
        let NodeKind::Reduce { dims, .. } = self.kind else { return false };
        let shape = self.iteration_shape();
        let first_reduced = (0..shape.len()).find(|&d| shape[d] > 1 && dims & (1 << d) != 0);
        first_reduced.is_none_or(|f| (f..shape.len()).all(|d| shape[d] <= 1 || dims & (1 << d) != 0))
    }

    /// The shape a fused kernel iterates over to compute this node: a reduction's input shape,
    /// every other node's own shape.
    pub fn iteration_shape(&self) -> &[usize] {
        match self.kind {
            NodeKind::Reduce { .. } => self.reads[0].layout.shape(),
            _ => &self.shape,
        }
    }
}

/// Which part of the training step a node belongs to (for dumps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Recorded before any backward pass.
    Forward,
    /// Recorded by a backward pass.
    Backward,
    /// Recorded after a backward pass (optimizer updates, …).
    Update,
}

/// A captured step: its nodes and the values that must be realized (outputs).
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Nodes in trace order; every read names an earlier node.
    pub nodes: Vec<Node>,
    /// The phase each node was recorded in.
    pub phases: Vec<Phase>,
    /// Nodes whose values leave the step (a live tensor's storage, or an assigned storage).
    pub outputs: Vec<NodeId>,
    /// The device each node's value lives on, which picks the back end of the kernel that
    /// computes it: part of the structural hash, so a plan is built per device.
    pub devices: Vec<Device>,
    /// Where each node came from (for listings and logs; not part of the structural hash, so a
    /// cached plan shows the origins of the call that built it).
    pub origins: Vec<Origin>,
}

/// Where a captured node came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The source line that recorded it: the user's where `#[track_caller]` reaches it from
    /// the user's call (for a backward node, the line of the forward op it differentiates,
    /// when that op recorded one).
    pub at: Option<&'static std::panic::Location<'static>>,
    /// For a backward node: the name of the grad fn whose rule recorded it (`MulBackward0`).
    pub grad_of: Option<std::borrow::Cow<'static, str>>,
}

impl Origin {
    /// Whether anything is known of where the node came from.
    pub fn is_known(&self) -> bool {
        self.at.is_some() || self.grad_of.is_some()
    }
}

impl std::fmt::Display for Origin {
    /// `file:line:column`, `backward of NAME (file:line:column)`, or `-` when unknown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.grad_of, self.at) {
            (Some(name), Some(at)) => write!(f, "backward of {name} ({at})"),
            (Some(name), None) => write!(f, "backward of {name}"),
            (None, Some(at)) => write!(f, "{at}"),
            (None, None) => f.write_str("-"),
        }
    }
}

impl Graph {
    /// The node `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// Appends a node whose value lives on the CPU and returns its id.
    pub fn push(&mut self, node: Node, phase: Phase) -> NodeId {
        self.push_on(node, phase, Device::Cpu)
    }

    /// Appends a node whose value lives on `device` and returns its id.
    pub fn push_on(&mut self, node: Node, phase: Phase, device: Device) -> NodeId {
        debug_assert!(node.reads.iter().all(|u| (u.node as usize) < self.nodes.len()));
        self.nodes.push(node);
        self.phases.push(phase);
        self.devices.push(device);
        self.origins.push(Origin::default());
        (self.nodes.len() - 1) as NodeId
    }

    /// The device node `id`'s value lives on.
    pub fn device(&self, id: NodeId) -> Device {
        self.devices[id as usize]
    }

    /// How many times each node is read (by nodes and by the output list).
    pub fn use_counts(&self) -> Vec<u32> {
        let mut counts = vec![0u32; self.nodes.len()];
        for n in &self.nodes {
            for u in &n.reads {
                counts[u.node as usize] += 1;
            }
        }
        for &o in &self.outputs {
            counts[o as usize] += 1;
        }
        counts
    }
}
