//! A collective as the NCCL transport launches it: kiln's [`Call`] and [`ReduceOp`] in NCCL's
//! terms (pure functions, tested without a GPU).

use crate::distributed::options::ReduceOp;
use crate::distributed::transport::{Call, Wire};
use kiln_runtime::cuda::nccl::{Collective, NcclReduce};

/// NCCL's reduction for `op` on `wire` elements. Bool travels as bytes of 0 or 1, so its
/// sum (or) is a max and its product (and) a min, as PyTorch's NCCL backend does.
pub(super) fn reduction(op: ReduceOp, wire: Wire) -> NcclReduce {
    match (op, wire == Wire::Bool) {
        (ReduceOp::Sum | ReduceOp::Max, true) => NcclReduce::Max,
        (ReduceOp::Product | ReduceOp::Min, true) => NcclReduce::Min,
        (ReduceOp::Sum, false) => NcclReduce::Sum,
        (ReduceOp::Avg, _) => NcclReduce::Avg,
        (ReduceOp::Max, false) => NcclReduce::Max,
        (ReduceOp::Min, false) => NcclReduce::Min,
        (ReduceOp::Product, false) => NcclReduce::Prod,
    }
}

/// One NCCL call: the collective, its device buffers and its per-rank element count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Launch {
    pub call: Collective,
    pub send: u64,
    pub recv: u64,
    pub count: usize,
}

/// The NCCL call for `call` on this `rank` with the transport's buffers (see [`Call`]): a
/// broadcast runs in place (the root's `send`, the others' `recv`, as NCCL allows), and a
/// barrier, which NCCL lacks, is a one-byte max all-reduce in place on `scratch` (PyTorch's NCCL
/// barrier is an all-reduce too).
pub(super) fn launch(call: Call, wire: Wire, rank: usize, send: u64, recv: u64, count: usize, scratch: u64) -> Launch {
    let (call, send, recv, count) = match call {
        Call::AllReduce(op) => (Collective::AllReduce(reduction(op, wire)), send, recv, count),
        Call::Broadcast { root } if root == rank => (Collective::Broadcast { root }, send, send, count),
        Call::Broadcast { root } => (Collective::Broadcast { root }, recv, recv, count),
        Call::AllGather => (Collective::AllGather, send, recv, count),
        Call::ReduceScatter(op) => (Collective::ReduceScatter(reduction(op, wire)), send, recv, count),
        Call::Barrier => (Collective::AllReduce(NcclReduce::Max), scratch, scratch, 1),
    };
    Launch { call, send, recv, count }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_map_to_nccls_and_bool_to_or_and() {
        let ops = [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product];
        let floats = ops.map(|o| reduction(o, Wire::F32));
        assert_eq!(floats, [NcclReduce::Sum, NcclReduce::Avg, NcclReduce::Max, NcclReduce::Min, NcclReduce::Prod]);
        let ints = ops.map(|o| reduction(o, Wire::I64));
        assert_eq!(ints, floats);
        let bools = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product].map(|o| reduction(o, Wire::Bool));
        assert_eq!(bools, [NcclReduce::Max, NcclReduce::Max, NcclReduce::Min, NcclReduce::Min]);
    }

    #[test]
    fn broadcasts_run_in_place_and_barriers_on_the_scratch_byte() {
        let (send, recv, scratch) = (0x1000, 0x2000, 0x3000);
        let root = launch(Call::Broadcast { root: 1 }, Wire::F32, 1, send, recv, 4, scratch);
        assert_eq!(root, Launch { call: Collective::Broadcast { root: 1 }, send, recv: send, count: 4 });
        let other = launch(Call::Broadcast { root: 1 }, Wire::F32, 0, 0, recv, 4, scratch);
        assert_eq!(other, Launch { call: Collective::Broadcast { root: 1 }, send: recv, recv, count: 4 });
        let barrier = launch(Call::Barrier, Wire::U8, 0, 0, 0, 0, scratch);
        assert_eq!(
            barrier,
            Launch { call: Collective::AllReduce(NcclReduce::Max), send: scratch, recv: scratch, count: 1 }
        );
        let rs = launch(Call::ReduceScatter(ReduceOp::Sum), Wire::Bool, 0, send, recv, 3, scratch);
        assert_eq!(rs, Launch { call: Collective::ReduceScatter(NcclReduce::Max), send, recv, count: 3 });
        let ag = launch(Call::AllGather, Wire::I32, 0, send, recv, 3, scratch);
        assert_eq!((ag.call, ag.send, ag.recv, ag.count), (Collective::AllGather, send, recv, 3));
    }
}
