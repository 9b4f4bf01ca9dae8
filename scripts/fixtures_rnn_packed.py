#!/usr/bin/env python3
"""Write PyTorch's recurrent layers run on packed sequences as a safetensors fixture for
tests/nn_rnn_packed.rs.

Usage:  python3 scripts/fixtures_rnn_packed.py      (needs torch, safetensors and numpy)

Writes tests/fixtures/rnn_packed.safetensors. Each case pads a batch of sequences of different
lengths, packs it with pack_padded_sequence(input, lengths, batch_first, enforce_sorted), runs
an RNN, LSTM or GRU (2 layers, one or two directions, LSTM with proj_size) on the packed batch,
and pads the output back with pad_packed_sequence(output, batch_first, padding_value,
total_length). In f64, with the names of scripts/fixtures_rnn.py (whose `finish` writes them):

  {case}/sd/{key}      the module's state dict
  {case}/input         the padded input; {case}/h0 and {case}/c0 the initial state, if any
  {case}/lengths       the lengths (int64), in the batch's order
  {case}/packed/data, /packed/batch_sizes, /packed/sorted_indices, /packed/unsorted_indices
                       the packed input (the indices only without enforce_sorted; int64)
  {case}/output        the padded output; {case}/out_lengths the lengths it returned (int64)
  {case}/h_n, /c_n     the final states
  {case}/dout, /dh, /dc   fixed random weights of the loss
                       sum(output * dout) + sum(h_n * dh) + sum(c_n * dc)
  {case}/grad/input, /grad/h0, /grad/c0, /grad/{key}   that loss's gradients

and in the metadata `case:{case}` = the configuration
(`mode=LSTM;num_layers=2;bias=1;bidirectional=1;proj_size=0;nonlinearity=tanh;batch_first=0;
state=1;enforce_sorted=0;total_length=6;padding_value=-1.0`; total_length 0 means None) and
`keys:{case}` = the state dict's keys with their shapes.
"""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from fixtures_rnn import finish, keys, save

INPUT, HIDDEN, BATCH = 3, 4, 4

# (name, mode, options, batch_first, initial state?, steps, lengths, enforce_sorted,
#  total_length, padding_value)
CASES = [
    ("rnn_2l", "RNN", dict(num_layers=2), False, True, 5, [3, 5, 1, 4], False, None, 0.0),
    ("rnn_relu_2l_bidir_bf", "RNN", dict(num_layers=2, bidirectional=True, nonlinearity="relu"), True, False, 5,
     [2, 5, 5, 1], False, 7, 0.0),
    ("lstm_2l_bf", "LSTM", dict(num_layers=2), True, True, 5, [3, 5, 1, 4], False, None, 0.0),
    ("lstm_2l_bidir", "LSTM", dict(num_layers=2, bidirectional=True), False, True, 6, [4, 1, 5, 3], False, 6, -1.0),
    ("lstm_proj_2l_bidir_bf", "LSTM", dict(num_layers=2, bidirectional=True, proj_size=2), True, True, 5,
     [3, 5, 1, 4], False, None, 0.0),
    ("lstm_bidir_sorted_nobias_bf", "LSTM", dict(bias=False, bidirectional=True), True, False, 5, [5, 3, 3, 1], True,
     None, 0.0),
    ("gru_2l_bf", "GRU", dict(num_layers=2), True, False, 5, [1, 4, 3, 5], False, None, 0.0),
    ("gru_2l_bidir", "GRU", dict(num_layers=2, bidirectional=True), False, True, 5, [3, 5, 1, 4], False, None, 0.0),
    ("gru_bidir_sorted", "GRU", dict(bidirectional=True), False, True, 5, [5, 4, 4, 2], True, None, 2.5),
]


def config(mode, opts, batch_first, state, enforce_sorted, total_length, padding_value):
    o = dict(num_layers=1, bias=True, bidirectional=False, proj_size=0, nonlinearity="tanh")
    o.update(opts)
    fields = [("mode", mode)] + list(o.items()) + [
        ("batch_first", batch_first),
        ("state", state),
        ("enforce_sorted", enforce_sorted),
        ("total_length", total_length or 0),
        ("padding_value", padding_value),
    ]
    return ";".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in fields)


def case(name, mode, opts, batch_first, state, steps, lengths, enforce_sorted, total_length, padding_value, out, meta):
    module = getattr(nn, mode)(INPUT, HIDDEN, batch_first=batch_first, **opts)
    d = 2 if opts.get("bidirectional") else 1
    layers = opts.get("num_layers", 1)
    h_out = opts.get("proj_size") or HIDDEN
    x = torch.randn(BATCH, steps, INPUT) if batch_first else torch.randn(steps, BATCH, INPUT)
    x.requires_grad_(True)
    inputs = {"input": x}
    if state:
        inputs["h0"] = torch.randn(d * layers, BATCH, h_out).requires_grad_(True)
        if mode == "LSTM":
            inputs["c0"] = torch.randn(d * layers, BATCH, HIDDEN).requires_grad_(True)
    packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=batch_first, enforce_sorted=enforce_sorted)
    out[f"{name}/lengths"] = torch.tensor(lengths, dtype=torch.int64)
    out[f"{name}/packed/data"] = packed.data.detach()
    out[f"{name}/packed/batch_sizes"] = packed.batch_sizes
    if packed.sorted_indices is not None:
        out[f"{name}/packed/sorted_indices"] = packed.sorted_indices
        out[f"{name}/packed/unsorted_indices"] = packed.unsorted_indices
    if mode == "LSTM":
        y, (h_n, c_n) = module(packed, (inputs["h0"], inputs["c0"]) if state else None)
    else:
        y, h_n = module(packed, inputs.get("h0"))
        c_n = None
    padded, out_lengths = pad_packed_sequence(y, batch_first, padding_value, total_length)
    out[f"{name}/out_lengths"] = out_lengths
    results = {"output": padded, "h_n": h_n}
    if c_n is not None:
        results["c_n"] = c_n
    finish(name, module, inputs, results, out)
    meta[f"case:{name}"] = config(mode, opts, batch_first, state, enforce_sorted, total_length, padding_value)
    meta[f"keys:{name}"] = keys(module)


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    out, meta = {}, {}
    for c in CASES:
        case(*c, out, meta)
    save(out, meta, "rnn_packed.safetensors")


if __name__ == "__main__":
    main()
