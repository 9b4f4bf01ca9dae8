//! Reductions, cumsum and softmax against PyTorch's values, on contiguous, transposed, narrowed,
//! expanded, 0-dim and zero-size inputs of every dtype, plus NaN and tie rules, the parallel
//! paths on large inputs (against f64 references computed here) and error messages.

use kiln::{DType, Tensor};

/// PyTorch 2.15's results (`python3` with torch, script below), one line per op and input:
/// `op input = dtype [shape] values | …` (one part per output) or `op input = ERR message`.
///
/// ```python
/// x = torch.tensor([[0.5, -2.0, 3.0, 2.0], [4.5, 0.0, -2.0, 3.0], [1.0, 1.0, -0.5, 4.5]], dtype=torch.float64)
/// views = {"contig": x, "t": x.t(), "narrow": x.narrow(1, 1, 2), "expand": x.narrow(0, 1, 1).expand(3, 4),
///          "empty03": torch.zeros(0, 3, dtype=torch.float64), "empty30": torch.zeros(3, 0, dtype=torch.float64),
///          "scalar": torch.tensor(2.5, dtype=torch.float64)}
/// y = torch.tensor([[1.0, 0.0, 3.0], [2.0, 2.0, 0.0]], dtype=torch.float64)
/// for name, dt in [("f32", torch.float32), ("f64", torch.float64), ("f16", torch.float16), ("bf16", torch.bfloat16),
///                  ("i64", torch.int64), ("i32", torch.int32), ("u8", torch.uint8), ("bool", torch.bool)]:
///     views[name] = y.to(dt)
///     if name in ("f16", "i32", "bool"): views[name + "_t"] = y.to(dt).t()
/// # ops: the same list as `ops()` below, e.g. ("max_dim_d1", lambda t: list(t.max(1))),
/// for oname, f in ops:
///     for vname, t in views.items():
///         try: print(oname, vname, "=", " | ".join(f"{o.dtype} [{shape}] {values}" for o in f(t)))  # values: repr(float)
///         except Exception as e: print(oname, vname, "= ERR", str(e))
/// ```
const TORCH: &str = r#"
sum contig = float64 [] 15.0
sum t = float64 [] 15.0
sum narrow = float64 [] -0.5
sum expand = float64 [] 16.5
sum empty03 = float64 [] 0.0
sum empty30 = float64 [] 0.0
sum scalar = float64 [] 2.5
sum f32 = float32 [] 8.0
sum f64 = float64 [] 8.0
sum f16 = float16 [] 8.0
sum f16_t = float16 [] 8.0
sum bf16 = bfloat16 [] 8.0
sum i64 = int64 [] 8.0
sum i32 = int64 [] 8.0
sum i32_t = int64 [] 8.0
sum u8 = int64 [] 8.0
sum bool = int64 [] 4.0
sum bool_t = int64 [] 4.0
sum_d0 contig = float64 [4] 6.0, -1.0, 0.5, 9.5
sum_d0 t = float64 [3] 3.5, 5.5, 6.0
sum_d0 narrow = float64 [2] -1.0, 0.5
sum_d0 expand = float64 [4] 13.5, 0.0, -6.0, 9.0
sum_d0 empty03 = float64 [3] 0.0, 0.0, 0.0
sum_d0 empty30 = float64 [0] 
sum_d0 scalar = float64 [] 2.5
sum_d0 f32 = float32 [3] 3.0, 2.0, 3.0
sum_d0 f64 = float64 [3] 3.0, 2.0, 3.0
sum_d0 f16 = float16 [3] 3.0, 2.0, 3.0
sum_d0 f16_t = float16 [2] 4.0, 4.0
sum_d0 bf16 = bfloat16 [3] 3.0, 2.0, 3.0
sum_d0 i64 = int64 [3] 3.0, 2.0, 3.0
sum_d0 i32 = int64 [3] 3.0, 2.0, 3.0
sum_d0 i32_t = int64 [2] 4.0, 4.0
sum_d0 u8 = int64 [3] 3.0, 2.0, 3.0
sum_d0 bool = int64 [3] 2.0, 1.0, 1.0
sum_d0 bool_t = int64 [2] 2.0, 2.0
sum_dm1_keep contig = float64 [3, 1] 3.5, 5.5, 6.0
sum_dm1_keep t = float64 [4, 1] 6.0, -1.0, 0.5, 9.5
sum_dm1_keep narrow = float64 [3, 1] 1.0, -2.0, 0.5
sum_dm1_keep expand = float64 [3, 1] 5.5, 5.5, 5.5
sum_dm1_keep empty03 = float64 [0, 1] 
sum_dm1_keep empty30 = float64 [3, 1] 0.0, 0.0, 0.0
sum_dm1_keep scalar = float64 [] 2.5
sum_dm1_keep f32 = float32 [2, 1] 4.0, 4.0
sum_dm1_keep f64 = float64 [2, 1] 4.0, 4.0
sum_dm1_keep f16 = float16 [2, 1] 4.0, 4.0
sum_dm1_keep f16_t = float16 [3, 1] 3.0, 2.0, 3.0
sum_dm1_keep bf16 = bfloat16 [2, 1] 4.0, 4.0
sum_dm1_keep i64 = int64 [2, 1] 4.0, 4.0
sum_dm1_keep i32 = int64 [2, 1] 4.0, 4.0
sum_dm1_keep i32_t = int64 [3, 1] 3.0, 2.0, 3.0
sum_dm1_keep u8 = int64 [2, 1] 4.0, 4.0
sum_dm1_keep bool = int64 [2, 1] 2.0, 2.0
sum_dm1_keep bool_t = int64 [3, 1] 2.0, 1.0, 1.0
sum_d01 contig = float64 [] 15.0
sum_d01 t = float64 [] 15.0
sum_d01 narrow = float64 [] -0.5
sum_d01 expand = float64 [] 16.5
sum_d01 empty03 = float64 [] 0.0
sum_d01 empty30 = float64 [] 0.0
sum_d01 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
sum_d01 f32 = float32 [] 8.0
sum_d01 f64 = float64 [] 8.0
sum_d01 f16 = float16 [] 8.0
sum_d01 f16_t = float16 [] 8.0
sum_d01 bf16 = bfloat16 [] 8.0
sum_d01 i64 = int64 [] 8.0
sum_d01 i32 = int64 [] 8.0
sum_d01 i32_t = int64 [] 8.0
sum_d01 u8 = int64 [] 8.0
sum_d01 bool = int64 [] 4.0
sum_d01 bool_t = int64 [] 4.0
mean contig = float64 [] 1.25
mean t = float64 [] 1.25
mean narrow = float64 [] -0.08333333333333333
mean expand = float64 [] 1.375
mean empty03 = float64 [] NAN
mean empty30 = float64 [] NAN
mean scalar = float64 [] 2.5
mean f32 = float32 [] 1.3333333730697632
mean f64 = float64 [] 1.3333333333333333
mean f16 = float16 [] 1.3330078125
mean f16_t = float16 [] 1.3330078125
mean bf16 = bfloat16 [] 1.3359375
mean i64 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long
mean i32 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int
mean i32_t = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int
mean u8 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Byte
mean bool = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Bool
mean bool_t = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Bool
mean_d0 contig = float64 [4] 2.0, -0.3333333333333333, 0.16666666666666666, 3.1666666666666665
mean_d0 t = float64 [3] 0.875, 1.375, 1.5
mean_d0 narrow = float64 [2] -0.3333333333333333, 0.16666666666666666
mean_d0 expand = float64 [4] 4.5, 0.0, -2.0, 3.0
mean_d0 empty03 = float64 [3] NAN, NAN, NAN
mean_d0 empty30 = float64 [0] 
mean_d0 scalar = float64 [] 2.5
mean_d0 f32 = float32 [3] 1.5, 1.0, 1.5
mean_d0 f64 = float64 [3] 1.5, 1.0, 1.5
mean_d0 f16 = float16 [3] 1.5, 1.0, 1.5
mean_d0 f16_t = float16 [2] 1.3330078125, 1.3330078125
mean_d0 bf16 = bfloat16 [3] 1.5, 1.0, 1.5
mean_d0 i64 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long
mean_d0 i32 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int
mean_d0 i32_t = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int
mean_d0 u8 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Byte
mean_d0 bool = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Bool
mean_d0 bool_t = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Bool
mean_dm1_keep contig = float64 [3, 1] 0.875, 1.375, 1.5
mean_dm1_keep t = float64 [4, 1] 2.0, -0.3333333333333333, 0.16666666666666666, 3.1666666666666665
mean_dm1_keep narrow = float64 [3, 1] 0.5, -1.0, 0.25
mean_dm1_keep expand = float64 [3, 1] 1.375, 1.375, 1.375
mean_dm1_keep empty03 = float64 [0, 1] 
mean_dm1_keep empty30 = float64 [3, 1] NAN, NAN, NAN
mean_dm1_keep scalar = float64 [] 2.5
mean_dm1_keep f32 = float32 [2, 1] 1.3333333730697632, 1.3333333730697632
mean_dm1_keep f64 = float64 [2, 1] 1.3333333333333333, 1.3333333333333333
mean_dm1_keep f16 = float16 [2, 1] 1.3330078125, 1.3330078125
mean_dm1_keep f16_t = float16 [3, 1] 1.5, 1.0, 1.5
mean_dm1_keep bf16 = bfloat16 [2, 1] 1.3359375, 1.3359375
mean_dm1_keep i64 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long
mean_dm1_keep i32 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int
mean_dm1_keep i32_t = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int
mean_dm1_keep u8 = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Byte
mean_dm1_keep bool = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Bool
mean_dm1_keep bool_t = ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Bool
prod contig = float64 [] -0.0
prod t = float64 [] -0.0
prod narrow = float64 [] -0.0
prod expand = float64 [] -0.0
prod empty03 = float64 [] 1.0
prod empty30 = float64 [] 1.0
prod scalar = float64 [] 2.5
prod f32 = float32 [] 0.0
prod f64 = float64 [] 0.0
prod f16 = float16 [] 0.0
prod f16_t = float16 [] 0.0
prod bf16 = bfloat16 [] 0.0
prod i64 = int64 [] 0.0
prod i32 = int64 [] 0.0
prod i32_t = int64 [] 0.0
prod u8 = int64 [] 0.0
prod bool = int64 [] 0.0
prod bool_t = int64 [] 0.0
prod_d1 contig = float64 [3] -6.0, -0.0, -2.25
prod_d1 t = float64 [4] 2.25, -0.0, 3.0, 27.0
prod_d1 narrow = float64 [3] -6.0, -0.0, -0.5
prod_d1 expand = float64 [3] -0.0, -0.0, -0.0
prod_d1 empty03 = float64 [0] 
prod_d1 empty30 = float64 [3] 1.0, 1.0, 1.0
prod_d1 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
prod_d1 f32 = float32 [2] 0.0, 0.0
prod_d1 f64 = float64 [2] 0.0, 0.0
prod_d1 f16 = float16 [2] 0.0, 0.0
prod_d1 f16_t = float16 [3] 2.0, 0.0, 0.0
prod_d1 bf16 = bfloat16 [2] 0.0, 0.0
prod_d1 i64 = int64 [2] 0.0, 0.0
prod_d1 i32 = int64 [2] 0.0, 0.0
prod_d1 i32_t = int64 [3] 2.0, 0.0, 0.0
prod_d1 u8 = int64 [2] 0.0, 0.0
prod_d1 bool = int64 [2] 0.0, 0.0
prod_d1 bool_t = int64 [3] 1.0, 0.0, 0.0
max contig = float64 [] 4.5
max t = float64 [] 4.5
max narrow = float64 [] 3.0
max expand = float64 [] 4.5
max empty03 = ERR max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.
max empty30 = ERR max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.
max scalar = float64 [] 2.5
max f32 = float32 [] 3.0
max f64 = float64 [] 3.0
max f16 = float16 [] 3.0
max f16_t = float16 [] 3.0
max bf16 = bfloat16 [] 3.0
max i64 = int64 [] 3.0
max i32 = int32 [] 3.0
max i32_t = int32 [] 3.0
max u8 = uint8 [] 3.0
max bool = bool [] 1.0
max bool_t = bool [] 1.0
min contig = float64 [] -2.0
min t = float64 [] -2.0
min narrow = float64 [] -2.0
min expand = float64 [] -2.0
min empty03 = ERR min(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.
min empty30 = ERR min(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.
min scalar = float64 [] 2.5
min f32 = float32 [] 0.0
min f64 = float64 [] 0.0
min f16 = float16 [] 0.0
min f16_t = float16 [] 0.0
min bf16 = bfloat16 [] 0.0
min i64 = int64 [] 0.0
min i32 = int32 [] 0.0
min i32_t = int32 [] 0.0
min u8 = uint8 [] 0.0
min bool = bool [] 0.0
min bool_t = bool [] 0.0
amax_d0 contig = float64 [4] 4.5, 1.0, 3.0, 4.5
amax_d0 t = float64 [3] 3.0, 4.5, 4.5
amax_d0 narrow = float64 [2] 1.0, 3.0
amax_d0 expand = float64 [4] 4.5, 0.0, -2.0, 3.0
amax_d0 empty03 = ERR amax(): Expected reduction dim 0 to have non-zero size.
amax_d0 empty30 = float64 [0] 
amax_d0 scalar = float64 [] 2.5
amax_d0 f32 = float32 [3] 2.0, 2.0, 3.0
amax_d0 f64 = float64 [3] 2.0, 2.0, 3.0
amax_d0 f16 = float16 [3] 2.0, 2.0, 3.0
amax_d0 f16_t = float16 [2] 3.0, 2.0
amax_d0 bf16 = bfloat16 [3] 2.0, 2.0, 3.0
amax_d0 i64 = int64 [3] 2.0, 2.0, 3.0
amax_d0 i32 = int32 [3] 2.0, 2.0, 3.0
amax_d0 i32_t = int32 [2] 3.0, 2.0
amax_d0 u8 = uint8 [3] 2.0, 2.0, 3.0
amax_d0 bool = bool [3] 1.0, 1.0, 1.0
amax_d0 bool_t = bool [2] 1.0, 1.0
amin_dm1_keep contig = float64 [3, 1] -2.0, -2.0, -0.5
amin_dm1_keep t = float64 [4, 1] 0.5, -2.0, -2.0, 2.0
amin_dm1_keep narrow = float64 [3, 1] -2.0, -2.0, -0.5
amin_dm1_keep expand = float64 [3, 1] -2.0, -2.0, -2.0
amin_dm1_keep empty03 = float64 [0, 1] 
amin_dm1_keep empty30 = ERR amin(): Expected reduction dim -1 to have non-zero size.
amin_dm1_keep scalar = float64 [] 2.5
amin_dm1_keep f32 = float32 [2, 1] 0.0, 0.0
amin_dm1_keep f64 = float64 [2, 1] 0.0, 0.0
amin_dm1_keep f16 = float16 [2, 1] 0.0, 0.0
amin_dm1_keep f16_t = float16 [3, 1] 1.0, 0.0, 0.0
amin_dm1_keep bf16 = bfloat16 [2, 1] 0.0, 0.0
amin_dm1_keep i64 = int64 [2, 1] 0.0, 0.0
amin_dm1_keep i32 = int32 [2, 1] 0.0, 0.0
amin_dm1_keep i32_t = int32 [3, 1] 1.0, 0.0, 0.0
amin_dm1_keep u8 = uint8 [2, 1] 0.0, 0.0
amin_dm1_keep bool = bool [2, 1] 0.0, 0.0
amin_dm1_keep bool_t = bool [3, 1] 1.0, 0.0, 0.0
max_dim_d1 contig = float64 [3] 3.0, 4.5, 4.5 | int64 [3] 2.0, 0.0, 3.0
max_dim_d1 t = float64 [4] 4.5, 1.0, 3.0, 4.5 | int64 [4] 1.0, 2.0, 0.0, 2.0
max_dim_d1 narrow = float64 [3] 3.0, 0.0, 1.0 | int64 [3] 1.0, 0.0, 0.0
max_dim_d1 expand = float64 [3] 4.5, 4.5, 4.5 | int64 [3] 0.0, 0.0, 0.0
max_dim_d1 empty03 = float64 [0]  | int64 [0] 
max_dim_d1 empty30 = ERR max(): Expected reduction dim 1 to have non-zero size.
max_dim_d1 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
max_dim_d1 f32 = float32 [2] 3.0, 2.0 | int64 [2] 2.0, 0.0
max_dim_d1 f64 = float64 [2] 3.0, 2.0 | int64 [2] 2.0, 0.0
max_dim_d1 f16 = float16 [2] 3.0, 2.0 | int64 [2] 2.0, 0.0
max_dim_d1 f16_t = float16 [3] 2.0, 2.0, 3.0 | int64 [3] 1.0, 1.0, 0.0
max_dim_d1 bf16 = bfloat16 [2] 3.0, 2.0 | int64 [2] 2.0, 0.0
max_dim_d1 i64 = int64 [2] 3.0, 2.0 | int64 [2] 2.0, 0.0
max_dim_d1 i32 = int32 [2] 3.0, 2.0 | int64 [2] 2.0, 0.0
max_dim_d1 i32_t = int32 [3] 2.0, 2.0, 3.0 | int64 [3] 1.0, 1.0, 0.0
max_dim_d1 u8 = uint8 [2] 3.0, 2.0 | int64 [2] 2.0, 0.0
max_dim_d1 bool = bool [2] 1.0, 1.0 | int64 [2] 0.0, 0.0
max_dim_d1 bool_t = bool [3] 1.0, 1.0, 1.0 | int64 [3] 0.0, 1.0, 0.0
min_dim_d0_keep contig = float64 [1, 4] 0.5, -2.0, -2.0, 2.0 | int64 [1, 4] 0.0, 0.0, 1.0, 0.0
min_dim_d0_keep t = float64 [1, 3] -2.0, -2.0, -0.5 | int64 [1, 3] 1.0, 2.0, 2.0
min_dim_d0_keep narrow = float64 [1, 2] -2.0, -2.0 | int64 [1, 2] 0.0, 1.0
min_dim_d0_keep expand = float64 [1, 4] 4.5, 0.0, -2.0, 3.0 | int64 [1, 4] 0.0, 0.0, 0.0, 0.0
min_dim_d0_keep empty03 = ERR min(): Expected reduction dim 0 to have non-zero size.
min_dim_d0_keep empty30 = float64 [1, 0]  | int64 [1, 0] 
min_dim_d0_keep scalar = float64 [] 2.5 | int64 [] 0.0
min_dim_d0_keep f32 = float32 [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep f64 = float64 [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep f16 = float16 [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep f16_t = float16 [1, 2] 0.0, 0.0 | int64 [1, 2] 1.0, 2.0
min_dim_d0_keep bf16 = bfloat16 [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep i64 = int64 [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep i32 = int32 [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep i32_t = int32 [1, 2] 0.0, 0.0 | int64 [1, 2] 1.0, 2.0
min_dim_d0_keep u8 = uint8 [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep bool = bool [1, 3] 1.0, 0.0, 0.0 | int64 [1, 3] 0.0, 0.0, 1.0
min_dim_d0_keep bool_t = bool [1, 2] 0.0, 0.0 | int64 [1, 2] 1.0, 2.0
argmax contig = int64 [] 4.0
argmax t = int64 [] 1.0
argmax narrow = int64 [] 1.0
argmax expand = int64 [] 0.0
argmax empty03 = ERR argmax(): Expected reduction dim to be specified for input.numel() == 0.
argmax empty30 = ERR argmax(): Expected reduction dim to be specified for input.numel() == 0.
argmax scalar = int64 [] 0.0
argmax f32 = int64 [] 2.0
argmax f64 = int64 [] 2.0
argmax f16 = int64 [] 2.0
argmax f16_t = int64 [] 4.0
argmax bf16 = int64 [] 2.0
argmax i64 = int64 [] 2.0
argmax i32 = int64 [] 2.0
argmax i32_t = int64 [] 4.0
argmax u8 = int64 [] 2.0
argmax bool = ERR argmax(): does not support bool input
argmax bool_t = ERR argmax(): does not support bool input
argmin contig = int64 [] 1.0
argmin t = int64 [] 3.0
argmin narrow = int64 [] 0.0
argmin expand = int64 [] 2.0
argmin empty03 = ERR argmin(): Expected reduction dim to be specified for input.numel() == 0.
argmin empty30 = ERR argmin(): Expected reduction dim to be specified for input.numel() == 0.
argmin scalar = int64 [] 0.0
argmin f32 = int64 [] 1.0
argmin f64 = int64 [] 1.0
argmin f16 = int64 [] 1.0
argmin f16_t = int64 [] 2.0
argmin bf16 = int64 [] 1.0
argmin i64 = int64 [] 1.0
argmin i32 = int64 [] 1.0
argmin i32_t = int64 [] 2.0
argmin u8 = int64 [] 1.0
argmin bool = ERR argmin(): does not support bool input
argmin bool_t = ERR argmin(): does not support bool input
argmax_d0 contig = int64 [4] 1.0, 2.0, 0.0, 2.0
argmax_d0 t = int64 [3] 2.0, 0.0, 3.0
argmax_d0 narrow = int64 [2] 2.0, 0.0
argmax_d0 expand = int64 [4] 0.0, 0.0, 0.0, 0.0
argmax_d0 empty03 = ERR argmax(): Expected reduction dim 0 to have non-zero size.
argmax_d0 empty30 = int64 [0] 
argmax_d0 scalar = int64 [] 0.0
argmax_d0 f32 = int64 [3] 1.0, 1.0, 0.0
argmax_d0 f64 = int64 [3] 1.0, 1.0, 0.0
argmax_d0 f16 = int64 [3] 1.0, 1.0, 0.0
argmax_d0 f16_t = int64 [2] 2.0, 0.0
argmax_d0 bf16 = int64 [3] 1.0, 1.0, 0.0
argmax_d0 i64 = int64 [3] 1.0, 1.0, 0.0
argmax_d0 i32 = int64 [3] 1.0, 1.0, 0.0
argmax_d0 i32_t = int64 [2] 2.0, 0.0
argmax_d0 u8 = int64 [3] 1.0, 1.0, 0.0
argmax_d0 bool = ERR argmax(): does not support bool input
argmax_d0 bool_t = ERR argmax(): does not support bool input
argmin_d1_keep contig = int64 [3, 1] 1.0, 2.0, 2.0
argmin_d1_keep t = int64 [4, 1] 0.0, 0.0, 1.0, 0.0
argmin_d1_keep narrow = int64 [3, 1] 0.0, 1.0, 1.0
argmin_d1_keep expand = int64 [3, 1] 2.0, 2.0, 2.0
argmin_d1_keep empty03 = int64 [0, 1] 
argmin_d1_keep empty30 = ERR argmin(): Expected reduction dim 1 to have non-zero size.
argmin_d1_keep scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
argmin_d1_keep f32 = int64 [2, 1] 1.0, 2.0
argmin_d1_keep f64 = int64 [2, 1] 1.0, 2.0
argmin_d1_keep f16 = int64 [2, 1] 1.0, 2.0
argmin_d1_keep f16_t = int64 [3, 1] 0.0, 0.0, 1.0
argmin_d1_keep bf16 = int64 [2, 1] 1.0, 2.0
argmin_d1_keep i64 = int64 [2, 1] 1.0, 2.0
argmin_d1_keep i32 = int64 [2, 1] 1.0, 2.0
argmin_d1_keep i32_t = int64 [3, 1] 0.0, 0.0, 1.0
argmin_d1_keep u8 = int64 [2, 1] 1.0, 2.0
argmin_d1_keep bool = ERR argmin(): does not support bool input
argmin_d1_keep bool_t = ERR argmin(): does not support bool input
all contig = bool [] 0.0
all t = bool [] 0.0
all narrow = bool [] 0.0
all expand = bool [] 0.0
all empty03 = bool [] 1.0
all empty30 = bool [] 1.0
all scalar = bool [] 1.0
all f32 = bool [] 0.0
all f64 = bool [] 0.0
all f16 = bool [] 0.0
all f16_t = bool [] 0.0
all bf16 = bool [] 0.0
all i64 = bool [] 0.0
all i32 = bool [] 0.0
all i32_t = bool [] 0.0
all u8 = uint8 [] 0.0
all bool = bool [] 0.0
all bool_t = bool [] 0.0
any contig = bool [] 1.0
any t = bool [] 1.0
any narrow = bool [] 1.0
any expand = bool [] 1.0
any empty03 = bool [] 0.0
any empty30 = bool [] 0.0
any scalar = bool [] 1.0
any f32 = bool [] 1.0
any f64 = bool [] 1.0
any f16 = bool [] 1.0
any f16_t = bool [] 1.0
any bf16 = bool [] 1.0
any i64 = bool [] 1.0
any i32 = bool [] 1.0
any i32_t = bool [] 1.0
any u8 = uint8 [] 1.0
any bool = bool [] 1.0
any bool_t = bool [] 1.0
all_d1 contig = bool [3] 1.0, 0.0, 1.0
all_d1 t = bool [4] 1.0, 0.0, 1.0, 1.0
all_d1 narrow = bool [3] 1.0, 0.0, 1.0
all_d1 expand = bool [3] 0.0, 0.0, 0.0
all_d1 empty03 = bool [0] 
all_d1 empty30 = bool [3] 1.0, 1.0, 1.0
all_d1 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
all_d1 f32 = bool [2] 0.0, 0.0
all_d1 f64 = bool [2] 0.0, 0.0
all_d1 f16 = bool [2] 0.0, 0.0
all_d1 f16_t = bool [3] 1.0, 0.0, 0.0
all_d1 bf16 = bool [2] 0.0, 0.0
all_d1 i64 = bool [2] 0.0, 0.0
all_d1 i32 = bool [2] 0.0, 0.0
all_d1 i32_t = bool [3] 1.0, 0.0, 0.0
all_d1 u8 = uint8 [2] 0.0, 0.0
all_d1 bool = bool [2] 0.0, 0.0
all_d1 bool_t = bool [3] 1.0, 0.0, 0.0
any_d0_keep contig = bool [1, 4] 1.0, 1.0, 1.0, 1.0
any_d0_keep t = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep narrow = bool [1, 2] 1.0, 1.0
any_d0_keep expand = bool [1, 4] 1.0, 0.0, 1.0, 1.0
any_d0_keep empty03 = bool [1, 3] 0.0, 0.0, 0.0
any_d0_keep empty30 = bool [1, 0] 
any_d0_keep scalar = bool [] 1.0
any_d0_keep f32 = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep f64 = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep f16 = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep f16_t = bool [1, 2] 1.0, 1.0
any_d0_keep bf16 = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep i64 = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep i32 = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep i32_t = bool [1, 2] 1.0, 1.0
any_d0_keep u8 = uint8 [1, 3] 1.0, 1.0, 1.0
any_d0_keep bool = bool [1, 3] 1.0, 1.0, 1.0
any_d0_keep bool_t = bool [1, 2] 1.0, 1.0
var contig = float64 [] 4.931818181818182
var t = float64 [] 4.931818181818182
var narrow = float64 [] 3.641666666666667
var expand = float64 [] 7.005681818181818
var empty03 = float64 [] NAN
var empty30 = float64 [] NAN
var scalar = float64 [] NAN
var f32 = float32 [] 1.4666666984558105
var f64 = float64 [] 1.4666666666666668
var f16 = float16 [] 1.466796875
var f16_t = float16 [] 1.466796875
var bf16 = bfloat16 [] 1.46875
var i64 = ERR std and var only support floating point and complex dtypes
var i32 = ERR std and var only support floating point and complex dtypes
var i32_t = ERR std and var only support floating point and complex dtypes
var u8 = ERR std and var only support floating point and complex dtypes
var bool = ERR std and var only support floating point and complex dtypes
var bool_t = ERR std and var only support floating point and complex dtypes
var_biased contig = float64 [] 4.520833333333333
var_biased t = float64 [] 4.520833333333333
var_biased narrow = float64 [] 3.0347222222222228
var_biased expand = float64 [] 6.421875
var_biased empty03 = float64 [] NAN
var_biased empty30 = float64 [] NAN
var_biased scalar = float64 [] 0.0
var_biased f32 = float32 [] 1.2222222089767456
var_biased f64 = float64 [] 1.2222222222222223
var_biased f16 = float16 [] 1.22265625
var_biased f16_t = float16 [] 1.22265625
var_biased bf16 = bfloat16 [] 1.21875
var_biased i64 = ERR std and var only support floating point and complex dtypes
var_biased i32 = ERR std and var only support floating point and complex dtypes
var_biased i32_t = ERR std and var only support floating point and complex dtypes
var_biased u8 = ERR std and var only support floating point and complex dtypes
var_biased bool = ERR std and var only support floating point and complex dtypes
var_biased bool_t = ERR std and var only support floating point and complex dtypes
var_d0 contig = float64 [4] 4.75, 2.3333333333333335, 6.583333333333333, 1.5833333333333335
var_d0 t = float64 [3] 4.729166666666667, 8.5625, 4.5
var_d0 narrow = float64 [2] 2.3333333333333335, 6.583333333333333
var_d0 expand = float64 [4] 0.0, 0.0, 0.0, 0.0
var_d0 empty03 = float64 [3] NAN, NAN, NAN
var_d0 empty30 = float64 [0] 
var_d0 scalar = float64 [] NAN
var_d0 f32 = float32 [3] 0.5, 2.0, 4.5
var_d0 f64 = float64 [3] 0.5, 2.0, 4.5
var_d0 f16 = float16 [3] 0.5, 2.0, 4.5
var_d0 f16_t = float16 [2] 2.333984375, 1.3330078125
var_d0 bf16 = bfloat16 [3] 0.5, 2.0, 4.5
var_d0 i64 = ERR std and var only support floating point and complex dtypes
var_d0 i32 = ERR std and var only support floating point and complex dtypes
var_d0 i32_t = ERR std and var only support floating point and complex dtypes
var_d0 u8 = ERR std and var only support floating point and complex dtypes
var_d0 bool = ERR std and var only support floating point and complex dtypes
var_d0 bool_t = ERR std and var only support floating point and complex dtypes
var_d1_c0_keep contig = float64 [3, 1] 3.546875, 6.421875, 3.375
var_d1_c0_keep t = float64 [4, 1] 3.1666666666666665, 1.5555555555555556, 4.388888888888888, 1.0555555555555556
var_d1_c0_keep narrow = float64 [3, 1] 6.25, 1.0, 0.5625
var_d1_c0_keep expand = float64 [3, 1] 6.421875, 6.421875, 6.421875
var_d1_c0_keep empty03 = float64 [0, 1] 
var_d1_c0_keep empty30 = float64 [3, 1] NAN, NAN, NAN
var_d1_c0_keep scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
var_d1_c0_keep f32 = float32 [2, 1] 1.5555555820465088, 0.8888888955116272
var_d1_c0_keep f64 = float64 [2, 1] 1.5555555555555554, 0.888888888888889
var_d1_c0_keep f16 = float16 [2, 1] 1.5556640625, 0.888671875
var_d1_c0_keep f16_t = float16 [3, 1] 0.25, 1.0, 2.25
var_d1_c0_keep bf16 = bfloat16 [2, 1] 1.5546875, 0.890625
var_d1_c0_keep i64 = ERR std and var only support floating point and complex dtypes
var_d1_c0_keep i32 = ERR std and var only support floating point and complex dtypes
var_d1_c0_keep i32_t = ERR std and var only support floating point and complex dtypes
var_d1_c0_keep u8 = ERR std and var only support floating point and complex dtypes
var_d1_c0_keep bool = ERR std and var only support floating point and complex dtypes
var_d1_c0_keep bool_t = ERR std and var only support floating point and complex dtypes
std contig = float64 [] 2.220769727328383
std t = float64 [] 2.220769727328383
std narrow = float64 [] 1.9083151381956458
std expand = float64 [] 2.646824855970228
std empty03 = float64 [] NAN
std empty30 = float64 [] NAN
std scalar = float64 [] NAN
std f32 = float32 [] 1.2110601663589478
std f64 = float64 [] 1.2110601416389968
std f16 = float16 [] 1.2109375
std f16_t = float16 [] 1.2109375
std bf16 = bfloat16 [] 1.2109375
std i64 = ERR std and var only support floating point and complex dtypes
std i32 = ERR std and var only support floating point and complex dtypes
std i32_t = ERR std and var only support floating point and complex dtypes
std u8 = ERR std and var only support floating point and complex dtypes
std bool = ERR std and var only support floating point and complex dtypes
std bool_t = ERR std and var only support floating point and complex dtypes
std_dm1 contig = float64 [3] 2.174664725116648, 2.9261749776799064, 2.1213203435596424
std_dm1 t = float64 [4] 2.179449471770337, 1.5275252316519468, 2.565800719723442, 1.2583057392117918
std_dm1 narrow = float64 [3] 3.5355339059327378, 1.4142135623730951, 1.0606601717798212
std_dm1 expand = float64 [3] 2.9261749776799064, 2.9261749776799064, 2.9261749776799064
std_dm1 empty03 = float64 [0] 
std_dm1 empty30 = float64 [3] NAN, NAN, NAN
std_dm1 scalar = float64 [] NAN
std_dm1 f32 = float32 [2] 1.5275251865386963, 1.154700517654419
std_dm1 f64 = float64 [2] 1.5275252316519465, 1.1547005383792517
std_dm1 f16 = float16 [2] 1.52734375, 1.154296875
std_dm1 f16_t = float16 [3] 0.70703125, 1.4140625, 2.12109375
std_dm1 bf16 = bfloat16 [2] 1.53125, 1.15625
std_dm1 i64 = ERR std and var only support floating point and complex dtypes
std_dm1 i32 = ERR std and var only support floating point and complex dtypes
std_dm1 i32_t = ERR std and var only support floating point and complex dtypes
std_dm1 u8 = ERR std and var only support floating point and complex dtypes
std_dm1 bool = ERR std and var only support floating point and complex dtypes
std_dm1 bool_t = ERR std and var only support floating point and complex dtypes
logsumexp_d01 contig = float64 [] 5.466188680919439
logsumexp_d01 t = float64 [] 5.466188680919439
logsumexp_d01 narrow = float64 [] 3.206034526296355
logsumexp_d01 expand = float64 [] 5.810284370254566
logsumexp_d01 empty03 = float64 [] -INF
logsumexp_d01 empty30 = float64 [] -INF
logsumexp_d01 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
logsumexp_d01 f32 = float32 [] 3.678372859954834
logsumexp_d01 f64 = float64 [] 3.6783727249750235
logsumexp_d01 f16 = float16 [] 3.677734375
logsumexp_d01 f16_t = float16 [] 3.677734375
logsumexp_d01 bf16 = bfloat16 [] 3.671875
logsumexp_d01 i64 = float32 [] 3.678372859954834
logsumexp_d01 i32 = float32 [] 3.678372859954834
logsumexp_d01 i32_t = float32 [] 3.678372859954834
logsumexp_d01 u8 = float32 [] 3.678372859954834
logsumexp_d01 bool = float32 [] 2.5551419258117676
logsumexp_d01 bool_t = float32 [] 2.5551419258117676
logsumexp_d1 contig = float64 [3] 3.3761752419655715, 4.711672081586456, 4.564975344944648
logsumexp_d1 t = float64 [4] 4.54737299122649, 1.3490122167681866, 3.0362695651247793, 4.7663678998071335
logsumexp_d1 narrow = float64 [3] 3.006715348489118, 0.1269280110429726, 1.2014132779827524
logsumexp_d1 expand = float64 [3] 4.711672081586456, 4.711672081586456, 4.711672081586456
logsumexp_d1 empty03 = float64 [0] 
logsumexp_d1 empty30 = float64 [3] -INF, -INF, -INF
logsumexp_d1 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
logsumexp_d1 f32 = float32 [2] 3.1698460578918457, 2.7586236000061035
logsumexp_d1 f64 = float64 [2] 3.1698460195562856, 2.7586236756795133
logsumexp_d1 f16 = float16 [2] 3.169921875, 2.7578125
logsumexp_d1 f16_t = float16 [3] 2.3125, 2.126953125, 3.048828125
logsumexp_d1 bf16 = bfloat16 [2] 3.171875, 2.765625
logsumexp_d1 i64 = float32 [2] 3.1698460578918457, 2.7586236000061035
logsumexp_d1 i32 = float32 [2] 3.1698460578918457, 2.7586236000061035
logsumexp_d1 i32_t = float32 [3] 2.3132617473602295, 2.1269280910491943, 3.0485873222351074
logsumexp_d1 u8 = float32 [2] 3.1698460578918457, 2.7586236000061035
logsumexp_d1 bool = float32 [2] 1.861994743347168, 1.861994743347168
logsumexp_d1 bool_t = float32 [3] 1.6931471824645996, 1.31326162815094, 1.31326162815094
logsumexp_d0_keep contig = float64 [1, 4] 4.54737299122649, 1.3490122167681866, 3.0362695651247793, 4.7663678998071335
logsumexp_d0_keep t = float64 [1, 3] 3.3761752419655715, 4.711672081586456, 4.564975344944648
logsumexp_d0_keep narrow = float64 [1, 2] 1.3490122167681866, 3.0362695651247793
logsumexp_d0_keep expand = float64 [1, 4] 5.59861228866811, 1.0986122886681098, -0.9013877113318902, 4.09861228866811
logsumexp_d0_keep empty03 = float64 [1, 3] -INF, -INF, -INF
logsumexp_d0_keep empty30 = float64 [1, 0] 
logsumexp_d0_keep scalar = float64 [] 2.5
logsumexp_d0_keep f32 = float32 [1, 3] 2.3132617473602295, 2.1269280910491943, 3.0485873222351074
logsumexp_d0_keep f64 = float64 [1, 3] 2.313261687518223, 2.1269280110429727, 3.048587351573742
logsumexp_d0_keep f16 = float16 [1, 3] 2.3125, 2.126953125, 3.048828125
logsumexp_d0_keep f16_t = float16 [1, 2] 3.169921875, 2.7578125
logsumexp_d0_keep bf16 = bfloat16 [1, 3] 2.3125, 2.125, 3.046875
logsumexp_d0_keep i64 = float32 [1, 3] 2.3132617473602295, 2.1269280910491943, 3.0485873222351074
logsumexp_d0_keep i32 = float32 [1, 3] 2.3132617473602295, 2.1269280910491943, 3.0485873222351074
logsumexp_d0_keep i32_t = float32 [1, 2] 3.1698460578918457, 2.7586236000061035
logsumexp_d0_keep u8 = float32 [1, 3] 2.3132617473602295, 2.1269280910491943, 3.0485873222351074
logsumexp_d0_keep bool = float32 [1, 3] 1.6931471824645996, 1.31326162815094, 1.31326162815094
logsumexp_d0_keep bool_t = float32 [1, 2] 1.861994743347168, 1.861994743347168
cumsum_d0 contig = float64 [3, 4] 0.5, -2.0, 3.0, 2.0, 5.0, -2.0, 1.0, 5.0, 6.0, -1.0, 0.5, 9.5
cumsum_d0 t = float64 [4, 3] 0.5, 4.5, 1.0, -1.5, 4.5, 2.0, 1.5, 2.5, 1.5, 3.5, 5.5, 6.0
cumsum_d0 narrow = float64 [3, 2] -2.0, 3.0, -2.0, 1.0, -1.0, 0.5
cumsum_d0 expand = float64 [3, 4] 4.5, 0.0, -2.0, 3.0, 9.0, 0.0, -4.0, 6.0, 13.5, 0.0, -6.0, 9.0
cumsum_d0 empty03 = float64 [0, 3] 
cumsum_d0 empty30 = float64 [3, 0] 
cumsum_d0 scalar = float64 [] 2.5
cumsum_d0 f32 = float32 [2, 3] 1.0, 0.0, 3.0, 3.0, 2.0, 3.0
cumsum_d0 f64 = float64 [2, 3] 1.0, 0.0, 3.0, 3.0, 2.0, 3.0
cumsum_d0 f16 = float16 [2, 3] 1.0, 0.0, 3.0, 3.0, 2.0, 3.0
cumsum_d0 f16_t = float16 [3, 2] 1.0, 2.0, 1.0, 4.0, 4.0, 4.0
cumsum_d0 bf16 = bfloat16 [2, 3] 1.0, 0.0, 3.0, 3.0, 2.0, 3.0
cumsum_d0 i64 = int64 [2, 3] 1.0, 0.0, 3.0, 3.0, 2.0, 3.0
cumsum_d0 i32 = int64 [2, 3] 1.0, 0.0, 3.0, 3.0, 2.0, 3.0
cumsum_d0 i32_t = int64 [3, 2] 1.0, 2.0, 1.0, 4.0, 4.0, 4.0
cumsum_d0 u8 = int64 [2, 3] 1.0, 0.0, 3.0, 3.0, 2.0, 3.0
cumsum_d0 bool = int64 [2, 3] 1.0, 0.0, 1.0, 2.0, 1.0, 1.0
cumsum_d0 bool_t = int64 [3, 2] 1.0, 1.0, 1.0, 2.0, 2.0, 2.0
cumsum_d1 contig = float64 [3, 4] 0.5, -1.5, 1.5, 3.5, 4.5, 4.5, 2.5, 5.5, 1.0, 2.0, 1.5, 6.0
cumsum_d1 t = float64 [4, 3] 0.5, 5.0, 6.0, -2.0, -2.0, -1.0, 3.0, 1.0, 0.5, 2.0, 5.0, 9.5
cumsum_d1 narrow = float64 [3, 2] -2.0, 1.0, 0.0, -2.0, 1.0, 0.5
cumsum_d1 expand = float64 [3, 4] 4.5, 4.5, 2.5, 5.5, 4.5, 4.5, 2.5, 5.5, 4.5, 4.5, 2.5, 5.5
cumsum_d1 empty03 = float64 [0, 3] 
cumsum_d1 empty30 = float64 [3, 0] 
cumsum_d1 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
cumsum_d1 f32 = float32 [2, 3] 1.0, 1.0, 4.0, 2.0, 4.0, 4.0
cumsum_d1 f64 = float64 [2, 3] 1.0, 1.0, 4.0, 2.0, 4.0, 4.0
cumsum_d1 f16 = float16 [2, 3] 1.0, 1.0, 4.0, 2.0, 4.0, 4.0
cumsum_d1 f16_t = float16 [3, 2] 1.0, 3.0, 0.0, 2.0, 3.0, 3.0
cumsum_d1 bf16 = bfloat16 [2, 3] 1.0, 1.0, 4.0, 2.0, 4.0, 4.0
cumsum_d1 i64 = int64 [2, 3] 1.0, 1.0, 4.0, 2.0, 4.0, 4.0
cumsum_d1 i32 = int64 [2, 3] 1.0, 1.0, 4.0, 2.0, 4.0, 4.0
cumsum_d1 i32_t = int64 [3, 2] 1.0, 3.0, 0.0, 2.0, 3.0, 3.0
cumsum_d1 u8 = int64 [2, 3] 1.0, 1.0, 4.0, 2.0, 4.0, 4.0
cumsum_d1 bool = int64 [2, 3] 1.0, 1.0, 2.0, 1.0, 2.0, 2.0
cumsum_d1 bool_t = int64 [3, 2] 1.0, 2.0, 0.0, 1.0, 1.0, 1.0
softmax_d0 contig = float64 [3, 4] 0.017468203540633418, 0.03511902695933972, 0.9643802951468596, 0.0628900132458675, 0.9537315977210048, 0.2594964603424191, 0.00649794331566194, 0.17095278019779026, 0.02880019873836161, 0.7053845126982411, 0.0291217615374784, 0.7661572065563422
softmax_d0 t = float64 [4, 3] 0.05634987583464626, 0.8092300154856773, 0.028297683156530792, 0.0046254794803438064, 0.008989733440672157, 0.028297683156530792, 0.6864820220419687, 0.001216628121415015, 0.006314066574546241, 0.2525426226430412, 0.18056362295223552, 0.9370905671123921
softmax_d0 narrow = float64 [3, 2] 0.03511902695933972, 0.9643802951468596, 0.2594964603424191, 0.00649794331566194, 0.7053845126982411, 0.0291217615374784
softmax_d0 expand = float64 [3, 4] 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333
softmax_d0 empty03 = float64 [0, 3] 
softmax_d0 empty30 = float64 [3, 0] 
softmax_d0 scalar = float64 [] 1.0
softmax_d0 f32 = float32 [2, 3] 0.2689414322376251, 0.11920291930437088, 0.9525741338729858, 0.7310585975646973, 0.8807970285415649, 0.04742587357759476
softmax_d0 f64 = float64 [2, 3] 0.2689414213699951, 0.11920292202211755, 0.9525741268224334, 0.7310585786300049, 0.8807970779778823, 0.04742587317756679
softmax_d0 f16 = float16 [2, 3] 0.26904296875, 0.1192626953125, 0.95263671875, 0.73095703125, 0.880859375, 0.04742431640625
softmax_d0 f16_t = float16 [3, 2] 0.1142578125, 0.46826171875, 0.0419921875, 0.46826171875, 0.84375, 0.06341552734375
softmax_d0 bf16 = bfloat16 [2, 3] 0.267578125, 0.11962890625, 0.953125, 0.73046875, 0.87890625, 0.04736328125
softmax_d0 i64 = ERR "softmax_kernel_impl" not implemented for 'Long'
softmax_d0 i32 = ERR "softmax_kernel_impl" not implemented for 'Int'
softmax_d0 i32_t = ERR "softmax_kernel_impl" not implemented for 'Int'
softmax_d0 u8 = ERR "softmax_kernel_impl" not implemented for 'Byte'
softmax_d0 bool = ERR "softmax_kernel_impl" not implemented for 'Bool'
softmax_d0 bool_t = ERR "softmax_kernel_impl" not implemented for 'Bool'
softmax_d1 contig = float64 [3, 4] 0.05634987583464627, 0.0046254794803438064, 0.6864820220419687, 0.2525426226430412, 0.8092300154856773, 0.008989733440672157, 0.0012166281214150152, 0.18056362295223552, 0.028297683156530792, 0.028297683156530792, 0.0063140665745462414, 0.9370905671123921
softmax_d1 t = float64 [4, 3] 0.017468203540633418, 0.9537315977210048, 0.028800198738361607, 0.03511902695933972, 0.2594964603424191, 0.7053845126982411, 0.9643802951468596, 0.00649794331566194, 0.0291217615374784, 0.0628900132458675, 0.17095278019779026, 0.7661572065563422
softmax_d1 narrow = float64 [3, 2] 0.006692850924284856, 0.9933071490757153, 0.8807970779778823, 0.11920292202211755, 0.8175744761936437, 0.18242552380635632
softmax_d1 expand = float64 [3, 4] 0.8092300154856773, 0.008989733440672157, 0.0012166281214150152, 0.18056362295223552, 0.8092300154856773, 0.008989733440672157, 0.0012166281214150152, 0.18056362295223552, 0.8092300154856773, 0.008989733440672157, 0.0012166281214150152, 0.18056362295223552
softmax_d1 empty03 = float64 [0, 3] 
softmax_d1 empty30 = float64 [3, 0] 
softmax_d1 scalar = ERR Dimension out of range (expected to be in range of [-1, 0], but got 1)
softmax_d1 f32 = float32 [2, 3] 0.11419519037008286, 0.04201006516814232, 0.8437947034835815, 0.46831053495407104, 0.46831053495407104, 0.06337893754243851
softmax_d1 f64 = float64 [2, 3] 0.11419519938459449, 0.04201006613406605, 0.8437947344813395, 0.4683105308334812, 0.4683105308334812, 0.06337893833303762
softmax_d1 f16 = float16 [2, 3] 0.11419677734375, 0.042022705078125, 0.84375, 0.46826171875, 0.46826171875, 0.0633544921875
softmax_d1 f16_t = float16 [3, 2] 0.26904296875, 0.73095703125, 0.11920166015625, 0.880859375, 0.95263671875, 0.04742431640625
softmax_d1 bf16 = bfloat16 [2, 3] 0.1142578125, 0.0419921875, 0.84375, 0.46875, 0.46875, 0.0634765625
softmax_d1 i64 = ERR "softmax_lastdim_kernel_impl" not implemented for 'Long'
softmax_d1 i32 = ERR "softmax_lastdim_kernel_impl" not implemented for 'Int'
softmax_d1 i32_t = ERR "softmax_lastdim_kernel_impl" not implemented for 'Int'
softmax_d1 u8 = ERR "softmax_lastdim_kernel_impl" not implemented for 'Byte'
softmax_d1 bool = ERR "softmax_lastdim_kernel_impl" not implemented for 'Bool'
softmax_d1 bool_t = ERR "softmax_lastdim_kernel_impl" not implemented for 'Bool'
log_softmax_d0 contig = float64 [3, 4] -4.04737299122649, -3.3490122167681866, -0.03626956512477912, -2.7663678998071335, -0.04737299122649023, -1.3490122167681866, -5.036269565124779, -1.7663678998071337, -3.5473729912264904, -0.3490122167681865, -3.5362695651247793, -0.26636789980713366
log_softmax_d0 t = float64 [4, 3] -2.8761752419655715, -0.2116720815864557, -3.5649753449446484, -5.376175241965571, -4.711672081586456, -3.5649753449446484, -0.3761752419655715, -6.711672081586456, -5.064975344944648, -1.3761752419655715, -1.7116720815864557, -0.06497534494464824
log_softmax_d0 narrow = float64 [3, 2] -3.3490122167681866, -0.03626956512477912, -1.3490122167681866, -5.036269565124779, -0.3490122167681865, -3.5362695651247793
log_softmax_d0 expand = float64 [3, 4] -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098, -1.0986122886681098
log_softmax_d0 empty03 = float64 [0, 3] 
log_softmax_d0 empty30 = float64 [3, 0] 
log_softmax_d0 scalar = float64 [] 0.0
log_softmax_d0 f32 = float32 [2, 3] -1.31326162815094, -2.1269280910491943, -0.04858732968568802, -0.31326165795326233, -0.12692804634571075, -3.0485873222351074
log_softmax_d0 f64 = float64 [2, 3] -1.3132616875182228, -2.1269280110429727, -0.048587351573741965, -0.31326168751822286, -0.1269280110429726, -3.048587351573742
log_softmax_d0 f16 = float16 [2, 3] -1.3134765625, -2.126953125, -0.048583984375, -0.313232421875, -0.126953125, -3.048828125
log_softmax_d0 f16_t = float16 [3, 2] -2.169921875, -0.7587890625, -3.169921875, -0.7587890625, -0.1697998046875, -2.7578125
log_softmax_d0 bf16 = bfloat16 [2, 3] -1.3125, -2.125, -0.048583984375, -0.3125, -0.126953125, -3.046875
log_softmax_d0 i64 = ERR "log_softmax_kernel_impl" not implemented for 'Long'
log_softmax_d0 i32 = ERR "log_softmax_kernel_impl" not implemented for 'Int'
log_softmax_d0 i32_t = ERR "log_softmax_kernel_impl" not implemented for 'Int'
log_softmax_d0 u8 = ERR "log_softmax_kernel_impl" not implemented for 'Byte'
log_softmax_d0 bool = ERR "log_softmax_kernel_impl" not implemented for 'Bool'
log_softmax_d0 bool_t = ERR "log_softmax_kernel_impl" not implemented for 'Bool'
log_softmax_dm1 contig = float64 [3, 4] -2.8761752419655715, -5.376175241965571, -0.3761752419655715, -1.3761752419655715, -0.2116720815864557, -4.711672081586456, -6.711672081586456, -1.7116720815864557, -3.5649753449446484, -3.5649753449446484, -5.064975344944648, -0.06497534494464824
log_softmax_dm1 t = float64 [4, 3] -4.04737299122649, -0.04737299122649023, -3.5473729912264904, -3.3490122167681866, -1.3490122167681866, -0.3490122167681865, -0.03626956512477912, -5.036269565124779, -3.5362695651247793, -2.7663678998071335, -1.7663678998071337, -0.26636789980713366
log_softmax_dm1 narrow = float64 [3, 2] -5.006715348489118, -0.006715348489117967, -0.1269280110429726, -2.1269280110429727, -0.20141327798275246, -1.7014132779827524
log_softmax_dm1 expand = float64 [3, 4] -0.2116720815864557, -4.711672081586456, -6.711672081586456, -1.7116720815864557, -0.2116720815864557, -4.711672081586456, -6.711672081586456, -1.7116720815864557, -0.2116720815864557, -4.711672081586456, -6.711672081586456, -1.7116720815864557
log_softmax_dm1 empty03 = float64 [0, 3] 
log_softmax_dm1 empty30 = float64 [3, 0] 
log_softmax_dm1 scalar = float64 [] 0.0
log_softmax_dm1 f32 = float32 [2, 3] -2.1698460578918457, -3.1698460578918457, -0.1698460429906845, -0.7586236596107483, -0.7586236596107483, -2.7586236000061035
log_softmax_dm1 f64 = float64 [2, 3] -2.1698460195562856, -3.1698460195562856, -0.16984601955628567, -0.7586236756795135, -0.7586236756795135, -2.7586236756795133
log_softmax_dm1 f16 = float16 [2, 3] -2.169921875, -3.169921875, -0.170166015625, -0.75830078125, -0.75830078125, -2.7578125
log_softmax_dm1 f16_t = float16 [3, 2] -1.3134765625, -0.3134765625, -2.126953125, -0.1273193359375, -0.048614501953125, -3.048828125
log_softmax_dm1 bf16 = bfloat16 [2, 3] -2.171875, -3.171875, -0.171875, -0.76171875, -0.76171875, -2.765625
log_softmax_dm1 i64 = ERR "log_softmax_lastdim_kernel_impl" not implemented for 'Long'
log_softmax_dm1 i32 = ERR "log_softmax_lastdim_kernel_impl" not implemented for 'Int'
log_softmax_dm1 i32_t = ERR "log_softmax_lastdim_kernel_impl" not implemented for 'Int'
log_softmax_dm1 u8 = ERR "log_softmax_lastdim_kernel_impl" not implemented for 'Byte'
log_softmax_dm1 bool = ERR "log_softmax_lastdim_kernel_impl" not implemented for 'Bool'
log_softmax_dm1 bool_t = ERR "log_softmax_lastdim_kernel_impl" not implemented for 'Bool'
"#;

/// The inputs of the table, by name.
fn input(name: &str) -> Tensor {
    let x = Tensor::new(&[[0.5f64, -2.0, 3.0, 2.0], [4.5, 0.0, -2.0, 3.0], [1.0, 1.0, -0.5, 4.5]]);
    let y = Tensor::new(&[[1.0f64, 0.0, 3.0], [2.0, 2.0, 0.0]]);
    let (dtype, transposed) = match name {
        "contig" => return x,
        "t" => return x.t(),
        "narrow" => return x.narrow(1, 1, 2),
        "expand" => return x.narrow(0, 1, 1).expand([3, 4]),
        "empty03" => return Tensor::zeros_opts([0, 3], DType::F64, kiln::Device::Cpu),
        "empty30" => return Tensor::zeros_opts([3, 0], DType::F64, kiln::Device::Cpu),
        "scalar" => return Tensor::new(&2.5f64),
        other => {
            let (d, t) = other.split_once('_').map_or((other, false), |(d, _)| (d, true));
            (
                DType::ALL
                    .into_iter()
                    .find(|dt| short_name(*dt) == d)
                    .unwrap_or_else(|| panic!("unknown input {other}")),
                t,
            )
        }
    };
    let y = y.to_dtype(dtype);
    if transposed {
        y.t()
    } else {
        y
    }
}

fn short_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I64 => "i64",
        DType::I32 => "i32",
        DType::U8 => "u8",
        DType::Bool => "bool",
    }
}

type Op = fn(&Tensor) -> kiln::Result<Vec<Tensor>>;

/// The ops of the table, by name (the same list the PyTorch script ran).
fn ops() -> Vec<(&'static str, Op)> {
    vec![
        ("sum", |t| Ok(vec![t.try_sum()?])),
        ("sum_d0", |t| Ok(vec![t.try_sum_dim(0)?])),
        ("sum_dm1_keep", |t| Ok(vec![t.try_sum_dim_keepdim(-1)?])),
        ("sum_d01", |t| Ok(vec![t.try_sum_dim([0, 1])?])),
        ("mean", |t| Ok(vec![t.try_mean()?])),
        ("mean_d0", |t| Ok(vec![t.try_mean_dim(0)?])),
        ("mean_dm1_keep", |t| Ok(vec![t.try_mean_dim_keepdim(-1)?])),
        ("prod", |t| Ok(vec![t.try_prod()?])),
        ("prod_d1", |t| Ok(vec![t.try_prod_dim(1)?])),
        ("max", |t| Ok(vec![t.try_max()?])),
        ("min", |t| Ok(vec![t.try_min()?])),
        ("amax_d0", |t| Ok(vec![t.try_amax(0)?])),
        ("amin_dm1_keep", |t| Ok(vec![t.try_amin_keepdim(-1)?])),
        ("max_dim_d1", |t| t.try_max_dim(1).map(|(v, i)| vec![v, i])),
        ("min_dim_d0_keep", |t| t.try_min_dim_keepdim(0).map(|(v, i)| vec![v, i])),
        ("argmax", |t| Ok(vec![t.try_argmax()?])),
        ("argmin", |t| Ok(vec![t.try_argmin()?])),
        ("argmax_d0", |t| Ok(vec![t.try_argmax_dim(0)?])),
        ("argmin_d1_keep", |t| Ok(vec![t.try_argmin_dim_keepdim(1)?])),
        ("all", |t| Ok(vec![t.try_all()?])),
        ("any", |t| Ok(vec![t.try_any()?])),
        ("all_d1", |t| Ok(vec![t.try_all_dim(1)?])),
        ("any_d0_keep", |t| Ok(vec![t.try_any_dim_keepdim(0)?])),
        ("var", |t| Ok(vec![t.try_var()?])),
        ("var_biased", |t| Ok(vec![t.try_var_correction([], 0, false)?])),
        ("var_d0", |t| Ok(vec![t.try_var_dim(0)?])),
        ("var_d1_c0_keep", |t| Ok(vec![t.try_var_correction(1, 0, true)?])),
        ("std", |t| Ok(vec![t.try_std()?])),
        ("std_dm1", |t| Ok(vec![t.try_std_dim(-1)?])),
        ("logsumexp_d01", |t| Ok(vec![t.try_logsumexp([0, 1])?])),
        ("logsumexp_d1", |t| Ok(vec![t.try_logsumexp(1)?])),
        ("logsumexp_d0_keep", |t| Ok(vec![t.try_logsumexp_keepdim(0)?])),
        ("cumsum_d0", |t| Ok(vec![t.try_cumsum(0)?])),
        ("cumsum_d1", |t| Ok(vec![t.try_cumsum(1)?])),
        ("softmax_d0", |t| Ok(vec![t.try_softmax(0)?])),
        ("softmax_d1", |t| Ok(vec![t.try_softmax(1)?])),
        ("log_softmax_d0", |t| Ok(vec![t.try_log_softmax(0)?])),
        ("log_softmax_dm1", |t| Ok(vec![t.try_log_softmax(-1)?])),
    ]
}

fn parse_value(s: &str) -> f64 {
    match s {
        "NAN" => f64::NAN,
        "INF" => f64::INFINITY,
        "-INF" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value {v}")),
    }
}

/// Relative tolerance of results of a dtype (PyTorch and kiln may round differently in the
/// last place: kiln accumulates floats in f64).
fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 1e-2,
        _ => 0.0,
    }
}

/// True when `got` equals `want` within `tol` (relative, with an absolute floor), NaN matching
/// NaN and infinities matching exactly.
fn close(got: f64, want: f64, tol: f64) -> bool {
    if want.is_nan() || want.is_infinite() {
        return got.is_nan() == want.is_nan() && (want.is_nan() || got == want);
    }
    (got - want).abs() <= tol * want.abs().max(1.0)
}

/// The part of PyTorch's error message kiln's must contain.
fn expected_phrase(torch: &str) -> String {
    let msg = torch.split_once("(): ").map_or(torch, |(_, m)| m);
    for key in ["to have non-zero size", "input.numel() == 0", "std and var only support floating point"] {
        let probe = if key == "to have non-zero size" { "non-zero size" } else { key };
        if msg.to_lowercase().contains(&probe.to_lowercase()) {
            return key.to_string();
        }
    }
    if let Some(i) = msg.find("not implemented for") {
        return msg[i..].to_string();
    }
    let mut chars = msg.chars();
    chars.next().map_or(String::new(), |c| c.to_lowercase().chain(chars).collect())
}

#[test]
fn every_op_on_every_input_matches_pytorch() {
    let ops = ops();
    let mut checked = 0;
    for line in TORCH.lines().filter(|l| !l.is_empty()) {
        let (key, want) = line.split_once(" = ").unwrap();
        let (op_name, input_name) = key.split_once(' ').unwrap();
        let op = ops.iter().find(|(n, _)| *n == op_name).unwrap_or_else(|| panic!("no op {op_name}")).1;
        let got = op(&input(input_name));
        let ctx = format!("{op_name} on {input_name}");
        if let Some(torch_msg) = want.strip_prefix("ERR ") {
            let err = got.err().unwrap_or_else(|| panic!("{ctx}: expected an error like {torch_msg:?}")).to_string();
            let phrase = expected_phrase(torch_msg);
            assert!(err.contains(&phrase), "{ctx}: {err:?} does not contain {phrase:?}");
            checked += 1;
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let parts: Vec<&str> = want.split(" | ").collect();
        assert_eq!(got.len(), parts.len(), "{ctx}");
        for (t, part) in got.iter().zip(parts) {
            let (dtype, rest) = part.split_once(" [").unwrap();
            let (shape, values) = rest.split_once(']').unwrap();
            assert_eq!(t.dtype().torch_name(), dtype, "{ctx}: dtype");
            let shape: Vec<usize> = shape.split(", ").filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
            assert_eq!(t.shape(), &shape[..], "{ctx}: shape");
            let want: Vec<f64> = values.split(", ").map(str::trim).filter(|s| !s.is_empty()).map(parse_value).collect();
            let got = t.to_dtype(DType::F64).to_vec::<f64>();
            assert_eq!(got.len(), want.len(), "{ctx}");
            let tol = tolerance(t.dtype());
            for (g, w) in got.iter().zip(&want) {
                assert!(close(*g, *w, tol), "{ctx}: got {got:?}, want {want:?}");
            }
        }
        checked += 1;
    }
    assert_eq!(checked, ops.len() * 18, "every op ran on every input");
}

#[test]
fn empty_views_past_the_end_of_their_storage() {
    let e = Tensor::zeros([0, 5]).narrow(1, 3, 2); // offset 3 in an empty storage
    assert_eq!(e.sum().item::<f32>(), 0.0);
    assert_eq!(e.sum_dim(0).to_vec::<f32>(), vec![0.0, 0.0]);
    assert_eq!(e.amax(1).shape(), &[0]);
    assert_eq!(e.cumsum(1).shape(), &[0, 2]);
    assert_eq!(e.softmax(0).shape(), &[0, 2]);
    assert_eq!(e.log_softmax(1).shape(), &[0, 2]);
    assert!(e.try_max().is_err());
}

#[test]
fn dims_take_one_dim_or_a_list() {
    let x = Tensor::arange(24).to_dtype(DType::F64).reshape([2, 3, 4]);
    let dims: &[i64] = &[0, 2];
    let s = x.sum_dim_keepdim(dims);
    assert_eq!(s.shape(), &[1, 3, 1]);
    // Σ over i, k of (12 i + 4 j + k) = 2 (4·4 j + 6) + 12·4 = 32 j + 60.
    assert_eq!(s.to_vec::<f64>(), vec![60.0, 92.0, 124.0]);
    assert_eq!(x.sum_dim([-1, 0]).to_vec::<f64>(), vec![60.0, 92.0, 124.0]);
    assert_eq!(x.sum_dim(vec![2, 0]).to_vec::<f64>(), vec![60.0, 92.0, 124.0]);
    assert_eq!(x.sum_dim(&[] as &[i64]).item::<f64>(), 276.0);
    assert_eq!(x.sum_dim_keepdim(&[] as &[i64]).shape(), &[1, 1, 1]);
    assert_eq!(x.amax([0, 1]).to_vec::<f64>(), vec![20.0, 21.0, 22.0, 23.0]);
    assert_eq!(x.prod_dim(1).shape(), &[2, 4]);
    let e = x.try_sum_dim([1, -2]).unwrap_err().to_string();
    assert!(e.starts_with("sum: dim 1 appears multiple times in the list of dims [1, -2]"), "{e}");
}

#[test]
fn nan_propagates_and_ties_pick_the_first_occurrence() {
    let nan = f32::NAN;
    let x = Tensor::new(&[[1.0f32, nan, 3.0], [7.0, 2.0, 7.0]]);
    assert!(x.max().item::<f32>().is_nan());
    assert!(x.min().item::<f32>().is_nan());
    assert!(x.sum().item::<f32>().is_nan());
    let (v, i) = x.max_dim(1);
    let v = v.to_vec::<f32>();
    assert!(v[0].is_nan() && v[1] == 7.0);
    assert_eq!(i.to_vec::<i64>(), vec![1, 0]);
    let (v, i) = x.min_dim(1);
    assert!(v.to_vec::<f32>()[0].is_nan());
    assert_eq!(i.to_vec::<i64>(), vec![1, 1]);
    assert_eq!(x.argmax().item::<i64>(), 1);
    assert_eq!(x.argmin_dim(0).to_vec::<i64>(), vec![0, 0, 0]);
    assert!(x.amax(0).to_vec::<f32>()[1].is_nan());
    let sm = x.softmax(1).to_vec2::<f32>();
    assert!(sm[0].iter().all(|v| v.is_nan()) && sm[1].iter().all(|v| !v.is_nan()));
    assert!(Tensor::new(&[nan, 1.0]).all().item::<bool>());
    // f16 compares in f32 and keeps NaN.
    let h = x.to_dtype(DType::F16);
    assert!(h.amax(1).to_dtype(DType::F32).to_vec::<f32>()[0].is_nan());
    assert_eq!(h.argmax_dim(1).to_vec::<i64>(), vec![1, 0]);
    // Ties in a transposed view: the first in logical (row-major) order, not in memory order.
    let y = Tensor::new(&[[1i32, 7, 0], [7, 2, 7]]).t(); // [[1, 7], [7, 2], [0, 7]]
    assert_eq!(y.argmax().item::<i64>(), 1);
    assert_eq!(y.max_dim(0).1.to_vec::<i64>(), vec![1, 0]);
    assert_eq!(y.argmax_dim_keepdim(1).to_vec2::<i64>(), vec![vec![1], vec![0], vec![1]]);
}

#[test]
fn float_sums_do_not_drift() {
    // A plain f32 running sum of a million 0.1s is off by ~1%; kiln accumulates in f64.
    let n = 1_000_000;
    let x = Tensor::full([n], 0.1f32);
    let want = (n as f64 * 0.1f32 as f64) as f32;
    assert_eq!(x.sum().item::<f32>(), want);
    assert_eq!(x.mean().item::<f32>(), 0.1f32);
    assert_eq!(x.cumsum(0).to_vec::<f32>()[n - 1], want);
    assert_eq!(x.to_dtype(DType::BF16).sum().item::<f32>(), 100_352.0);
    assert_eq!(Tensor::ones([n]).to_dtype(DType::I32).sum().item::<i64>(), n as i64);
}

/// Deterministic values in [-1, 1).
fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// The lines of a row-major `[rows, cols]` array along `dim`, as (output position, values).
fn lines(data: &[f64], rows: usize, cols: usize, dim: usize) -> Vec<Vec<f64>> {
    if dim == 0 {
        (0..cols).map(|c| (0..rows).map(|r| data[r * cols + c]).collect()).collect()
    } else {
        (0..rows).map(|r| data[r * cols..(r + 1) * cols].to_vec()).collect()
    }
}

/// `f` of each line along `dim`, back in row-major order of the `[rows, cols]` array.
fn map_lines(data: &[f64], rows: usize, cols: usize, dim: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let mapped: Vec<Vec<f64>> = lines(data, rows, cols, dim).iter().map(|l| f(l)).collect();
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            out[r * cols + c] = if dim == 0 { mapped[c][r] } else { mapped[r][c] };
        }
    }
    out
}

fn assert_close(ctx: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{ctx}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, tol), "{ctx}[{i}]: got {g}, want {w}");
    }
}

#[test]
fn large_inputs_take_the_parallel_paths() {
    let (rows, cols) = (600, 500);
    let data = pseudo_random(rows * cols, 7);
    let x32: Vec<f32> = data.iter().map(|&v| v as f32).collect();
    let data: Vec<f64> = x32.iter().map(|&v| v as f64).collect();
    let x = Tensor::from_vec(x32, [rows, cols]);
    let xt_src = Tensor::from_vec(x.to_vec::<f32>(), [rows, cols]).t().contiguous().t(); // same values, column-major
    let f64s = |t: &Tensor| t.to_dtype(DType::F64).to_vec::<f64>();
    let mean = |l: &[f64]| l.iter().sum::<f64>() / l.len() as f64;
    let var = |l: &[f64]| {
        let m = mean(l);
        l.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (l.len() - 1) as f64
    };
    let lse = |l: &[f64]| {
        let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        m + l.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
    };
    let argmax = |l: &[f64]| l.iter().enumerate().fold(0, |b, (i, v)| if *v > l[b] { i } else { b }) as f64;
    let cumsum = |l: &[f64]| {
        l.iter()
            .scan(0.0, |s, v| {
                *s += v;
                Some(*s)
            })
            .collect::<Vec<f64>>()
    };
    let softmax = |l: &[f64]| {
        let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
        l.iter().map(|v| (v - m).exp() / s).collect::<Vec<f64>>()
    };
    for (name, t) in [("contiguous", &x), ("column-major", &xt_src)] {
        for dim in [0usize, 1] {
            let d = dim as i64;
            let ctx = |op: &str| format!("{op} dim {dim} of {name}");
            let per_line =
                |f: &dyn Fn(&[f64]) -> f64| lines(&data, rows, cols, dim).iter().map(|l| f(l)).collect::<Vec<f64>>();
            assert_close(&ctx("sum"), &f64s(&t.sum_dim(d)), &per_line(&|l| l.iter().sum()), 1e-6);
            assert_close(&ctx("mean"), &f64s(&t.mean_dim(d)), &per_line(&mean), 1e-6);
            assert_close(&ctx("var"), &f64s(&t.var_dim(d)), &per_line(&var), 1e-6);
            assert_close(&ctx("std"), &f64s(&t.std_dim(d)), &per_line(&|l| var(l).sqrt()), 1e-6);
            assert_close(&ctx("logsumexp"), &f64s(&t.logsumexp(d)), &per_line(&lse), 1e-6);
            assert_close(
                &ctx("amax"),
                &f64s(&t.amax(d)),
                &per_line(&|l| l.iter().cloned().fold(f64::MIN, f64::max)),
                0.0,
            );
            assert_close(&ctx("argmax"), &f64s(&t.argmax_dim(d)), &per_line(&argmax), 0.0);
            assert_close(&ctx("cumsum"), &f64s(&t.cumsum(d)), &map_lines(&data, rows, cols, dim, cumsum), 1e-5);
            assert_close(&ctx("softmax"), &f64s(&t.softmax(d)), &map_lines(&data, rows, cols, dim, softmax), 1e-7);
            let log_sm = map_lines(&data, rows, cols, dim, |l| softmax(l).iter().map(|v| v.ln()).collect());
            assert_close(&ctx("log_softmax"), &f64s(&t.log_softmax(d)), &log_sm, 1e-6);
        }
        assert_close(&format!("sum of {name}"), &[t.sum().item::<f64>()], &[data.iter().sum()], 1e-6);
        assert_close(&format!("var of {name}"), &[t.var().item::<f64>()], &[var(&data)], 1e-6);
    }
    // Few outputs with long reductions: each output is split across threads.
    let wide = x.reshape([2, -1]);
    let halves: Vec<f64> = data.chunks(rows * cols / 2).map(|c| c.iter().sum()).collect();
    assert_close("sum of two halves", &f64s(&wide.sum_dim(1)), &halves, 1e-6);
    // Ties across the whole input: the first index wins, also when split across threads.
    let mut v = vec![0i64; 400_000];
    v[123_456] = 9;
    v[300_000] = 9;
    v[7] = -3;
    v[399_999] = -3;
    let t = Tensor::from_vec(v, [400_000]);
    assert_eq!(t.argmax().item::<i64>(), 123_456);
    assert_eq!(t.argmin().item::<i64>(), 7);
    assert_eq!(t.max_dim(0).1.item::<i64>(), 123_456);
    assert_eq!(t.sum().item::<i64>(), 12);
    assert!(!t.all().item::<bool>() && t.any().item::<bool>());
    assert_eq!(t.view([1000, 400]).any_dim(1).sum().item::<i64>(), 4);
}

#[test]
fn errors_name_the_op_and_the_caller() {
    let x = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]]);
    let e = x.try_sum_dim(2).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "sum: dimension out of range (expected to be in range of [-2, 1], but got 2) (at tests/reduce.rs:"
        ),
        "{e}"
    );
    let e = Tensor::new(&[1i64, 2]).try_mean().unwrap_err().to_string();
    assert!(e.starts_with("mean: could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long"), "{e}");
    let e = Tensor::zeros([0, 3]).try_max().unwrap_err().to_string();
    assert!(
        e.starts_with("max: expected reduction dim to be specified for input.numel() == 0 (input shape [0, 3])"),
        "{e}"
    );
    let e = Tensor::zeros([0, 3]).try_max_dim(0).unwrap_err().to_string();
    assert!(e.starts_with("max: expected reduction dim 0 to have non-zero size (input shape [0, 3])"), "{e}");
    let e = Tensor::new(&[true]).try_argmax().unwrap_err().to_string();
    assert!(e.starts_with("argmax: does not support bool input"), "{e}");
    let e = Tensor::new(&[1u8]).try_var().unwrap_err().to_string();
    assert!(e.starts_with("var: std and var only support floating point dtypes (got uint8)"), "{e}");
    let e = x.try_cumsum(-3).unwrap_err().to_string();
    assert!(e.starts_with("cumsum: dimension out of range"), "{e}");
}

#[test]
#[should_panic(expected = "amin: expected reduction dim 1 to have non-zero size (input shape [3, 0])")]
fn panicking_forms_carry_the_message() {
    Tensor::zeros([3, 0]).amin(-1);
}
