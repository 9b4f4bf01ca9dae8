//! The reduction table: one row per op that folds many values into one (`sum`, `prod`, `max`,
//! `min`). The enum, `ALL`, names, the `Tensor` methods (over every element and over dims) and
//! their grad_fn names are generated from [`reduce_op_table!`](crate::reduce_op_table); the
//! identity and the fold step are written once here ([`ReduceOp::identity`],
//! [`ReduceOp::step`]) and are the definition the eager kernels and both code generators are
//! tested against. What differs per op in a way a row cannot say (the eager kernel, the
//! backward rule, the Cranelift and CUDA C folds) is an exhaustive `match`, so a new row does
//! not compile until each is written.
//!
//! `mean`, `var`, `std` and `logsumexp` are not rows: they are sums with a different epilogue.

/// The table of reductions, handed to the macro `$then`, one row per op:
///
/// `Variant "torch_name" [all try_all "GradFnAll"] [dims try_dims keep try_keep "dims_name" "GradFnDims"] "what" "note";`
///
/// - `[all try_all "GradFnAll"]`: the `Tensor` methods reducing every element (`x.sum()`) and
///   the grad_fn they record;
/// - `[dims try_dims keep try_keep "dims_name" "GradFnDims"]`: the methods reducing over dims
///   (`x.sum(dim)` is `x.sum_dim(dim)`, `x.sum(dim, keepdim=True)` is `x.sum_dim_keepdim(dim)`,
///   `x.amax(dim)` keeps its name), the name its errors use, and the grad_fn they record;
/// - `"what"` and `"note"`: what the op computes and its dtype and empty-input rules, for the
///   documentation.
#[macro_export]
macro_rules! reduce_op_table {
    ($then:ident $(, $($args:tt)*)?) => {
        $then! {
            $(($($args)*))?
            Sum  "sum"  [sum  try_sum  "SumBackward0"]  [sum_dim  try_sum_dim  sum_dim_keepdim  try_sum_dim_keepdim  "sum"  "SumBackward1"]
                "sum" "integer and bool inputs give i64; an empty reduction gives 0";
            Prod "prod" [prod try_prod "ProdBackward0"] [prod_dim try_prod_dim prod_dim_keepdim try_prod_dim_keepdim "prod" "ProdBackward1"]
                "product" "integer and bool inputs give i64; an empty reduction gives 1";
            Max  "max"  [max  try_max  "MaxBackward1"]  [amax     try_amax     amax_keepdim     try_amax_keepdim     "amax" "AmaxBackward0"]
                "largest value" "the dtype is kept and NaN wins; an empty reduction is an error";
            Min  "min"  [min  try_min  "MinBackward1"]  [amin     try_amin     amin_keepdim     try_amin_keepdim     "amin" "AminBackward0"]
                "smallest value" "the dtype is kept and NaN wins; an empty reduction is an error";
        }
    };
}

/// Defines [`ReduceOp`] from the table.
macro_rules! define_reduce_op {
    ($($v:ident $name:literal [$($all:tt)*] [$($dims:tt)*] $what:literal $note:literal;)*) => {
        /// Reductions over one or more dims (the rows of [`reduce_op_table!`](crate::reduce_op_table)).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ReduceOp {
            $(#[doc = concat!("The ", $what, "; ", $note, ".")] $v,)*
        }

        impl ReduceOp {
            /// Every row of the table, in table order.
            pub const ALL: &'static [ReduceOp] = &[$(ReduceOp::$v),*];

            /// The op's name as PyTorch spells it (of the reduction over every element).
            pub fn name(self) -> &'static str {
                match self {
                    $(ReduceOp::$v => $name,)*
                }
            }
        }
    };
}

reduce_op_table!(define_reduce_op);

impl ReduceOp {
    /// The value a reduction of nothing starts from, for floating-point values: `step`
    /// from it leaves any value unchanged.
    pub fn identity(self) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
        }
    }

    /// The identity for integer values of the range `lo..=hi` (the dtype's): max starts from
    /// `lo`, min from `hi`.
    pub fn int_identity(self, lo: i64, hi: i64) -> i64 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => lo,
            ReduceOp::Min => hi,
        }
    }

    /// One fold step, `acc ⊕ x`: max and min take `x` when it is larger (smaller) or NaN, so
    /// a NaN, once in, stays (PyTorch's rule).
    #[inline]
    pub fn step(self, acc: f64, x: f64) -> f64 {
        match self {
            ReduceOp::Sum => acc + x,
            ReduceOp::Prod => acc * x,
            ReduceOp::Max => {
                if x > acc || x.is_nan() {
                    x
                } else {
                    acc
                }
            }
            ReduceOp::Min => {
                if x < acc || x.is_nan() {
                    x
                } else {
                    acc
                }
            }
        }
    }

    /// True for the ops with no value over zero elements (max, min), which are an error there.
    pub fn needs_elements(self) -> bool {
        self.identity().is_infinite()
    }
}

#[cfg(test)]
mod tests {
    use super::ReduceOp;

    #[test]
    fn identity_is_neutral_and_nan_wins() {
        for &op in ReduceOp::ALL {
            for x in [-3.5, 0.0, 2.0, f64::INFINITY] {
                assert_eq!(op.step(op.identity(), x), x, "{op:?}");
            }
            let nan_in = [1.0, f64::NAN, 5.0, -9.0].iter().fold(op.identity(), |a, &x| op.step(a, x));
            assert!(nan_in.is_nan(), "{op:?}");
            assert_eq!(op.int_identity(-8, 7), op.int_identity(-8, 7).clamp(-8, 7));
        }
        assert_eq!(ReduceOp::ALL.iter().filter(|op| op.needs_elements()).count(), 2);
    }
}
