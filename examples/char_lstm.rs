//! A character-level LSTM language model, trained with truncated backpropagation through time
//! as the PyTorch word-language-model example teaches: the corpus is cut into `batch_size`
//! parallel streams, each batch is the next `bptt` characters of every stream, and the hidden
//! state is carried from batch to batch with `.detach()`, so gradients stop at the batch edge.
//!
//! Run: `cargo run --release --example char_lstm` (add `--compile` to run each training step
//! through `kiln::compile`). The corpus is generated from a small grammar (seeded, so every run
//! sees the same text); the example prints the perplexity on held-out text after each epoch and
//! a line sampled from the model, and writes the training loss curve to `char_lstm_curve.svg`.

mod common;

use clap::Parser;
use common::lm::{corpus, sample_index, vocabulary, write_curve};
use common::progress;
use kiln::nn::{self, functional as F, Module};
use kiln::optim::{Adam, AdamConfig, Optimizer};
use kiln::Tensor;

/// Character-level LSTM language model (truncated BPTT)
#[derive(Parser, Debug)]
struct Args {
    /// number of epochs to train
    #[arg(long, default_value_t = 4)]
    epochs: usize,
    /// parallel streams per batch
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// characters per batch and stream (the truncation length)
    #[arg(long, default_value_t = 48)]
    bptt: usize,
    /// LSTM hidden size
    #[arg(long, default_value_t = 128)]
    hidden: usize,
    /// learning rate (Adam)
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// gradient clipping (the total 2-norm)
    #[arg(long, default_value_t = 1.0)]
    clip: f64,
    /// characters of generated corpus
    #[arg(long, default_value_t = 120_000)]
    corpus: usize,
    /// random seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// run each training step through kiln::compile
    #[arg(long)]
    compile: bool,
    /// one batch of training, one of evaluation, and a short sample
    #[arg(long)]
    dry_run: bool,
}

/// Embedding → LSTM → Linear over the vocabulary.
#[derive(nn::Module)]
struct CharModel {
    embed: nn::Embedding,
    lstm: nn::LSTM,
    head: nn::Linear,
}

impl CharModel {
    fn new(vocab: usize, hidden: usize) -> CharModel {
        let opts = nn::RNNOpts { batch_first: true, ..Default::default() };
        CharModel {
            embed: nn::Embedding::new(vocab, 32),
            lstm: nn::LSTM::with_opts(32, hidden, opts),
            head: nn::Linear::new(hidden, vocab),
        }
    }

    /// Logits `(N, L, vocab)` for the characters `x` `(N, L)` and the new state.
    fn step(&self, x: &Tensor, state: (&Tensor, &Tensor)) -> (Tensor, (Tensor, Tensor)) {
        let (out, state) = self.lstm.forward_with_state(&self.embed.forward(x), Some(state));
        (self.head.forward(&out), state)
    }
}

impl Module for CharModel {
    /// Logits from a zero state.
    fn forward(&self, x: &Tensor) -> Tensor {
        let (out, _) = self.lstm.forward_with_state(&self.embed.forward(x), None);
        self.head.forward(&out)
    }
}

/// The corpus as `streams` rows of character ids (the tail that does not fill a row dropped).
fn batchify(ids: &[i64], streams: usize) -> Tensor {
    let len = ids.len() / streams;
    Tensor::from_vec(ids[..len * streams].to_vec(), [streams, len])
}

/// The mean cross-entropy of predicting each next character of `data` (streams × length).
fn evaluate(model: &CharModel, data: &Tensor, args: &Args) -> f64 {
    let _no_grad = kiln::no_grad_guard();
    let (streams, len) = (data.shape()[0], data.shape()[1]);
    let zeros = Tensor::zeros([1, streams, args.hidden]);
    let (mut h, mut c) = (zeros.clone(), zeros);
    let (mut total, mut count) = (0.0, 0usize);
    let mut at = 0;
    while at + 1 < len {
        let n = args.bptt.min(len - 1 - at);
        let (x, y) = (data.narrow(1, at as i64, n), data.narrow(1, at as i64 + 1, n));
        let (logits, (h2, c2)) = model.step(&x, (&h, &c));
        let vocab = logits.shape()[2] as i64;
        total += F::cross_entropy(&logits.reshape([-1, vocab]), &y.reshape([-1])).item::<f32>() as f64
            * (n * streams) as f64;
        count += n * streams;
        (h, c) = (h2, c2);
        at += n;
        if args.dry_run {
            break;
        }
    }
    total / count.max(1) as f64
}

