//! Device Philox: the CUDA C functions of `kiln_codegen::cuda::philox` give the CPU
//! generator's numbers (`kiln_runtime::cpu::philox`).
//!
//! Always (with a host C compiler, `cc`): the device functions' own text, with the CUDA words
//! defined away (`HOST_PRELUDE`), is compiled and run on the host for many (seed, offset,
//! index): uniform values (f32, f64, and the f32 compute value of f16 draws) equal the CPU's
//! bit for bit, f64 normal values too (the same libm), and f32 normal values are within the
//! stated 3-ulp bound (f32 transcendentals computed in double and rounded once, where the CPU
//! calls libm's `logf`/`cosf`/`sinf`), equal for at least 95% of elements; the integer groups
//! (`randint`/`random_`: ranges of 1, 2, non-powers of two, 2^32, and 64-bit ranges up to
//! 2^64 − 1) and Bernoulli groups (p = 0, 1, tiny, 1 − tiny, 0.3, 0.5) equal the CPU's exactly.
//! Without `cc` the tests print a skip line.
//!
//! With NVRTC: every eager random kernel (uniform and normal on 4 float dtypes, integers and
//! Bernoulli on all 8) and fused kernels with draws (dropout's mask, a normal draw added to an
//! input) compiled to CUBIN for sm_80 and sm_90.
//!
//! With a GPU: the eager kernels against the CPU fillers (uniform, integers and Bernoulli bit
//! for bit, normal within the bound) on every dtype they serve.

mod common;

use half::{bf16, f16};
use kiln_codegen::cuda::{emit_fused, emit_rand, philox_functions, rand_kernels, LoadedRand, RandKind, HOST_PRELUDE};
use kiln_codegen::ir::RandDist;
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelInput};
use kiln_runtime::cpu::philox::{self, bernoulli_threshold, integer_range, normal_params, uniform_params, Philox};
use kiln_runtime::cuda::{CudaBuffer, CudaErrorKind};
use kiln_runtime::op_kind::{BinaryOp, CmpOp};
use kiln_runtime::DType;
use std::fmt::Write;
use std::process::Command;

/// Draws the host run covers: seeds (0, small, 64-bit) × offsets (0, small, a group counter
/// past 2^32, one near the top).
fn draws() -> Vec<Philox> {
    let mut v = Vec::new();
    for seed in [0u64, 1, 42, 0x1234_5678_9abc_def0, u64::MAX] {
        for offset in [0u64, 4, 3996, (1 << 34) - 4, u64::MAX - 3] {
            v.push(Philox::new(seed, offset));
        }
    }
    v
}

/// Element indices the host run covers for every draw (group and lane boundaries, a group
/// counter past 2^32).
fn indices() -> Vec<u64> {
    let mut v: Vec<u64> = (0..40).collect();
    v.extend((0..8).map(|k| (1u64 << 32) + k));
    v.push((1 << 40) + 3);
    v
}

