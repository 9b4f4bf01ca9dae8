//! Matrix products against PyTorch: the cases in `tests/fixtures/matmul.txt` (made by
//! `scripts/make_fixtures.py`) cover `torch.matmul`'s shape rules (1-D·1-D, 2-D·1-D, 1-D·2-D,
//! batched with broadcasting, zero-size dims), `mm`, `bmm`, `mv`, `dot` and `outer` (with its
//! type promotion) in f32, f64, f16, bf16 and the integer dtypes (which wrap); transposed,
//! narrowed, expanded (stride-0), permuted and selected operands; products large enough for the
//! blocked and parallel paths; NaN and infinities; and the errors PyTorch raises (shapes, dims,
//! dtypes, bool operands).
//!
//! Float tolerances are per case (kiln and PyTorch add the products in different orders; f16 and
//! bf16 round an f32 sum once): a few units in the last place of each format.

mod common;

use common::{assert_covers, outcome, run_fixture, Arg, Case, Expect, Outcome};

const OPS: &[&str] = &["matmul", "mm", "bmm", "mv", "dot", "outer"];

fn product(case: &Case, args: &[Arg]) -> Outcome {
    let (a, b) = (args[0].tensor(), args[1].tensor());
    let r = match case.op.as_str() {
        "matmul" => a.try_matmul(b),
        "mm" => a.try_mm(b),
        "bmm" => a.try_bmm(b),
        "mv" => a.try_mv(b),
        "dot" => a.try_dot(b),
        "outer" => a.try_outer(b),
        _ => return None,
    };
    outcome(r.map(|t| vec![t]))
}

#[test]
fn products_match_pytorch() {
    let cases = run_fixture("matmul.txt", product);
    assert_covers(&cases, OPS);
}

/// `a.matmul(b)` gives the strict forms' results wherever they succeed (same values, bit for
/// bit: one code path).
#[test]
fn strict_forms_agree_with_matmul() {
    let mut checked = 0;
    for case in common::load("matmul.txt").iter().filter(|c| c.op != "matmul" && c.op != "outer") {
        let Expect::Outputs(_) = case.expect else { continue };
        let args = case.build_args();
        let (a, b) = (args[0].tensor(), args[1].tensor());
        let strict = product(case, &args).expect("mapped").expect("the fixture says it succeeds");
        assert!(common::same_values(&strict[0], &a.matmul(b)), "{}", case.name);
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} cases");
}

/// Every error names the op and the caller's line.
#[test]
fn errors_name_the_op_and_the_caller() {
    let n = common::assert_errors_named("matmul.txt", file!(), product, |c| c.op.clone());
    assert!(n >= 15, "only {n} error cases");
}
