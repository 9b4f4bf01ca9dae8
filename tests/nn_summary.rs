//! `kiln::nn::summary` against torchinfo: `tests/fixtures/summary.txt` (written by
//! `scripts/fixtures_summary.py`) holds `torchinfo.summary` of the blitz CIFAR-10 Net and of a
//! model with a module of the user's own, a frozen weight and a nested Sequential. kiln's
//! table must match it line for line, except torchinfo's mult-adds line (not computed) and
//! the output shape of the user's module (kiln's layers report theirs; a user's `forward`
//! does not, so its row shows `--`).

#[path = "common/blitz_net.rs"]
mod blitz_net;

use kiln::nn::{self, Module};
use kiln::Tensor;

/// torchinfo's table `name` from the fixture.
fn torchinfo(name: &str) -> String {
    let text = include_str!("fixtures/summary.txt");
    let start = text.find(&format!("== {name} ==\n")).expect("the fixture has the table") + name.len() + 7;
    let end = text[start..].find("\n== ").map_or(text.len(), |e| start + e);
    text[start..end].trim_end().to_string()
}

/// `table` without torchinfo's mult-adds line.
fn without_mult_adds(table: &str) -> Vec<String> {
    table.lines().filter(|l| !l.starts_with("Total mult-adds")).map(str::to_string).collect()
}

#[test]
fn the_blitz_net_matches_torchinfo() {
    let net = blitz_net::Net::new();
    let s = nn::summary(&net, &[1, 3, 32, 32]);
    assert_eq!(s.total_params, 62_006);
    assert_eq!(s.layers.len(), 8, "the model, then 7 layer calls (the pool twice)");
    assert_eq!(s.layers[2].name, "pool");
    assert_eq!(s.layers[4].name, "pool");
    assert_eq!(s.layers[4].output_shape, Some(vec![1, 16, 5, 5]));
    assert_eq!(without_mult_adds(&s.to_string()), without_mult_adds(&torchinfo("blitz")));
}

#[derive(nn::Module)]
struct Block {
    fc: nn::Linear,
    norm: nn::BatchNorm1d,
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.norm.forward(&self.fc.forward(x)).relu()
    }
}

#[derive(nn::Module)]
struct Deep {
    embed: nn::Linear,
    block: Block,
    head: nn::Sequential,
}

impl Module for Deep {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.head.forward(&self.block.forward(&self.embed.forward(x)))
    }
}

#[test]
fn nested_frozen_and_user_modules_match_torchinfo() {
    let model = Deep {
        embed: nn::Linear::new(4, 8),
        block: Block { fc: nn::Linear::new(8, 8), norm: nn::BatchNorm1d::new(8) },
        head: nn::Sequential::new().add(nn::Linear::new(8, 8)).add(nn::ReLU).add(nn::Linear::new(8, 2)),
    };
    let (_, w) = model.named_parameters().into_iter().find(|(n, _)| n == "embed.weight").unwrap();
    w.requires_grad_(false);
    let s = nn::summary(&model, &[3, 4]);
    assert_eq!((s.total_params, s.trainable_params), (218, 186));
    let block = s.layers.iter().find(|l| l.name == "block").unwrap();
    assert_eq!(
        (block.depth, block.output_shape.clone(), block.params),
        (1, None, 0),
        "a user module: no shape, params below"
    );
    let want: Vec<String> = without_mult_adds(&torchinfo("deep"))
        .into_iter()
        .map(|l| if l.starts_with("├─Block: 1-2") { l.replacen("[3, 8]    ", "--        ", 1) } else { l })
        .collect();
    assert_eq!(without_mult_adds(&s.to_string()), want);
}

#[test]
fn a_single_layer_is_its_own_row_and_recording_stops_after() {
    let s = nn::summary(&nn::Linear::new(5, 3), &[2, 5]);
    assert_eq!(s.layers.len(), 1);
    assert_eq!((s.layers[0].output_shape.clone(), s.layers[0].params), (Some(vec![2, 3]), 18));
    assert_eq!(s.forward_backward_bytes, 2 * 6 * 4);
    assert_eq!((s.input_bytes, s.param_bytes), (40, 72));
    // A forward pass after the summary records nothing and is unchanged.
    let lin = nn::Linear::new(5, 3);
    let x = Tensor::ones([2, 5]);
    assert_eq!(lin.forward(&x).shape(), &[2, 3]);
    assert_eq!(nn::summary(&lin, &[2, 5]).layers.len(), 1, "a second summary starts afresh");
}

#[test]
fn a_failing_forward_panics_with_its_error_and_leaves_no_recording() {
    let lin = nn::Linear::new(5, 3);
    let failed = std::panic::catch_unwind(|| nn::summary(&lin, &[2, 4]));
    let message = failed.err().and_then(|e| e.downcast::<String>().ok()).unwrap();
    assert!(message.contains("linear"), "{message}");
    let s = nn::summary(&lin, &[1, 5]);
    assert_eq!(s.layers.len(), 1, "no call left over from the failed summary");
}

#[derive(nn::Module)]
struct Tagger {
    embed: nn::Embedding,
    lstm: nn::LSTM,
    out: nn::Linear,
}

impl Module for Tagger {
    fn forward(&self, x: &Tensor) -> Tensor {
        let (h, _) = self.lstm.forward_with_state(&self.embed.forward(x), None);
        self.out.forward(&h)
    }
}

#[test]
fn layers_called_with_state_report_their_main_output() {
    let model = Tagger { embed: nn::Embedding::new(10, 4), lstm: nn::LSTM::new(4, 6), out: nn::Linear::new(6, 3) };
    let s = nn::summary_with_input(&model, &Tensor::zeros([2, 5]).to_dtype(kiln::DType::I64));
    let rows: Vec<(String, Option<Vec<usize>>, usize)> =
        s.layers.iter().map(|l| (l.type_name.clone(), l.output_shape.clone(), l.params)).collect();
    assert_eq!(
        rows,
        vec![
            ("Tagger".to_string(), Some(vec![2, 5, 3]), 0),
            ("Embedding".to_string(), Some(vec![2, 5, 4]), 40),
            ("LSTM".to_string(), Some(vec![2, 5, 6]), 4 * 6 * (4 + 6) + 2 * 4 * 6),
            ("Linear".to_string(), Some(vec![2, 5, 3]), 21),
        ]
    );
    assert_eq!(s.input_bytes, 10 * 8, "an i64 input");
}