/// The C program: the device functions, then a `main` printing, per (draw, index), the bits
/// of seven element values, and per (draw, group) the bits of three group functions.
fn host_program(bulk: u64) -> String {
    let u32p = uniform_params::<f32>(-3.0, 2.5);
    let u16p = uniform_params::<f16>(-3.0, 2.5);
    let u64p = uniform_params::<f64>(-3.0, 2.5);
    let n32 = normal_params::<f32>(1.5, 0.25);
    let n64 = normal_params::<f64>(1.5, 0.25);
    let f = |v: f64| format!("fb(0x{:08x}u)", (v as f32).to_bits());
    let d = |v: f64| format!("db(0x{:016x}ULL)", v.to_bits());
    let list = |xs: Vec<String>| xs.join(", ");
    let draws = draws();
    let mut s = String::from(HOST_PRELUDE);
    s.push_str("#include <stdio.h>\n#include <string.h>\n");
    s.push_str(&philox_functions());
    s.push_str("static float fb(unsigned int b) { float f; memcpy(&f, &b, 4); return f; }\n");
    s.push_str("static double db(unsigned long long b) { double x; memcpy(&x, &b, 8); return x; }\n");
    s.push_str("static unsigned int bf(float f) { unsigned int b; memcpy(&b, &f, 4); return b; }\n");
    s.push_str("static unsigned long long bd(double x) { unsigned long long b; memcpy(&b, &x, 8); return b; }\n");
    let _ = writeln!(
        s,
        "static const unsigned long long seeds[] = {{{}}};",
        list(draws.iter().map(|p| format!("{}ULL", p.seed())).collect())
    );
    let _ = writeln!(
        s,
        "static const unsigned long long offsets[] = {{{}}};",
        list(draws.iter().map(|p| format!("{}ULL", p.offset())).collect())
    );
    let _ = writeln!(
        s,
        "static const unsigned long long idx[] = {{{}}};",
        list(indices().iter().map(|i| format!("{i}ULL")).collect())
    );
    s.push_str("int main(void) {\n");
    let _ = writeln!(
        s,
        "    const float lo32 = {}, span32 = {}, low32 = {}, high32 = {};",
        f(u32p[0]),
        f(u32p[1]),
        f(u32p[2]),
        f(u32p[3])
    );
    let _ = writeln!(s, "    const float lo16 = {}, span16 = {};", f(u16p[0]), f(u16p[1]));
    let _ = writeln!(
        s,
        "    const double lo64 = {}, span64 = {}, low64 = {}, high64 = {};",
        d(u64p[0]),
        d(u64p[1]),
        d(u64p[2]),
        d(u64p[3])
    );
    let _ = writeln!(
        s,
        "    const float mean32 = {}, std32 = {};\n    const double mean64 = {}, std64 = {};",
        f(n32[0]),
        f(n32[1]),
        d(n64[0]),
        d(n64[1])
    );
    let _ = writeln!(s, "    for (unsigned d = 0; d < {}; ++d) {{", draws.len());
    s.push_str(
        "        const unsigned long long se = seeds[d], of = offsets[d];
        for (unsigned k = 0; k < sizeof idx / sizeof idx[0]; ++k) {
            const unsigned long long i = idx[k];
            printf(\"E %u %llu %08x %08x %08x %016llx %08x %08x %016llx\\n\", d, i,
                bf(kiln_below_f32(kiln_uniform_at_f32(se, of, i, 24u, 0.0f, 1.0f), 0.0f, 1.0f)),
                bf(kiln_below_f32(kiln_uniform_at_f32(se, of, i, 24u, lo32, span32), low32, high32)),
                bf(kiln_uniform_at_f32(se, of, i, 11u, lo16, span16)),
                bd(kiln_below_f64(kiln_uniform_at_f64(se, of, i, 53u, lo64, span64), low64, high64)),
                bf(kiln_normal_at_f32(se, of, i, 0.0f, 1.0f)),
                bf(kiln_normal_at_f32(se, of, i, mean32, std32)),
                bd(kiln_normal_at_f64(se, of, i, mean64, std64)));
        }
        for (unsigned long long g = 0; g < 6; ++g) {
            float a[4], b[4];
            double c[4];
            kiln_uniform_group_f32(se, of, g, 24u, lo32, span32, a);
            kiln_normal_group_f32(se, of, g, mean32, std32, b);
            kiln_normal_group_f64(se, of, g, mean64, std64, c);
            for (int l = 0; l < 4; ++l) printf(\"G %u %llu %08x %08x %016llx\\n\", d, g * 4ULL + l, bf(a[l]), bf(b[l]), bd(c[l]));
        }
    }
",
    );
    let _ = writeln!(s, "    for (unsigned long long i = 0; i < {bulk}ULL; ++i) printf(\"B %llu %08x\\n\", i, bf(kiln_normal_at_f32(42ULL, 8ULL, i, 0.0f, 1.0f)));");
    s.push_str("    return 0;\n}\n");
    s
}

