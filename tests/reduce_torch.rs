//! Reductions, cumsum, softmax and log_softmax against PyTorch: the cases in
//! `tests/fixtures/reduce.txt` (made by `scripts/make_fixtures.py`) cover every dtype, reductions
//! over all elements, one dim, several dims (in any order) and `dims = []`, with and without
//! `keepdim`; contiguous, transposed, narrowed, expanded, permuted, 0-dim, zero-size and large
//! (parallel) inputs; NaN, infinities, integer wrapping and the errors PyTorch raises.
//!
//! A case's attributes are PyTorch's arguments: `dims` (a list: `x.sum(dims, keepdim=…)`), `dim`
//! (one dim; without it `max`, `prod`, `argmax`, ... reduce every element), `keepdim`,
//! `correction` (var, std) and `values_only` (max/min along a dim with tied extremes, where
//! PyTorch's index is unspecified: only the values are compared).

mod common;

use common::{assert_covers, outcome, run_fixture, Arg, Case, Outcome};
use kiln::Tensor;

/// The ops outside the reduction table (`kiln_runtime::reduce_op_table!`).
const OTHER_OPS: &[&str] = &[
    "mean",
    "max",
    "min",
    "argmax",
    "argmin",
    "all",
    "any",
    "var",
    "std",
    "logsumexp",
    "cumsum",
    "softmax",
    "log_softmax",
];

/// var (`SQRT` false) or std over every element with `correction`, or over `dims`.
fn var_std<const SQRT: bool>(
    x: &Tensor,
    dims: Option<Vec<i64>>,
    correction: i64,
    keepdim: bool,
) -> kiln::Result<Tensor> {
    match (dims, correction, keepdim, SQRT) {
        (None, 1, _, false) => x.try_var(),
        (None, 1, _, true) => x.try_std(),
        (Some(d), 1, false, false) => x.try_var_dim(d),
        (Some(d), 1, true, false) => x.try_var_dim_keepdim(d),
        (Some(d), 1, false, true) => x.try_std_dim(d),
        (Some(d), 1, true, true) => x.try_std_dim_keepdim(d),
        (dims, _, _, false) => x.try_var_correction(dims.unwrap_or_default(), correction, keepdim),
        (dims, _, _, true) => x.try_std_correction(dims.unwrap_or_default(), correction, keepdim),
    }
}

/// max_dim / min_dim's outputs: values and indices, or the values alone for `values_only`.
fn values_indices(case: &Case, r: kiln::Result<(Tensor, Tensor)>) -> kiln::Result<Vec<Tensor>> {
    r.map(|(v, i)| if case.attr_flag("values_only") { vec![v] } else { vec![v, i] })
}

/// Defines `table_reduction` and `TABLE_OPS` from the rows of the reduction table: each row's
/// method over every element, by its name, and over dims, by its dims name (`amax` for `max`).
macro_rules! by_table {
    ($($v:ident $name:literal [$all:ident $try_all:ident $g:literal]
        [$dims:ident $try_dims:ident $keep:ident $try_keep:ident $dims_name:literal $gd:literal] $what:literal $note:literal;)*) => {
        /// The table's reduction `op` of `x` (over `dims`, or every element), if `op` is a row's.
        fn table_reduction(op: &str, x: &Tensor, dims: Option<Vec<i64>>, keepdim: bool) -> Option<kiln::Result<Tensor>> {
            match (op, dims) {
                $(($name, None) => Some(x.$try_all()),)*
                $(($dims_name, Some(d)) => Some(if keepdim { x.$try_keep(d) } else { x.$try_dims(d) }),)*
                _ => None,
            }
        }

        /// The names of every row's two forms.
        const TABLE_OPS: &[&str] = &[$($name, $dims_name),*];
    };
}

kiln_runtime::reduce_op_table!(by_table);

