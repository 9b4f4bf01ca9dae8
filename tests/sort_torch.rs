//! Sorting against PyTorch: the cases in `tests/fixtures/sort.txt` (made by
//! `scripts/make_fixtures.py`) cover `sort` (ascending, descending, stable), `argsort` and
//! `topk` (largest, smallest, sorted or not, k from 0 to the dim's size) on every dtype (topk:
//! all but bool, which PyTorch does not sort that way on the CPU), along every dim, with NaN,
//! infinities, tied values (0.0 and -0.0 tie), transposed, narrowed, expanded and permuted
//! inputs, 0-dim, zero-size and large (parallel) inputs, and the errors PyTorch raises.
//!
//! Where PyTorch's answer is not unique the fixture says how to compare: kiln's sort is always
//! stable, so cases with `stable 0` are either free of ties or `values_only`; `topk` with ties
//! compares `values_only`; `topk` with `sorted 0` (order unspecified) lists its result in input
//! order (by index), and kiln's result is put in that order before comparing.

mod common;

use common::{assert_covers, outcome, run_fixture, Arg, Case, Outcome};
use kiln::Tensor;

const OPS: &[&str] = &["sort", "argsort", "topk"];

/// `(values, indices)` along `dim` reordered by increasing index (input order).
fn by_index(values: Tensor, indices: Tensor, dim: i64) -> (Tensor, Tensor) {
    let order = indices.argsort(dim, false);
    (values.gather(dim, &order), indices.gather(dim, &order))
}

fn sort_op(case: &Case, args: &[Arg]) -> Outcome {
    let x = args[0].tensor();
    let dim = case.attr_as::<i64>("dim");
    let values_only = case.attr_flag("values_only");
    let pick = |(v, i): (Tensor, Tensor)| if values_only { vec![v] } else { vec![v, i] };
    let r = match case.op.as_str() {
        // kiln's sort is always stable; the fixture has `stable 0` only where it makes no difference.
        "sort" => x.try_sort(dim, case.attr_flag("descending")).map(pick),
        "argsort" => x.try_argsort(dim, case.attr_flag("descending")).map(|i| vec![i]),
        "topk" => {
            let sorted = case.attr_flag("sorted");
            x.try_topk(case.attr_as("k"), dim, case.attr_flag("largest"), sorted)
                .map(|(v, i)| if sorted { (v, i) } else { by_index(v, i, dim) })
                .map(pick)
        }
        _ => return None,
    };
    outcome(r)
}

#[test]
fn sorting_matches_pytorch() {
    let cases = run_fixture("sort.txt", sort_op);
    assert_covers(&cases, OPS);
}

/// The fixture compares indices wherever PyTorch's are unique, and has unsorted topk, unstable
/// sorts, ties, NaN and errors.
#[test]
fn fixture_covers_the_variants() {
    let cases = common::load("sort.txt");
    let count = |f: &dyn Fn(&Case) -> bool| cases.iter().filter(|c| f(c)).count();
    assert!(count(&|c| c.op == "topk" && !c.attr_flag("sorted") && !c.attr_flag("values_only")) >= 50);
    assert!(count(&|c| c.op == "sort" && c.attr("stable") == Some("0") && !c.attr_flag("values_only")) >= 10);
    assert!(count(&|c| c.op == "sort" && c.attr_flag("stable") && c.name.contains("specials")) >= 16);
    assert!(count(&|c| c.attr_flag("values_only")) >= 10);
    assert!(count(&|c| matches!(c.expect, common::Expect::Error(_))) >= 5);
    for view in ["t", "narrow", "expand", "permute"] {
        assert!(count(&|c| c.has_view(view)) >= 20, "{view}");
    }
}

/// Every error names the op (`argsort` too) and the caller's line.
#[test]
fn errors_name_the_op_and_the_caller() {
    let n = common::assert_errors_named("sort.txt", file!(), sort_op, |c: &Case| c.op.clone());
    assert!(n >= 5, "only {n} error cases");
}
