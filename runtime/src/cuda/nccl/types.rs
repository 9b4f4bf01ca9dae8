//! What crosses into NCCL: the unique id as bytes, the reductions, the element types.

use super::super::error::{CudaError, CudaErrorKind, Result};
use crate::dtype::DType;
use cudarc::nccl::sys;

/// The bytes of an `ncclUniqueId`.
pub const UNIQUE_ID_BYTES: usize = 128;

/// An `ncclUniqueId`: made by one rank ([`UniqueId::new`]), sent to every other rank as bytes
/// ([`UniqueId::as_bytes`], [`UniqueId::from_bytes`]), and given to every rank's
/// [`NcclComm::init`](super::NcclComm::init).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId(pub(crate) sys::ncclUniqueId);

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({:02x?}…)", &self.as_bytes()[..8])
    }
}

impl UniqueId {
    /// A new id from NCCL (`ncclGetUniqueId`: it names this host and a port rank 0's NCCL
    /// listens on). Errors: no libnccl.
    pub fn new(op: &'static str) -> Result<UniqueId> {
        let nccl = super::library::api(op)?;
        let mut id = sys::ncclUniqueId { internal: [0; UNIQUE_ID_BYTES] };
        // SAFETY: a loaded libnccl's function; `id` is a valid out-parameter.
        match unsafe { (nccl.get_unique_id)(&mut id) } {
            sys::ncclResult_t::ncclSuccess => Ok(UniqueId(id)),
            r => Err(CudaError::new(
                op,
                CudaErrorKind::Driver,
                format!("ncclGetUniqueId failed: {}", super::comm::result_name(r)),
            )),
        }
    }

    /// The id's 128 bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> [u8; UNIQUE_ID_BYTES] {
        self.0.internal.map(|c| c as u8)
    }

    /// The id another rank sent as [`UniqueId::as_bytes`]; an error unless there are exactly
    /// 128 bytes.
    pub fn from_bytes(op: &'static str, bytes: &[u8]) -> Result<UniqueId> {
        let bytes: [u8; UNIQUE_ID_BYTES] = bytes.try_into().map_err(|_| {
            CudaError::new(
                op,
                CudaErrorKind::InvalidArgument,
                format!("an NCCL unique id has {UNIQUE_ID_BYTES} bytes, got {}", bytes.len()),
            )
        })?;
        Ok(UniqueId(sys::ncclUniqueId { internal: bytes.map(|b| b as std::ffi::c_char) }))
    }
}

/// How a reducing collective combines the ranks' elements (NCCL's `ncclRedOp_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NcclReduce {
    /// Element-wise sum.
    Sum,
    /// Element-wise product.
    Prod,
    /// Element-wise maximum.
    Max,
    /// Element-wise minimum.
    Min,
    /// The sum divided by the number of ranks (NCCL 2.10+).
    Avg,
}

/// NCCL's reduction for `op`.
pub(crate) fn red_op(op: NcclReduce) -> sys::ncclRedOp_t {
    match op {
        NcclReduce::Sum => sys::ncclRedOp_t::ncclSum,
        NcclReduce::Prod => sys::ncclRedOp_t::ncclProd,
        NcclReduce::Max => sys::ncclRedOp_t::ncclMax,
        NcclReduce::Min => sys::ncclRedOp_t::ncclMin,
        NcclReduce::Avg => sys::ncclRedOp_t::ncclAvg,
    }
}

/// NCCL's element type for `dtype`. Every kiln dtype has one; Bool travels as `ncclUint8`
/// (its bytes are 0 or 1), so a caller reducing Bool picks Max/Min for or/and.
pub(crate) fn data_type(dtype: DType) -> sys::ncclDataType_t {
    match dtype {
        DType::Bool | DType::U8 => sys::ncclDataType_t::ncclUint8,
        DType::I32 => sys::ncclDataType_t::ncclInt32,
        DType::I64 => sys::ncclDataType_t::ncclInt64,
        DType::F16 => sys::ncclDataType_t::ncclFloat16,
        DType::BF16 => sys::ncclDataType_t::ncclBfloat16,
        DType::F32 => sys::ncclDataType_t::ncclFloat32,
        DType::F64 => sys::ncclDataType_t::ncclFloat64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ids_round_trip_through_bytes() {
        let bytes: Vec<u8> = (0..UNIQUE_ID_BYTES).map(|i| (i * 7 + 200) as u8).collect();
        let id = UniqueId::from_bytes("test", &bytes).unwrap();
        assert_eq!(id.as_bytes().to_vec(), bytes);
        let e = UniqueId::from_bytes("test", &bytes[..127]).unwrap_err();
        assert!(e.message.contains("128 bytes, got 127"), "{e}");
    }

    #[test]
    fn dtypes_and_reductions_map_to_nccls_abi_numbers() {
        // The numbers of nccl.h's ncclDataType_t / ncclRedOp_t, which the loaded library reads.
        let want = [
            (DType::Bool, 1),
            (DType::U8, 1),
            (DType::I32, 2),
            (DType::I64, 4),
            (DType::F16, 6),
            (DType::F32, 7),
            (DType::F64, 8),
            (DType::BF16, 9),
        ];
        assert_eq!(want.len(), DType::ALL.len());
        for (dtype, number) in want {
            assert_eq!(data_type(dtype) as u32, number, "{dtype}");
        }
        let ops = [NcclReduce::Sum, NcclReduce::Prod, NcclReduce::Max, NcclReduce::Min, NcclReduce::Avg]
            .map(|o| red_op(o) as u32);
        assert_eq!(ops, [0, 1, 2, 3, 4]);
    }
}