/// Compiles and runs `program` with the host C compiler in a folder of its own named after
/// `name` (tests run in parallel); `None` (after a printed skip line) when there is no `cc`.
fn run_c(name: &str, program: &str) -> Option<String> {
    if Command::new("cc").arg("--version").output().is_err() {
        println!("no host C compiler (cc), skipping the host run of the device functions");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("kiln_philox_{}_{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("philox.c"), dir.join("philox"));
    std::fs::write(&src, program).unwrap();
    let out = Command::new("cc")
        .args(["-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lm")
        .output()
        .unwrap();
    assert!(out.status.success(), "cc failed:\n{}\n{program}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success(), "the host program failed");
    let _ = std::fs::remove_dir_all(&dir);
    Some(String::from_utf8(run.stdout).unwrap())
}

/// The distance from `x` to the next f32 away from zero (the smallest subnormal at 0).
fn ulp32(x: f32) -> f64 {
    let a = x.abs();
    (f32::from_bits(a.to_bits() + 1) - a) as f64
}

/// The stated bound between a device f32 normal value and the CPU's (`want`, drawn with
/// `mean` and `std`): 3 ulp of `std·z` (an ulp in each of log, cos/sin and their product's
/// rounding) plus an ulp of the result (the final `mean + std·z` rounding).
fn normal_bound(want: f32, mean: f64, std: f64) -> f64 {
    let scaled = (want as f64 - mean).abs() as f32;
    3.0 * ulp32(scaled).max(ulp32(std as f32) * f32::EPSILON as f64) + ulp32(want)
}

/// Counts a device f32 normal value against the CPU's: panics past the bound, else returns
/// whether they are equal.
fn check_normal(what: &str, got: f32, want: f32, mean: f64, std: f64) -> bool {
    let diff = (got as f64 - want as f64).abs();
    assert!(
        diff <= normal_bound(want, mean, std),
        "{what}: device {got:e} ({:08x}), CPU {want:e} ({:08x})",
        got.to_bits(),
        want.to_bits()
    );
    got.to_bits() == want.to_bits()
}

fn hex32(s: &str) -> u32 {
    u32::from_str_radix(s, 16).unwrap()
}

fn hex64(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap()
}

#[test]
fn host_compiled_device_functions_give_the_cpu_generators_numbers() {
    let bulk = 40_000u64;
    let Some(out) = run_c("floats", &host_program(bulk)) else { return };
    let draws = draws();
    let u16p = uniform_params::<f16>(-3.0, 2.5);
    let (lo_t, hi_t) = (f16::from_f64(u16p[2]), f16::from_f64(u16p[3]));
    let (mut elements, mut normals, mut exact) = (0usize, 0usize, 0usize);
    for line in out.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "E" => {
                let (draw, i) = (&draws[w[1].parse::<usize>().unwrap()], w[2].parse::<u64>().unwrap());
                let at = format!("seed {} offset {} element {i}", draw.seed(), draw.offset());
                assert_eq!(
                    hex32(w[3]),
                    philox::uniform_at::<f32>(draw, i, 0.0, 1.0).to_bits(),
                    "uniform f32 [0, 1), {at}"
                );
                assert_eq!(
                    hex32(w[4]),
                    philox::uniform_at::<f32>(draw, i, -3.0, 2.5).to_bits(),
                    "uniform f32 [-3, 2.5), {at}"
                );
                // f16: the f32 compute value, rounded to f16 and kept below `high` as the kernel does.
                let v = f16::from_f32(f32::from_bits(hex32(w[5])));
                let v = if v >= hi_t && hi_t > lo_t { lo_t } else { v };
                assert_eq!(v.to_bits(), philox::uniform_at::<f16>(draw, i, -3.0, 2.5).to_bits(), "uniform f16, {at}");
                assert_eq!(hex64(w[6]), philox::uniform_at::<f64>(draw, i, -3.0, 2.5).to_bits(), "uniform f64, {at}");
                exact += check_normal(
                    &format!("normal f32, {at}"),
                    f32::from_bits(hex32(w[7])),
                    philox::normal_at::<f32>(draw, i, 0.0, 1.0),
                    0.0,
                    1.0,
                ) as usize;
                exact += check_normal(
                    &format!("normal f32 (1.5, 0.25), {at}"),
                    f32::from_bits(hex32(w[8])),
                    philox::normal_at::<f32>(draw, i, 1.5, 0.25),
                    1.5,
                    0.25,
                ) as usize;
                assert_eq!(
                    hex64(w[9]),
                    philox::normal_at::<f64>(draw, i, 1.5, 0.25).to_bits(),
                    "normal f64 (same libm), {at}"
                );
                elements += 1;
                normals += 2;
            }
            "G" => {
                // The group functions against the CPU's fillers over the draw's first 24 elements.
                let (draw, i) = (&draws[w[1].parse::<usize>().unwrap()], w[2].parse::<usize>().unwrap());
                let (mut a, mut b, mut c) = ([0f32; 24], [0f32; 24], [0f64; 24]);
                philox::uniform(&mut a, draw, -3.0, 2.5);
                philox::normal(&mut b, draw, 1.5, 0.25);
                philox::normal(&mut c, draw, 1.5, 0.25);
                let at = format!("seed {} offset {} element {i}", draw.seed(), draw.offset());
                assert_eq!(hex32(w[3]), a[i].to_bits(), "uniform group f32, {at}");
                exact += check_normal(&format!("normal group f32, {at}"), f32::from_bits(hex32(w[4])), b[i], 1.5, 0.25)
                    as usize;
                assert_eq!(hex64(w[5]), c[i].to_bits(), "normal group f64, {at}");
                normals += 1;
            }
            "B" => {
                let i = w[1].parse::<u64>().unwrap();
                let want = philox::normal_at::<f32>(&Philox::new(42, 8), i, 0.0, 1.0);
                exact +=
                    check_normal(&format!("normal f32 bulk, element {i}"), f32::from_bits(hex32(w[2])), want, 0.0, 1.0)
                        as usize;
                normals += 1;
            }
            other => panic!("unexpected line {other:?}"),
        }
    }
    assert_eq!(elements, draws.len() * indices().len());
    assert_eq!(normals, 2 * elements + draws.len() * 24 + bulk as usize);
    let share = exact as f64 / normals as f64;
    println!("{elements} elements x 4 uniform kinds bit for bit; f32 normal values equal to the CPU's: {exact} of {normals} ({:.2}%), the rest within the bound", 100.0 * share);
    assert!(share >= 0.95, "only {:.2}% of f32 normal values equal the CPU's", 100.0 * share);
}

/// The `[low, high)` ranges the integer checks cover: one value, two, small and large
/// non-powers of two, 2^32, i64 ranges past 2^63 and the widest one (2^64 − 1).
const RANGES: [(i64, i64); 9] = [
    (-1, 0),
    (0, 2),
    (-5, 5),
    (-3, 1_000_003),
    (0, 1 << 32),
    (i64::MIN / 2, i64::MAX / 2 + 12_345),
    (i64::MIN, 0x7fff_ffff_ffff_fff0),
    (i64::MIN, i64::MAX),
    (i64::MAX - 10, i64::MAX),
];

/// The Bernoulli probabilities the checks cover: the extremes, one word's worth, values near
/// them, and two ordinary ones.
const PROBS: [f64; 7] = [0.0, 1.0, 0.5, 0.3, 1.0 / 4_294_967_296.0, 1e-9, 1.0 - 1e-12];

/// Groups of every draw the integer and Bernoulli checks cover.
const GROUPS: u64 = 64;

/// The C program printing, per draw, range (or probability) and group, the four values of
/// `kiln_integer_group` (lines `I`) and `kiln_bernoulli_group` (lines `P`).
fn integer_program() -> String {
    let draws = draws();
    let list = |xs: Vec<String>| xs.join(", ");
    let mut s = String::from(HOST_PRELUDE);
    s.push_str("#include <stdio.h>\n#include <string.h>\n");
    s.push_str(&philox_functions());
    s.push_str("static double db(unsigned long long b) { double x; memcpy(&x, &b, 8); return x; }\n");
    let _ = writeln!(
        s,
        "static const unsigned long long seeds[] = {{{}}};",
        list(draws.iter().map(|p| format!("{}ULL", p.seed())).collect())
    );
    let _ = writeln!(
        s,
        "static const unsigned long long offsets[] = {{{}}};",
        list(draws.iter().map(|p| format!("{}ULL", p.offset())).collect())
    );
    let _ = writeln!(
        s,
        "static const unsigned long long lows[] = {{{}}};",
        list(RANGES.iter().map(|r| format!("{}ULL", r.0 as u64)).collect())
    );
    let _ = writeln!(
        s,
        "static const unsigned long long ranges[] = {{{}}};",
        list(RANGES.iter().map(|r| format!("{}ULL", integer_range(r.0, r.1))).collect())
    );
    let _ = writeln!(
        s,
        "static const unsigned long long thresholds[] = {{{}}};",
        list(PROBS.iter().map(|&p| format!("0x{:016x}ULL", bernoulli_threshold(p).to_bits())).collect())
    );
    s.push_str("int main(void) {\n    long long v[4];\n");
    let _ = writeln!(
        s,
        "    for (unsigned d = 0; d < {}; ++d) for (unsigned long long g = 0; g < {GROUPS}ULL; ++g) {{",
        draws.len()
    );
    let _ = writeln!(s, "        for (unsigned r = 0; r < {}; ++r) {{", RANGES.len());
    s.push_str("            kiln_integer_group(seeds[d], offsets[d], g, (long long)lows[r], ranges[r], v);\n");
    s.push_str(
        "            printf(\"I %u %u %llu %lld %lld %lld %lld\\n\", d, r, g, v[0], v[1], v[2], v[3]);\n        }\n",
    );
    let _ = writeln!(s, "        for (unsigned k = 0; k < {}; ++k) {{", PROBS.len());
    s.push_str("            kiln_bernoulli_group(seeds[d], offsets[d], g, db(thresholds[k]), v);\n");
    s.push_str("            printf(\"P %u %u %llu %lld %lld %lld %lld\\n\", d, k, g, v[0], v[1], v[2], v[3]);\n        }\n    }\n    return 0;\n}\n");
    s
}

#[test]
fn host_compiled_integer_and_bernoulli_functions_equal_the_cpus() {
    let Some(out) = run_c("integers", &integer_program()) else { return };
    let draws = draws();
    let n = (GROUPS * 4) as usize;
    // The CPU fillers' values of each (draw, range) and (draw, probability), group 0 first.
    let ints: Vec<Vec<Vec<i64>>> = draws
        .iter()
        .map(|d| {
            RANGES
                .iter()
                .map(|&(low, high)| {
                    let mut v = vec![0i64; n];
                    philox::integers(&mut v, d, low, integer_range(low, high));
                    v
                })
                .collect()
        })
        .collect();
    let bits: Vec<Vec<Vec<u8>>> = draws
        .iter()
        .map(|d| {
            PROBS
                .iter()
                .map(|&p| {
                    let mut v = vec![0u8; n];
                    philox::bernoulli(&mut v, d, p);
                    v
                })
                .collect()
        })
        .collect();
    let (mut int_groups, mut bernoulli_groups) = (0usize, 0usize);
    for line in out.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let (d, k, g) =
            (w[1].parse::<usize>().unwrap(), w[2].parse::<usize>().unwrap(), w[3].parse::<usize>().unwrap());
        let got: Vec<i64> = w[4..8].iter().map(|x| x.parse::<i64>().unwrap()).collect();
        let at = format!("seed {} offset {} group {g}", draws[d].seed(), draws[d].offset());
        match w[0] {
            "I" => {
                let (low, high) = RANGES[k];
                assert_eq!(got, ints[d][k][4 * g..4 * g + 4], "integers in [{low}, {high}), {at}");
                assert!(
                    got.iter().all(|&x| x >= low && x < high),
                    "integers in [{low}, {high}) left the range: {got:?}, {at}"
                );
                int_groups += 1;
            }
            "P" => {
                let want: Vec<i64> = bits[d][k][4 * g..4 * g + 4].iter().map(|&x| x as i64).collect();
                assert_eq!(got, want, "bernoulli p={}, {at}", PROBS[k]);
                bernoulli_groups += 1;
            }
            other => panic!("unexpected line {other:?}"),
        }
    }
    let groups = draws.len() * GROUPS as usize;
    assert_eq!((int_groups, bernoulli_groups), (groups * RANGES.len(), groups * PROBS.len()));
    // p = 0 never and p = 1 always gives 1; range 1 always gives `low`.
    assert!(bits.iter().all(|d| d[0].iter().all(|&x| x == 0) && d[1].iter().all(|&x| x == 1)));
    assert!(ints.iter().all(|d| d[0].iter().all(|&x| x == -1)));
    // The widest range reaches both halves of i64; p = 0.5 gives both values.
    assert!(ints.iter().flat_map(|d| &d[7]).any(|&x| x < 0) && ints.iter().flat_map(|d| &d[7]).any(|&x| x > 0));
    assert!(bits.iter().flat_map(|d| &d[2]).any(|&x| x == 0) && bits.iter().flat_map(|d| &d[2]).any(|&x| x == 1));
    println!("{} integer and {} Bernoulli values equal the CPU's", 4 * int_groups, 4 * bernoulli_groups);
}

/// An elementwise kernel of rank 2 over one f32/f64 input `x` with a draw's four scalars.
fn with_draw(d: DType, f: impl FnOnce(&mut Vec<Inst>) -> u32) -> ElementwiseKernel {
    let mut insts = Vec::new();
    let out = f(&mut insts);
    ElementwiseKernel {
        rank: 2,
        inputs: vec![KernelInput { dtype: d, inner: InnerStride::Unit }],
        scalars: 5,
        insts,
        outputs: vec![out],
    }
}

/// Pushes an instruction, returning its value.
fn push(insts: &mut Vec<Inst>, op: InstOp, dtype: DType) -> u32 {
    insts.push(Inst { op, dtype });
    (insts.len() - 1) as u32
}

/// Dropout as a captured step lowers it: `x · (rand >= p) / (1 - p)` with `p` scalar 4.
fn dropout(d: DType) -> ElementwiseKernel {
    with_draw(d, |k| {
        let x = push(k, InstOp::Load(0), d);
        let r = push(k, InstOp::Rand { dist: RandDist::Uniform, params: 0 }, d);
        let p = push(k, InstOp::Scalar(4), d);
        let keep = push(k, InstOp::Cmp(CmpOp::Ge, r, p), DType::Bool);
        let mask = push(k, InstOp::Cast(keep), d);
        let kept = push(k, InstOp::Binary(BinaryOp::Mul, x, mask), d);
        let one = push(k, InstOp::Const(1.0), d);
        let q = push(k, InstOp::Binary(BinaryOp::Sub, one, p), d);
        push(k, InstOp::Binary(BinaryOp::Div, kept, q), d)
    })
}

/// `x + randn`: a normal draw fused with its consumer.
fn noisy(d: DType) -> ElementwiseKernel {
    with_draw(d, |k| {
        let x = push(k, InstOp::Load(0), d);
        let z = push(k, InstOp::Rand { dist: RandDist::Normal, params: 0 }, d);
        push(k, InstOp::Binary(BinaryOp::Add, x, z), d)
    })
}

#[test]
fn kernels_call_the_shared_functions_with_the_cpu_parameters() {
    let k = emit_rand(RandKind::Uniform, DType::F16).unwrap();
    let s = &k.source;
    assert!(k.name.starts_with("kiln_rand_uniform_f16_"), "{}", k.name);
    // 11 random bits for f16, rounded to f16, then kept below `high` in f16.
    assert!(s.contains("kiln_uniform_group_f32(seed, offset, g, 11u, lo, span, c);"), "{s}");
    assert!(s.contains("const float v = kiln_below_f32(kiln_f16_to_f32(kiln_f32_to_f16(c[l])), low, high);"), "{s}");
    assert!(s.contains("out[g * 4ULL + l] = kiln_f32_to_f16(v);"), "{s}");
    let s = emit_rand(RandKind::Normal, DType::F64).unwrap().source;
    assert!(
        s.contains("kiln_normal_group_f64(seed, offset, g, mean, std, c);")
            && s.contains("out[g * 4ULL + l] = (double)(v);"),
        "{s}"
    );
    // No FMA contraction: every product and sum of the conversions is an explicit rounding.
    let f = philox_functions();
    assert!(f.contains("return __fadd_rn(lo, __fmul_rn(u, span));") && f.contains("__fmul_rn(6.2831855f, ub)"), "{f}");
    assert!(f.contains("(float)log((double)__fsub_rn(1.0f, ua))"), "{f}");
    // Integers and Bernoulli values: computed as long long, stored as the CPU converts them.
    let k = emit_rand(RandKind::Integers, DType::F16).unwrap();
    assert!(k.name.starts_with("kiln_rand_integers_f16_"), "{}", k.name);
    let s = &k.source;
    assert!(
        s.contains("const long long low = (long long)p0;") && s.contains("const unsigned long long range = p1;"),
        "{s}"
    );
    assert!(
        s.contains("kiln_integer_group(seed, offset, g, low, range, c);")
            && s.contains("out[g * 4ULL + l] = kiln_f64_to_f16((double)(v));"),
        "{s}"
    );
    let s = emit_rand(RandKind::Bernoulli, DType::Bool).unwrap().source;
    assert!(
        s.contains("kiln_bernoulli_group(seed, offset, g, threshold, c);")
            && s.contains("out[g * 4ULL + l] = (unsigned char)((v) != 0LL);"),
        "{s}"
    );
    assert!(f.contains("__umul64hi(w[l], range)"), "{f}");
    let e = emit_rand(RandKind::Normal, DType::I64).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    assert!(e.to_string().contains("floating-point dtype, not int64"), "{e}");
    // A fused draw reads its seed and offset from its four scalars and the element's index.
    let s = emit_fused(&dropout(DType::F32)).unwrap().source;
    assert!(s.contains("kiln_below_f32(kiln_uniform_at_f32(kiln_draw_word(s0, s1), kiln_draw_word(s2, s3), i, 24u, 0.0f, 1.0f), 0.0f, 1.0f)"), "{s}");
    let s = emit_fused(&noisy(DType::F64)).unwrap().source;
    assert!(s.contains("kiln_normal_at_f64(kiln_draw_word(s0, s1), kiln_draw_word(s2, s3), i, 0.0, 1.0)"), "{s}");
    assert_eq!(s.matches("void kiln_philox4x32_10(").count(), 1, "the functions are included once");
}

#[test]
fn random_kernels_compile_to_cubin() {
    let mut kernels: Vec<(String, String)> = rand_kernels().into_iter().map(|k| (k.name, k.source)).collect();
    assert_eq!(kernels.len(), 2 * 4 + 2 * 8);
    for d in [DType::F32, DType::F64] {
        for k in [dropout(d), noisy(d)] {
            let f = emit_fused(&k).unwrap();
            kernels.push((f.name, f.source));
        }
    }
    common::compile_each_to_cubin("random", &kernels);
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn eager_kernels_match_the_cpu_fillers_on_a_gpu() {
    let draw = Philox::new(0x5eed_1234_abcd, 4 * 1001);
    let n = 100_003; // several groups per thread in the grid-stride loop, a partial last group
    for kind in [RandKind::Uniform, RandKind::Normal] {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let loaded = LoadedRand::load(&emit_rand(kind, dtype).unwrap(), 0).unwrap();
            let mut out = CudaBuffer::alloc(0, n * dtype.size_in_bytes()).unwrap();
            let words = device_params(kind, dtype).map(f64::to_bits);
            loaded.run(&mut out, n, draw.seed(), draw.offset(), words).unwrap();
            let (got, want) = match dtype {
                DType::F32 => (
                    out.to_vec::<f32>().unwrap().iter().map(|&x| x as f64).collect::<Vec<_>>(),
                    cpu_fill::<f32>(kind, n, &draw),
                ),
                DType::F64 => (out.to_vec::<f64>().unwrap(), cpu_fill::<f64>(kind, n, &draw)),
                DType::F16 => {
                    (out.to_vec::<f16>().unwrap().iter().map(|x| x.to_f64()).collect(), cpu_fill::<f16>(kind, n, &draw))
                }
                _ => (
                    out.to_vec::<bf16>().unwrap().iter().map(|x| x.to_f64()).collect(),
                    cpu_fill::<bf16>(kind, n, &draw),
                ),
            };
            let mut equal = 0;
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                if kind == RandKind::Uniform {
                    assert_eq!(g.to_bits(), w.to_bits(), "{dtype} uniform element {i}");
                } else {
                    // f32 and 16-bit: the f32 bound (then at most one rounding step of the
                    // 16-bit dtype); f64: 4 ulp of the value (CUDA's double log, sin, cos).
                    let tol = match dtype {
                        DType::F64 => 4.0 * f64::EPSILON * w.abs().max(1e-300) + 2.0 * 0.25 * f64::EPSILON,
                        DType::F32 => normal_bound(w as f32, 1.5, 0.25),
                        DType::F16 => w.abs().max(6.1e-5) * 2f64.powi(-10),
                        _ => w.abs() * 2f64.powi(-7),
                    };
                    assert!((g - w).abs() <= tol, "{dtype} normal element {i}: device {g:e}, CPU {w:e}");
                    equal += (g == w) as usize;
                }
            }
            if kind == RandKind::Normal {
                assert!(equal as f64 >= 0.95 * n as f64, "{dtype}: {equal} of {n} normal values equal the CPU's");
            }
        }
    }
    let loaded = LoadedRand::load(&emit_rand(RandKind::Uniform, DType::F32).unwrap(), 0).unwrap();
    let mut small = CudaBuffer::alloc(0, 16).unwrap();
    let e = loaded.run(&mut small, 5, 1, 0, [0.0f64, 1.0, 0.0, 1.0].map(f64::to_bits)).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument, "{e}");
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn integer_and_bernoulli_kernels_match_the_cpu_fillers_on_a_gpu() {
    let draw = Philox::new(0x5eed_1234_abcd, 4 * 1001);
    let n = 100_003;
    // Per dtype, a range it holds exactly (the op layer's rule) and a probability.
    let cases = [
        (DType::I64, (i64::MIN, i64::MAX), 0.3),
        (DType::I32, (-1_000_003, 7), 0.5),
        (DType::U8, (0, 256), 1.0),
        (DType::Bool, (0, 2), 0.0),
        (DType::F32, (-(1 << 24), 1 << 24), 0.7),
        (DType::F64, (-(1 << 53), 1 << 53), 1e-9),
        (DType::F16, (-2048, 2049), 0.25),
        (DType::BF16, (-256, 257), 0.9),
    ];
    for (dtype, (low, high), p) in cases {
        for kind in [RandKind::Integers, RandKind::Bernoulli] {
            let loaded = LoadedRand::load(&emit_rand(kind, dtype).unwrap(), 0).unwrap();
            let mut out = CudaBuffer::alloc(0, n * dtype.size_in_bytes()).unwrap();
            let words = match kind {
                RandKind::Integers => [low as u64, integer_range(low, high), 0, 0],
                _ => [bernoulli_threshold(p).to_bits(), 0, 0, 0],
            };
            loaded.run(&mut out, n, draw.seed(), draw.offset(), words).unwrap();
            let what = format!("{dtype} {}", kind.name());
            let want = |t: DType| CpuInts { kind, n, draw, range: (low, high), p, dtype: t };
            match dtype {
                DType::I64 => assert_equal(&what, &out.to_vec::<i64>().unwrap(), &want(dtype).fill::<i64>()),
                DType::I32 => assert_equal(&what, &out.to_vec::<i32>().unwrap(), &want(dtype).fill::<i32>()),
                DType::U8 => assert_equal(&what, &out.to_vec::<u8>().unwrap(), &want(dtype).fill::<u8>()),
                DType::Bool => assert_equal(
                    &what,
                    &out.to_vec::<u8>().unwrap(),
                    &want(dtype).fill::<bool>().into_iter().map(u8::from).collect::<Vec<_>>(),
                ),
                DType::F32 => assert_equal(&what, &out.to_vec::<f32>().unwrap(), &want(dtype).fill::<f32>()),
                DType::F64 => assert_equal(&what, &out.to_vec::<f64>().unwrap(), &want(dtype).fill::<f64>()),
                DType::F16 => assert_equal(&what, &out.to_vec::<f16>().unwrap(), &want(dtype).fill::<f16>()),
                DType::BF16 => assert_equal(&what, &out.to_vec::<bf16>().unwrap(), &want(dtype).fill::<bf16>()),
            }
        }
    }
}

