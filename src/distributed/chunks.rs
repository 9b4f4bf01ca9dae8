//! Collectives of any size on a library whose counts are 32-bit (MPI's `int`): a collective
//! of more than the limit is split into pieces on contiguous element ranges, each within it.
//! Every rank computes the same pieces in the same order, so the library matches them.

use super::transport::Call;

/// The most elements one MPI call may name (`INT_MAX`).
pub(crate) const MPI_MAX_COUNT: usize = i32::MAX as usize;

/// The variable that lowers the limit (to test the splitting on small tensors).
pub(crate) const MAX_CHUNK_VAR: &str = "KILN_DIST_MAX_CHUNK";

/// One piece of a split collective. Offsets and lengths count elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// All-reduce `len` elements at `at` of the send buffer into `at` of the receive buffer.
    AllReduce { at: usize, len: usize },
    /// Broadcast `len` elements at `at` of `root`'s buffer into `at` of every other rank's.
    Broadcast { root: usize, at: usize, len: usize },
    /// Reduce `len` elements at `send_at` of every rank's send buffer into `recv_at` of `root`'s
    /// receive buffer.
    Reduce { root: usize, send_at: usize, recv_at: usize, len: usize },
}

/// The pieces of `call` on `count` elements per rank among `world_size` ranks, each at most
/// `max` elements. The buffers are the ones [`Call`] describes, except for
/// [`Call::AllGather`]: its pieces broadcast each rank's block *within the receive buffer*, so
/// the caller first copies its own send buffer into its block (`rank * count`).
pub(crate) fn split(call: Call, count: usize, world_size: usize, max: usize) -> Vec<Piece> {
    let ranges = move || (0..count).step_by(max.max(1)).map(move |at| (at, max.max(1).min(count - at)));
    match call {
        Call::AllReduce(_) => ranges().map(|(at, len)| Piece::AllReduce { at, len }).collect(),
        Call::Broadcast { root } => ranges().map(|(at, len)| Piece::Broadcast { root, at, len }).collect(),
        Call::AllGather => (0..world_size)
            .flat_map(|root| ranges().map(move |(at, len)| Piece::Broadcast { root, at: root * count + at, len }))
            .collect(),
        Call::ReduceScatter(_) => (0..world_size)
            .flat_map(|root| {
                ranges().map(move |(at, len)| Piece::Reduce { root, send_at: root * count + at, recv_at: at, len })
            })
            .collect(),
        Call::Barrier => Vec::new(),
    }
}

/// The limit: [`MAX_CHUNK_VAR`] when set (a positive number, at most [`MPI_MAX_COUNT`]), else
/// [`MPI_MAX_COUNT`]. `Err` names a bad value.
pub(crate) fn max_chunk(var: Option<String>) -> Result<usize, String> {
    let Some(v) = var else { return Ok(MPI_MAX_COUNT) };
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=MPI_MAX_COUNT).contains(&n) => Ok(n),
        _ => Err(format!("{MAX_CHUNK_VAR}={v:?} is not a whole number from 1 to {MPI_MAX_COUNT}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::ReduceOp;

    #[test]
    fn pieces_cover_every_element_once_within_the_limit() {
        use Piece::*;
        assert_eq!(
            split(Call::AllReduce(ReduceOp::Sum), 7, 2, 3),
            vec![AllReduce { at: 0, len: 3 }, AllReduce { at: 3, len: 3 }, AllReduce { at: 6, len: 1 }]
        );
        assert_eq!(split(Call::Broadcast { root: 1 }, 4, 2, 4), vec![Broadcast { root: 1, at: 0, len: 4 }]);
        assert_eq!(
            split(Call::AllGather, 5, 2, 3),
            vec![
                Broadcast { root: 0, at: 0, len: 3 },
                Broadcast { root: 0, at: 3, len: 2 },
                Broadcast { root: 1, at: 5, len: 3 },
                Broadcast { root: 1, at: 8, len: 2 }
            ]
        );
        assert_eq!(
            split(Call::ReduceScatter(ReduceOp::Max), 4, 2, 3),
            vec![
                Reduce { root: 0, send_at: 0, recv_at: 0, len: 3 },
                Reduce { root: 0, send_at: 3, recv_at: 3, len: 1 },
                Reduce { root: 1, send_at: 4, recv_at: 0, len: 3 },
                Reduce { root: 1, send_at: 7, recv_at: 3, len: 1 },
            ]
        );
        assert!(split(Call::AllReduce(ReduceOp::Sum), 0, 2, 3).is_empty() && split(Call::Barrier, 0, 2, 3).is_empty());
        // 2^31 + 5 elements at the real limit: two pieces, the second of 6.
        let big = split(Call::AllReduce(ReduceOp::Sum), MPI_MAX_COUNT + 6, 2, MPI_MAX_COUNT);
        assert_eq!(big, vec![AllReduce { at: 0, len: MPI_MAX_COUNT }, AllReduce { at: MPI_MAX_COUNT, len: 6 }]);
    }

    #[test]
    fn the_limit_comes_from_the_variable() {
        assert_eq!(max_chunk(None), Ok(MPI_MAX_COUNT));
        assert_eq!(max_chunk(Some(" 3".into())), Ok(3));
        for bad in ["0", "-1", "x", "2147483648"] {
            let e = max_chunk(Some(bad.into())).unwrap_err();
            assert!(e.contains("KILN_DIST_MAX_CHUNK") && e.contains(bad), "{e}");
        }
    }
}