fn reduce(case: &Case, args: &[Arg]) -> Outcome {
    let x = args[0].tensor();
    let keepdim = case.attr_flag("keepdim");
    let (dims, dim) = (case.attr_opt_i64s("dims"), case.attr_opt::<i64>("dim"));
    let one = |r: kiln::Result<Tensor>| outcome(r.map(|t| vec![t]));
    let op = case.op.as_str();
    if let Some(r) = table_reduction(op, x, dims.clone().or(dim.map(|d| vec![d])), keepdim) {
        return one(r);
    }
    match (op, dims, dim) {
        ("mean", None, None) => one(x.try_mean()),
        ("mean", Some(d), None) => one(if keepdim { x.try_mean_dim_keepdim(d) } else { x.try_mean_dim(d) }),
        ("max", None, Some(d)) => {
            outcome(values_indices(case, if keepdim { x.try_max_dim_keepdim(d) } else { x.try_max_dim(d) }))
        }
        ("min", None, Some(d)) => {
            outcome(values_indices(case, if keepdim { x.try_min_dim_keepdim(d) } else { x.try_min_dim(d) }))
        }
        ("argmax", None, None) => one(x.try_argmax()),
        ("argmax", None, Some(d)) => one(if keepdim { x.try_argmax_dim_keepdim(d) } else { x.try_argmax_dim(d) }),
        ("argmin", None, None) => one(x.try_argmin()),
        ("argmin", None, Some(d)) => one(if keepdim { x.try_argmin_dim_keepdim(d) } else { x.try_argmin_dim(d) }),
        ("all", None, None) => one(x.try_all()),
        ("all", Some(d), None) => one(if keepdim { x.try_all_dim_keepdim(d) } else { x.try_all_dim(d) }),
        ("any", None, None) => one(x.try_any()),
        ("any", Some(d), None) => one(if keepdim { x.try_any_dim_keepdim(d) } else { x.try_any_dim(d) }),
        ("var", dims, None) => one(var_std::<false>(x, dims, case.attr_as("correction"), keepdim)),
        ("std", dims, None) => one(var_std::<true>(x, dims, case.attr_as("correction"), keepdim)),
        ("logsumexp", Some(d), None) => one(if keepdim { x.try_logsumexp_keepdim(d) } else { x.try_logsumexp(d) }),
        ("cumsum", None, Some(d)) => one(x.try_cumsum(d)),
        ("softmax" | "log_softmax", None, Some(d)) if case.attr("dtype").is_some() => {
            let dtype = common::parse_dtype(case.attr("dtype").unwrap()).unwrap();
            one(if case.op == "softmax" { x.try_softmax_dtype(d, dtype) } else { x.try_log_softmax_dtype(d, dtype) })
        }
        ("softmax", None, Some(d)) => one(x.try_softmax(d)),
        ("log_softmax", None, Some(d)) => one(x.try_log_softmax(d)),
        _ => None,
    }
}

#[test]
fn reductions_match_pytorch() {
    let cases = run_fixture("reduce.txt", reduce);
    let ops: Vec<&str> = TABLE_OPS.iter().chain(OTHER_OPS).copied().collect();
    assert_covers(&cases, &ops);
}

/// The fixture has what it claims: errors, every dtype, views, NaN and zero-size cases, and
/// both index forms of max/min (values with indices, values alone).
#[test]
fn fixture_covers_the_variants() {
    let cases = common::load("reduce.txt");
    let count = |f: &dyn Fn(&Case) -> bool| cases.iter().filter(|c| f(c)).count();
    assert!(count(&|c| matches!(c.expect, common::Expect::Error(_))) >= 50);
    for view in ["t", "narrow", "expand", "permute"] {
        assert!(count(&|c| c.has_view(view)) >= 20, "{view}");
    }
    for dtype in ["f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool"] {
        assert!(count(&|c| c.name.contains(&format!("/{dtype}/"))) >= 50, "{dtype}");
    }
    assert!(count(&|c| c.op == "max" && c.attr("dim").is_some() && !c.attr_flag("values_only")) >= 20);
    assert!(count(&|c| c.attr_flag("values_only")) >= 5);
    assert!(count(&|c| c.name.contains("/nan/")) >= 8);
    assert!(count(&|c| c.name.contains("empty")) >= 100);
}

/// Every error names the op and the caller's line.
#[test]
fn errors_name_the_op_and_the_caller() {
    let n = common::assert_errors_named("reduce.txt", file!(), reduce, |c| c.op.clone());
    assert!(n >= 50, "only {n} error cases");
}