/// One integer or Bernoulli draw as the CPU fills it.
struct CpuInts {
    kind: RandKind,
    n: usize,
    draw: Philox,
    range: (i64, i64),
    p: f64,
    dtype: DType,
}

impl CpuInts {
    /// The CPU filler's `n` values in `T` (the dtype's element type).
    fn fill<T: kiln_runtime::Element>(&self) -> Vec<T> {
        assert_eq!(T::DTYPE, self.dtype);
        let mut v = vec![T::zero(); self.n];
        match self.kind {
            RandKind::Integers => {
                philox::integers(&mut v, &self.draw, self.range.0, integer_range(self.range.0, self.range.1))
            }
            _ => philox::bernoulli(&mut v, &self.draw, self.p),
        }
        v
    }
}

/// Panics at the first element where the device's values differ from the CPU's.
fn assert_equal<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what} element {i}: device {:?}, CPU {:?}", got[i], want[i]);
    }
}

/// The parameters a device draw of `kind` and `dtype` takes (uniform on [-3, 2.5), normal
/// with mean 1.5 and std 0.25).
fn device_params(kind: RandKind, dtype: DType) -> [f64; 4] {
    fn of<T: kiln_runtime::FloatElement>(kind: RandKind) -> [f64; 4] {
        match kind {
            RandKind::Uniform => uniform_params::<T>(-3.0, 2.5),
            RandKind::Normal => {
                let [m, s] = normal_params::<T>(1.5, 0.25);
                [m, s, 0.0, 0.0]
            }
            RandKind::Integers | RandKind::Bernoulli => unreachable!("float kinds only"),
        }
    }
    match dtype {
        DType::F32 => of::<f32>(kind),
        DType::F64 => of::<f64>(kind),
        DType::F16 => of::<f16>(kind),
        _ => of::<bf16>(kind),
    }
}

/// The CPU filler's values of the same draw, as f64.
fn cpu_fill<T: kiln_runtime::FloatElement>(kind: RandKind, n: usize, draw: &Philox) -> Vec<f64> {
    let mut v = vec![T::from_f64(0.0); n];
    match kind {
        RandKind::Uniform => philox::uniform(&mut v, draw, -3.0, 2.5),
        RandKind::Normal => philox::normal(&mut v, draw, 1.5, 0.25),
        RandKind::Integers | RandKind::Bernoulli => unreachable!("float kinds only"),
    }
    v.iter().map(|x| x.to_f64()).collect()
}