/// `length` characters sampled from the model after `prompt`, at temperature 0.8.
fn sample(model: &CharModel, vocab: &[char], prompt: &str, length: usize, hidden: usize) -> String {
    let _no_grad = kiln::no_grad_guard();
    let id = |c: char| vocab.iter().position(|&v| v == c).unwrap_or(0) as i64;
    let zeros = Tensor::zeros([1, 1, hidden]);
    let (mut h, mut c) = (zeros.clone(), zeros);
    let mut out = String::from(prompt);
    let mut logits = Tensor::zeros([vocab.len()]);
    for ch in prompt.chars() {
        let (l, (h2, c2)) = model.step(&Tensor::from_vec(vec![id(ch)], [1, 1]), (&h, &c));
        (logits, h, c) = (l.reshape([-1]), h2, c2);
    }
    for _ in 0..length {
        let next = sample_index(&logits, 0.8);
        out.push(vocab[next]);
        let (l, (h2, c2)) = model.step(&Tensor::from_vec(vec![next as i64], [1, 1]), (&h, &c));
        (logits, h, c) = (l.reshape([-1]), h2, c2);
    }
    out
}

fn main() -> kiln::Result<()> {
    let args = Args::parse();
    kiln::manual_seed(args.seed);
    let text = corpus(if args.dry_run { 4_000 } else { args.corpus }, args.seed);
    let (vocab, ids) = vocabulary(&text);
    let split = ids.len() * 9 / 10;
    let (train_data, valid_data) = (batchify(&ids[..split], args.batch_size), batchify(&ids[split..], 4));
    println!(
        "{} characters ({} distinct), {} streams of {} for training",
        ids.len(),
        vocab.len(),
        args.batch_size,
        train_data.shape()[1]
    );

    let model = CharModel::new(vocab.len(), args.hidden);
    println!("{model}");
    let params = model.parameters();
    let mut optimizer = Adam::new(params.clone(), AdamConfig { lr: args.lr, ..Default::default() });
    let vocab_size = vocab.len() as i64;
    let mut step = kiln::compile(|(x, y, h, c): (&Tensor, &Tensor, &Tensor, &Tensor)| {
        optimizer.zero_grad();
        let (logits, (h, c)) = model.step(x, (h, c));
        let loss = F::cross_entropy(&logits.reshape([-1, vocab_size]), &y.reshape([-1]));
        loss.backward();
        nn::utils::clip_grad_norm_(&params, args.clip, 2.0);
        optimizer.step();
        (loss, h.detach(), c.detach())
    });

    let batches = (train_data.shape()[1] - 1) / args.bptt;
    let mut curve = Vec::new();
    for epoch in 1..=args.epochs {
        let (bar, plain_log) = progress(batches, &format!("epoch {epoch}"));
        let zeros = Tensor::zeros([1, args.batch_size, args.hidden]);
        let (mut h, mut c) = (zeros.clone(), zeros);
        let start = std::time::Instant::now();
        for b in 0..batches {
            let at = (b * args.bptt) as i64;
            let (x, y) = (train_data.narrow(1, at, args.bptt), train_data.narrow(1, at + 1, args.bptt));
            let (loss, h2, c2) =
                if args.compile { step.call((&x, &y, &h, &c)) } else { step.call_eager((&x, &y, &h, &c)) };
            (h, c) = (h2, c2);
            let loss = loss.item::<f32>() as f64;
            curve.push(loss);
            bar.set_message(format!("loss {loss:.4}"));
            bar.inc(1);
            if plain_log && b % 20 == 0 {
                println!("epoch {epoch} batch {b}/{batches}: loss {loss:.4}");
            }
            if args.dry_run {
                break;
            }
        }
        bar.finish();
        if args.compile {
            let s = step.stats();
            println!(
                "compiled step: {} kernels, {} eager ops, {} graph breaks",
                s.kernels_launched, s.eager_ops, s.graph_breaks
            );
        }
        let valid = evaluate(&model, &valid_data, &args);
        println!(
            "epoch {epoch}: {:.1} s, validation loss {valid:.4}, perplexity {:.2}",
            start.elapsed().as_secs_f64(),
            valid.exp()
        );
        println!("sample: {}", sample(&model, &vocab, "The ", if args.dry_run { 20 } else { 80 }, args.hidden));
        if args.dry_run {
            break;
        }
    }
    write_curve("char_lstm", "char_lstm_curve.svg", "training loss (cross-entropy per character)", &curve)
}
