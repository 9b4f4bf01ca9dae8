//! Gradient buckets: parameters grouped (in reverse registration order, as gradients tend to
//! become ready during backward) into flat buffers of at most `cap_bytes` of one dtype, each
//! all-reduced as one message.

use crate::tensor::Tensor;
use kiln_runtime::DType;

/// One bucket: which parameters (indices into the reducer's list) and where each one's
/// gradient sits in the flat buffer.
#[derive(Debug)]
pub(crate) struct Bucket {
    pub params: Vec<usize>,
    /// Element offset of each parameter's gradient in the flat buffer.
    pub offsets: Vec<usize>,
    /// Total elements.
    pub numel: usize,
    pub dtype: DType,
}

/// Groups `params` into buckets: walked from the last to the first, a bucket closes when the
/// next parameter would take it past `cap_bytes` or has another dtype (a parameter larger than
/// the cap gets a bucket of its own).
pub(crate) fn assign(params: &[Tensor], cap_bytes: usize) -> Vec<Bucket> {
    let mut buckets: Vec<Bucket> = Vec::new();
    for (i, p) in params.iter().enumerate().rev() {
        let bytes = p.numel() * p.element_size();
        let fits =
            buckets.last().is_some_and(|b| b.dtype == p.dtype() && (b.numel * p.element_size() + bytes) <= cap_bytes);
        if !fits {
            buckets.push(Bucket { params: Vec::new(), offsets: Vec::new(), numel: 0, dtype: p.dtype() });
        }
        let b = buckets.last_mut().expect("a bucket");
        b.params.push(i);
        b.offsets.push(b.numel);
        b.numel += p.numel();
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_in_reverse_up_to_the_cap() {
        let params = [
            Tensor::zeros([4]),
            Tensor::zeros([2]),
            Tensor::zeros([3]),
            Tensor::zeros([10]),
            Tensor::zeros([1]).to_dtype(DType::F64),
        ];
        let b = assign(&params, 24); // six f32s
        let got: Vec<(Vec<usize>, Vec<usize>, usize)> =
            b.iter().map(|b| (b.params.clone(), b.offsets.clone(), b.numel)).collect();
        assert_eq!(
            got,
            vec![(vec![4], vec![0], 1), (vec![3], vec![0], 10), (vec![2, 1], vec![0, 3], 5), (vec![0], vec![0], 4)]
        );
        assert_eq!(b[0].dtype, DType::F64);
    }
}
