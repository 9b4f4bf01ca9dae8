//! Indexing by tensors against PyTorch: the cases in `tests/fixtures/index.txt` (made by
//! `scripts/make_fixtures.py`) cover `index_select`, `gather`, `scatter` (tensor and scalar
//! sources), `scatter_add`, `index_fill`, `masked_select`, `nonzero`, `one_hot`, advanced
//! indexing (`index`) and `index_put` (with and without `accumulate`) on every dtype, with
//! special values (NaN, infinities, -0.0), transposed, narrowed, expanded and selected data and
//! index tensors, 0-dim and zero-size inputs, and the errors PyTorch raises.
//!
//! Plain writes never hit one element twice (PyTorch leaves the winner unspecified). Advanced
//! indexing's `entries` attribute lists the index list, `t` an index tensor (the next argument)
//! and `-` a whole dim (`x[i, :, j]` is `t - t`).

mod common;

use common::{assert_covers, load, outcome, run_case, run_fixture, Arg, Case, Outcome};
use kiln::Tensor;

const OPS: &[&str] = &[
    "index_select",
    "gather",
    "scatter",
    "scatter_add",
    "index_fill",
    "masked_select",
    "nonzero",
    "one_hot",
    "index",
    "index_put",
];

/// The index list of an `index` or `index_put` case: `Some(tensor)` for each `t`, `None` for `-`.
fn entries<'a>(case: &Case, tensors: &'a [Arg]) -> Vec<Option<&'a Tensor>> {
    let mut next = tensors.iter().map(Arg::tensor);
    let list = case.attr("entries").unwrap_or_else(|| panic!("{}: no entries", case.name));
    let out = list
        .split_whitespace()
        .map(|e| match e {
            "t" => Some(next.next().expect("an index tensor for each `t`")),
            "-" => None,
            other => panic!("{}: bad entry {other:?}", case.name),
        })
        .collect();
    assert!(next.next().is_none(), "{}: more index tensors than entries", case.name);
    out
}

fn index_op(case: &Case, args: &[Arg]) -> Outcome {
    let x = args[0].tensor();
    let dim = || case.attr_as::<i64>("dim");
    let r = match case.op.as_str() {
        "index_select" => x.try_index_select(dim(), args[1].tensor()),
        "gather" => x.try_gather(dim(), args[1].tensor()),
        "scatter" => match &args[2] {
            Arg::Tensor(src) => x.try_scatter(dim(), args[1].tensor(), src),
            Arg::Scalar(v) => x.try_scatter_value(dim(), args[1].tensor(), *v),
        },
        "scatter_add" => x.try_scatter_add(dim(), args[1].tensor(), args[2].tensor()),
        "index_fill" => x.try_index_fill(dim(), args[1].tensor(), args[2].scalar()),
        "masked_select" => x.try_masked_select(args[1].tensor()),
        "nonzero" => x.try_nonzero(),
        "one_hot" => x.try_one_hot(case.attr_as("num_classes")),
        "index" => x.try_index(&entries(case, &args[1..])),
        "index_put" => {
            let (values, indices) = args[1..].split_last().expect("values");
            x.try_index_put(&entries(case, indices), values.tensor(), case.attr_flag("accumulate"))
        }
        _ => return None,
    };
    outcome(r.map(|t| vec![t]))
}

#[test]
fn indexing_matches_pytorch() {
    let cases = run_fixture("index.txt", index_op);
    assert_covers(&cases, OPS);
}

/// The in-place forms (`scatter_`, `scatter_value_`, `scatter_add_`, `index_fill_`,
/// `index_put_`) write PyTorch's out-of-place result into the argument itself, through its view
/// (transposed data is written through the transpose), and fail where PyTorch fails.
fn in_place(case: &Case, args: &[Arg]) -> Outcome {
    let x = args[0].tensor();
    let dim = || case.attr_as::<i64>("dim");
    let r = match case.op.as_str() {
        "scatter" => match &args[2] {
            Arg::Tensor(src) => x.try_scatter_(dim(), args[1].tensor(), src).map(|_| ()),
            Arg::Scalar(v) => x.try_scatter_value_(dim(), args[1].tensor(), *v).map(|_| ()),
        },
        "scatter_add" => x.try_scatter_add_(dim(), args[1].tensor(), args[2].tensor()).map(|_| ()),
        "index_fill" => x.try_index_fill_(dim(), args[1].tensor(), args[2].scalar()).map(|_| ()),
        "index_put" => {
            let (values, indices) = args[1..].split_last().expect("values");
            x.try_index_put_(&entries(case, indices), values.tensor(), case.attr_flag("accumulate")).map(|_| ())
        }
        _ => return None,
    };
    outcome(r.map(|()| vec![x.clone()]))
}

#[test]
fn in_place_forms_match_pytorch() {
    let cases: Vec<Case> = load("index.txt")
        .into_iter()
        .filter(|c| ["scatter", "scatter_add", "index_fill", "index_put"].contains(&c.op.as_str()))
        .collect();
    assert!(cases.len() >= 100, "only {} cases", cases.len());
    let failures: Vec<String> =
        cases.iter().filter_map(|c| run_case(c, &in_place).err().map(|e| format!("{}: {e}", c.name))).collect();
    assert!(
        failures.is_empty(),
        "{} of {} in-place cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Every error names the op and the caller's line.
#[test]
fn errors_name_the_op_and_the_caller() {
    let n = common::assert_errors_named("index.txt", file!(), index_op, |c| c.op.clone());
    assert!(n >= 25, "only {n} error cases");
}
